// Sampler: picks the next token from a logits row — penalties, top-k, top-p, min-p, temperature,
// then greedy or a seeded draw that gives the same tokens on every platform. Standard library only.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"

namespace edgellm {

struct SamplerParams {
  float temperature = 0.8f;     // <= 0: greedy (argmax, ties -> lowest id)
  int top_k = 40;               // <= 0 or >= n_vocab: off
  float top_p = 0.95f;          // [0, 1]; 1: off; 0: keeps only the most likely token
  float min_p = 0.05f;          // [0, 1]; 0: off; keeps p >= min_p * p_max
  float repeat_penalty = 1.0f;  // > 0; 1: off. Divides positive logits, multiplies the others
  float frequency_penalty = 0;  // subtracted count times
  float presence_penalty = 0;   // subtracted once for any token seen in the window
  int penalty_last_n = 64;      // window of accepted tokens; 0: no penalties; -1: all of them
  uint64_t seed = 0x5EED;       // same seed, same logits -> same tokens on every platform
  // Added to a token's logit before everything else (OpenAI's logit_bias); -100 or below bans it.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// One candidate of the final distribution.
struct TokenProb {
  int32_t id;
  float p;
};

// Usage: id = sampler.sample(logits, n_vocab); sampler.accept(id); accept() also takes prompt
// tokens, which then count for the penalties as in llama.cpp's tools.
class Sampler {
 public:
  explicit Sampler(const SamplerParams& params = SamplerParams()) : params_(params), rng_(params.seed) {
    validate(params);
  }

  const SamplerParams& params() const { return params_; }

  int32_t sample(const float* logits, int n_vocab) {
    if (params_.temperature <= 0.0f) return greedy(logits, n_vocab);
    build_distribution(logits, n_vocab);
    if (cands_.size() == 1) return cands_[0].id;
    // u in [0, 1) from the top 53 bits: std::*_distribution differs between standard libraries.
    const double u = double(rng_() >> 11) * (1.0 / 9007199254740992.0);
    const double target = u * probs_total_;
    double cum = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
      cum += weights_[i];
      if (target < cum) return cands_[i].id;
    }
    return cands_.back().id;  // rounding at the very top of the range
  }

  // The distribution sample() draws from (after penalties, top-k/p, min-p, temperature), as
  // normalised probabilities; one token with p = 1 when greedy. Does not advance the RNG.
  std::vector<TokenProb> probabilities(const float* logits, int n_vocab) {
    if (params_.temperature <= 0.0f) return {TokenProb{greedy(logits, n_vocab), 1.0f}};
    build_distribution(logits, n_vocab);
    std::vector<TokenProb> out(cands_.size());
    for (size_t i = 0; i < cands_.size(); ++i)
      out[i] = TokenProb{cands_[i].id, float(weights_[i] / probs_total_)};
    return out;
  }

  void accept(int32_t token) {
    if (params_.penalty_last_n == 0) return;
    history_.push_back(token);
    if (params_.penalty_last_n > 0 && history_.size() > size_t(params_.penalty_last_n)) history_.pop_front();
  }

  // Forgets the accepted tokens and restarts the random sequence from the seed.
  void reset() {
    history_.clear();
    rng_.seed(params_.seed);
  }

  static void validate(const SamplerParams& p) {
    EDGELLM_CHECK(!std::isnan(p.temperature), "sampler: temperature is NaN");
    EDGELLM_CHECK(p.top_p >= 0.0f && p.top_p <= 1.0f, "sampler: top_p must be in [0, 1], got ", p.top_p);
    EDGELLM_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "sampler: min_p must be in [0, 1], got ", p.min_p);
    EDGELLM_CHECK(p.repeat_penalty > 0.0f && std::isfinite(p.repeat_penalty),
                  "sampler: repeat_penalty must be a finite value > 0, got ", p.repeat_penalty);
    EDGELLM_CHECK(std::isfinite(p.frequency_penalty), "sampler: frequency_penalty must be finite, got ",
                  p.frequency_penalty);
    EDGELLM_CHECK(std::isfinite(p.presence_penalty), "sampler: presence_penalty must be finite, got ",
                  p.presence_penalty);
    EDGELLM_CHECK(p.penalty_last_n >= -1, "sampler: penalty_last_n must be >= -1, got ", p.penalty_last_n);
    for (const auto& b : p.logit_bias) {
      EDGELLM_CHECK(b.first >= 0, "sampler: logit_bias token id must be >= 0, got ", b.first);
      EDGELLM_CHECK(!std::isnan(b.second), "sampler: logit_bias for token ", b.first, " is NaN");
    }
  }

 private:
  struct Cand {
    int32_t id;
    float logit;
  };
  // Total order: higher logit first, then lower id, so every standard library sorts alike.
  struct Before {
    bool operator()(const Cand& a, const Cand& b) const {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
  };

  void check_input(const float* logits, int n_vocab) const {
    EDGELLM_CHECK(logits != nullptr, "sampler: logits is null");
    EDGELLM_CHECK(n_vocab > 0, "sampler: n_vocab must be > 0, got ", n_vocab);
  }

  // cands_ = logits in id order, NaN as -inf, with the penalties applied.
  void load_logits(const float* logits, int n_vocab) {
    check_input(logits, n_vocab);
    cands_.resize(size_t(n_vocab));
    for (int i = 0; i < n_vocab; ++i) {
      const float l = logits[i];
      cands_[size_t(i)] = Cand{i, std::isnan(l) ? -std::numeric_limits<float>::infinity() : l};
    }
    for (const auto& b : params_.logit_bias) {
      if (b.first >= n_vocab) continue;
      float& l = cands_[size_t(b.first)].logit;
      l = b.second <= -100.0f ? -std::numeric_limits<float>::infinity() : l + b.second;
    }
    apply_penalties(n_vocab);
  }

