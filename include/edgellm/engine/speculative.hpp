// Speculative decoding's drafts: a Drafter proposes the tokens likely to follow a sequence, which
// the token loop (DecodeLoop, engine/decode_loop.hpp) then verifies in one forward pass of the
// target model, keeping the longest prefix the target's own sampling agrees with plus the target's
// next token. Two drafters:
// - LookupDrafter (prompt lookup): the continuation of the latest earlier occurrence of the
//   sequence's last n tokens (n = 4 down to 1, longest first); no model, no memory.
// - ModelDrafter: a small model with the target's vocabulary (-md), or the target itself cut after
//   its first N layers (early exit, --draft-layers), drafting greedily with its own paged KV cache
//   (one sequence per target sequence, rolled back to the common prefix at each draft).
// Drafts are deterministic by default (a one-hot draft distribution): the verifier samples each row
// as plain decoding would and accepts the draft when the sample equals it, which is rejection
// sampling for a one-hot draft (accept x with probability p_target(x); on reject the sample is
// distributed as p_target without x, renormalized), so the output is the target's, token for token
// (with a seed: the same tokens). With SpeculativeParams::sample_drafts a model drafter samples its
// drafts from its own distribution p_draft (the request's sampler settings, no penalties) and
// reports it; the verifier then accepts x with probability min(1, p_target(x) / p_draft(x)) and on
// reject samples from max(0, p_target - p_draft), normalized: the target's distribution again.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

// Per request. Drafting happens when n_max > 0 and there is a draft source: `lookup`, or a draft
// model / early exit attached to the Session (BatchScheduler). Defaults are llama.cpp's
// (--draft-max 3, --draft-min 0, --draft-p-min 0).
struct SpeculativeParams {
  int n_max = 3;       // tokens drafted per target pass at most
  int n_min = 0;       // fewer drafted tokens than this: none are verified (a plain step)
  float p_min = 0.0f;  // model drafts: stop drafting at a token whose draft probability is below this
  bool lookup = false; // prompt lookup (n-gram match in the prompt and the text so far)
  bool adaptive = false;  // draft length follows the acceptance rate (between max(1, n_min) and n_max)
  bool sample_drafts = false;  // model drafts sampled from p_draft (temperature > 0), verified by rejection sampling
};

// The distribution each draft token was drawn from (sample_drafts); empty: one-hot drafts.
using DraftDistributions = std::vector<std::vector<TokenProb>>;

inline void validate(const SpeculativeParams& p) {
  EDGELLM_CHECK(p.n_max >= 0 && p.n_max <= 64, "speculative: --draft-max must be in 0..64, got ", p.n_max);
  EDGELLM_CHECK(p.n_min >= 0 && p.n_min <= p.n_max, "speculative: --draft-min must be in 0..--draft-max (", p.n_max,
                "), got ", p.n_min);
  EDGELLM_CHECK(p.p_min >= 0.0f && p.p_min <= 1.0f, "speculative: --draft-p-min must be in 0..1, got ", p.p_min);
}

// u in [0, 1) from the top 53 bits (as Sampler: the same on every standard library).
inline double uniform(std::mt19937_64& rng) { return double(rng() >> 11) * (1.0 / 9007199254740992.0); }

// The token of distribution d (probabilities summing to ~1) at cumulative position u * total.
inline int32_t draw(const std::vector<TokenProb>& d, double u) {
  double total = 0;
  for (const TokenProb& t : d) total += t.p;
  const double target = u * total;
  double cum = 0;
  for (const TokenProb& t : d) {
    cum += t.p;
    if (target < cum) return t.id;
  }
  return d.back().id;
}