  void apply_penalties(int n_vocab) {
    const SamplerParams& p = params_;
    if (history_.empty() ||
        (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f))
      return;
    counts_.clear();
    for (int32_t t : history_)
      if (t >= 0 && t < n_vocab) ++counts_[t];
    for (const auto& tc : counts_) {
      float& l = cands_[size_t(tc.first)].logit;
      l = l <= 0.0f ? l * p.repeat_penalty : l / p.repeat_penalty;
      l -= float(tc.second) * p.frequency_penalty + p.presence_penalty;
      if (std::isnan(l)) l = -std::numeric_limits<float>::infinity();  // inf - inf
    }
  }

  int32_t greedy(const float* logits, int n_vocab) {
    load_logits(logits, n_vocab);
    size_t best = 0;
    for (size_t i = 1; i < cands_.size(); ++i)
      if (cands_[i].logit > cands_[best].logit) best = i;
    return cands_[best].id;
  }

  void build_distribution(const float* logits, int n_vocab) {
    load_logits(logits, n_vocab);
    sorted_ = false;
    const float kInf = std::numeric_limits<float>::infinity();
    float max_l = -kInf;
    for (const Cand& c : cands_) max_l = std::max(max_l, c.logit);
    if (max_l == kInf || max_l == -kInf) {
      // +inf dominates: uniform over those; all -inf (nothing allowed): token 0, as greedy.
      const float keep = max_l;
      cands_.erase(std::remove_if(cands_.begin(), cands_.end(), [&](const Cand& c) { return c.logit != keep; }),
                   cands_.end());
      if (max_l == -kInf) cands_.resize(1);
      weights_.assign(cands_.size(), 1.0);
      probs_total_ = double(cands_.size());
      return;
    }
    cands_.erase(std::remove_if(cands_.begin(), cands_.end(), [&](const Cand& c) { return c.logit == -kInf; }),
                 cands_.end());
    apply_top_k();
    apply_top_p(max_l);
    apply_min_p(max_l);
    // Temperature, then softmax weights relative to the max (exp(0) = 1 keeps the sum >= 1).
    const double inv_t = 1.0 / double(params_.temperature);
    weights_.resize(cands_.size());
    probs_total_ = 0.0;
    for (size_t i = 0; i < cands_.size(); ++i) {
      weights_[i] = std::exp((double(cands_[i].logit) - double(max_l)) * inv_t);
      probs_total_ += weights_[i];
    }
  }

  void apply_top_k() {
    const int k = params_.top_k;
    if (k <= 0 || size_t(k) >= cands_.size()) return;
    std::nth_element(cands_.begin(), cands_.begin() + k, cands_.end(), Before());
    cands_.resize(size_t(k));
    std::sort(cands_.begin(), cands_.end(), Before());
    sorted_ = true;
  }

  // Keeps the smallest most-likely prefix whose probability (softmax of the current logits)
  // reaches top_p. The normaliser needs no sort. Tokens lighter than (1 - top_p) / (2 n) of the
  // total cannot reach the cut (together they weigh less than 1 - top_p), so they are dropped
  // first; the rest is sorted in a growing prefix. Same result as a full sort.
  void apply_top_p(float max_l) {
    const float p = params_.top_p;
    if (p >= 1.0f) return;
    const size_t n = cands_.size();
    double total = 0.0;
    for (const Cand& c : cands_) total += std::exp(double(c.logit) - double(max_l));
    const double target = double(p) * total;
    if (!sorted_) {
      const double light = (1.0 - double(p)) / (2.0 * double(n)) * total;
      const double min_logit = double(max_l) + std::log(light);
      cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                  [&](const Cand& c) { return double(c.logit) < min_logit; }),
                   cands_.end());
    }
    size_t sorted_n = sorted_ ? cands_.size() : 0;
    size_t want = std::min<size_t>(cands_.size(), 64);
    double cum = 0.0;
    size_t i = 0;
    for (;;) {
      if (want > sorted_n) {
        if (want * 4 >= cands_.size()) want = cands_.size();
        std::partial_sort(cands_.begin(), cands_.begin() + std::ptrdiff_t(want), cands_.end(), Before());
        sorted_n = want;
        i = 0;
        cum = 0.0;
      }
      for (; i < sorted_n; ++i) {
        cum += std::exp(double(cands_[i].logit) - double(max_l));
        if (cum >= target) {
          cands_.resize(i + 1);
          return;
        }
      }
      if (sorted_n == cands_.size()) return;  // rounding: keep everything
      want = std::min(cands_.size(), want * 8);
    }
  }

  // Keeps logits >= max + log(min_p), i.e. p >= min_p * p_max; order is preserved.
  void apply_min_p(float max_l) {
    const float p = params_.min_p;
    if (p <= 0.0f) return;
    const double threshold = double(max_l) + std::log(double(p));
    cands_.erase(std::remove_if(cands_.begin(), cands_.end(),
                                [&](const Cand& c) { return double(c.logit) < threshold; }),
                 cands_.end());
  }

  SamplerParams params_;
  std::mt19937_64 rng_;          // its sequence is fixed by the standard
  std::deque<int32_t> history_;  // [<= penalty_last_n] accepted tokens, oldest first
  std::unordered_map<int32_t, int> counts_;
  std::vector<Cand> cands_;      // [n_candidates] id order, or sorted by Before
  std::vector<double> weights_;  // [n_candidates] exp((logit - max) / T)
  double probs_total_ = 0.0;
  bool sorted_ = false;
};

}  // namespace edgellm