// Rejection sampling of one draft token x drawn from p_draft against the target's distribution
// p_target: true (accept) with probability min(1, p_target(x) / p_draft(x)); false, `correction`
// drawn from max(0, p_target - p_draft) normalized (p_target itself when that is all zero).
inline bool accept_draft(const std::vector<TokenProb>& p_target, const std::vector<TokenProb>& p_draft, int32_t x,
                         std::mt19937_64& rng, int32_t& correction) {
  auto prob = [](const std::vector<TokenProb>& d, int32_t id) {
    for (const TokenProb& t : d)
      if (t.id == id) return static_cast<double>(t.p);
    return 0.0;
  };
  const double pt = prob(p_target, x), pd = prob(p_draft, x);
  if (pd <= 0 || uniform(rng) * pd < pt) return true;  // u < pt / pd
  std::vector<TokenProb> residual;
  for (const TokenProb& t : p_target) {
    const double r = static_cast<double>(t.p) - prob(p_draft, t.id);
    if (r > 0) residual.push_back(TokenProb{t.id, static_cast<float>(r)});
  }
  correction = draw(residual.empty() ? p_target : residual, uniform(rng));
  return false;
}

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to n_max tokens likely to follow `tokens` (the target sequence `seq`'s tokens, ending with
  // the token the coming pass evaluates), appended to `out` (cleared first). dist (may be null):
  // when the drafter samples (p.sample_drafts, sampler.temperature > 0), the distribution of each
  // draft token; left empty for one-hot drafts.
  virtual void draft(int seq, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams& p,
                     const SamplerParams& sampler, std::vector<int32_t>& out, DraftDistributions* dist) = 0;
};

// Prompt lookup: for n = kMaxN down to 1, the latest earlier occurrence of the last n tokens;
// its continuation (up to n_max tokens) is the draft.
class LookupDrafter final : public Drafter {
 public:
  static constexpr int kMaxN = 4;  // llama.cpp's lookup n-gram sizes: 1..4
  void draft(int, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams&, const SamplerParams&,
             std::vector<int32_t>& out, DraftDistributions* dist) override {
    out.clear();
    if (dist) dist->clear();
    const int len = static_cast<int>(tokens.size());
    for (int n = std::min(kMaxN, len - 1); n >= 1; --n) {
      const int32_t* key = tokens.data() + (len - n);
      for (int start = len - n - 1; start >= 0; --start) {  // the match ends before the key does
        if (!std::equal(key, key + n, tokens.data() + start)) continue;
        const int from = start + n;
        const int to = std::min(len, from + n_max);
        out.assign(tokens.begin() + from, tokens.begin() + to);
        return;
      }
    }
  }
};

// A draft model (same vocabulary) or the target's first n_layers layers (early exit), with its own
// KV cache: one sequence per target sequence, holding the tokens it last saw; each draft rolls it
// back to the common prefix with the target's tokens, reads the rest (chunks of n_batch), then
// drafts greedily one token per pass. The cache holds at most n_ctx tokens per sequence: a longer
// target sequence gets no draft.
class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(std::shared_ptr<const LlamaModel> model, int n_layers, ThreadPool* pool, int n_ctx, int n_batch = 512)
      : model_(std::move(model)), n_layers_(n_layers), ctx_(pool), n_batch_(std::max(1, n_batch)) {
    const LlamaConfig& c = model_->config();
    EDGELLM_CHECK(n_layers >= 0 && n_layers <= c.n_layer, "--draft-layers ", n_layers, ": the model has ", c.n_layer,
                  " layers");
    KvCacheParams kp = model_->kv_params(n_ctx);
    if (n_layers > 0) kp.n_layer = n_layers;
    kv_.reset(new PagedKvCache(kp));
  }

  const LlamaModel& model() const { return *model_; }
  int n_layers() const { return n_layers_; }  // 0: the whole draft model
  size_t kv_bytes() const { return static_cast<size_t>(kv_->blocks_used()) * kv_->block_bytes(); }

  void draft(int seq, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams& p,
             const SamplerParams& sampler, std::vector<int32_t>& out, DraftDistributions* dist) override {
    out.clear();
    if (dist) dist->clear();
    const bool sampled = dist && p.sample_drafts && sampler.temperature > 0.0f;
    if (tokens.empty() || n_max <= 0) return;
    const int max_tokens = kv_->params().max_tokens;
    if (max_tokens > 0 && static_cast<int64_t>(tokens.size()) + n_max > max_tokens) return;
    State& st = state(seq);
    // 1. Roll back to the common prefix (at least the last token is read again for its logits).
    size_t common = 0;
    while (common < st.tokens.size() && common + 1 < tokens.size() && st.tokens[common] == tokens[common]) ++common;
    kv_->truncate(st.seq, static_cast<int>(common));
    st.tokens.resize(common);
    // 2. The rest of the tokens, the last with logits.
    for (size_t i = common; i < tokens.size(); i += static_cast<size_t>(n_batch_)) {
      const size_t end = std::min(tokens.size(), i + static_cast<size_t>(n_batch_));
      b_.clear();
      for (size_t j = i; j < end; ++j) b_.add(tokens[j], static_cast<int32_t>(j), st.seq, j + 1 == tokens.size());
      model_->forward(ctx_, *kv_, b_, n_layers_);
      st.tokens.insert(st.tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(i),
                       tokens.begin() + static_cast<std::ptrdiff_t>(end));
    }
    // 3. Greedy (or sampled) drafts; each but the last is read for the next one's logits.
    const int n_vocab = model_->config().n_vocab;
    SamplerParams plain = sampler;  // p_draft: the request's settings without penalties
    plain.repeat_penalty = 1.0f;
    plain.frequency_penalty = plain.presence_penalty = 0.0f;
    plain.penalty_last_n = 0;
    for (int k = 0; k < n_max; ++k) {
      const float* logits = ctx_.logits(0);
      int32_t id;
      if (sampled) {
        std::vector<TokenProb> pd = Sampler(plain).probabilities(logits, n_vocab);
        id = draw(pd, uniform(rng_));
        const float p_id = std::find_if(pd.begin(), pd.end(), [&](const TokenProb& t) { return t.id == id; })->p;
        if (p.p_min > 0.0f && p_id < p.p_min) break;
        dist->push_back(std::move(pd));
      } else {
        id = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
        if (p.p_min > 0.0f && top_probability(logits, n_vocab, id) < p.p_min) break;
      }
      out.push_back(id);
      if (k + 1 == n_max) break;
      b_.clear();
      b_.add(id, static_cast<int32_t>(st.tokens.size()), st.seq, true);
      model_->forward(ctx_, *kv_, b_, n_layers_);
      st.tokens.push_back(id);
    }
  }

 private:
  struct State {
    int seq = -1;
    std::vector<int32_t> tokens;  // what the draft sequence holds
  };
  State& state(int seq) {
    State& st = states_[seq];
    if (st.seq < 0) st.seq = kv_->create_sequence();
    return st;
  }
  static float top_probability(const float* logits, int n, int32_t id) {
    const float mx = logits[id];
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
    return static_cast<float>(1.0 / sum);
  }

  std::shared_ptr<const LlamaModel> model_;
  int n_layers_;
  LlamaContext ctx_;
  int n_batch_;
  std::unique_ptr<PagedKvCache> kv_;
  std::map<int, State> states_;  // target sequence -> draft sequence
  Batch b_;
  std::mt19937_64 rng_{0x5EEDD4AF7ULL};  // sampled drafts
};

// Throws Error unless the draft model's vocabulary is the target's (same size, same token texts,
// same BOS / EOS): its token ids are proposed to the target as they are.
inline void check_draft_vocab(const Tokenizer& target, const Tokenizer& draft, const std::string& draft_path) {
  const Vocab& t = target.vocab();
  const Vocab& d = draft.vocab();
  EDGELLM_CHECK(t.tokens.size() == d.tokens.size(), "draft model ", draft_path, ": vocabulary of ", d.tokens.size(),
                " tokens, the target's has ", t.tokens.size(), " (-md needs the same vocabulary)");
  EDGELLM_CHECK(t.type == d.type, "draft model ", draft_path, ": tokenizer ", d.model, ", the target's is ", t.model);
  EDGELLM_CHECK(t.bos == d.bos && t.eos == d.eos, "draft model ", draft_path, ": BOS/EOS ", d.bos, "/", d.eos,
                ", the target's are ", t.bos, "/", t.eos);
  for (size_t i = 0; i < t.tokens.size(); ++i)
    EDGELLM_CHECK(t.tokens[i] == d.tokens[i], "draft model ", draft_path, ": token ", i, " is '", d.tokens[i],
                  "', the target's is '", t.tokens[i], "' (-md needs the same vocabulary)");
}

}  // namespace edgellm
