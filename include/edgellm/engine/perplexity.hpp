// Perplexity and KL-divergence the way llama-perplexity computes them: the token stream is cut
// into n_ctx windows, each window starts with BOS and is evaluated from an empty cache, and only
// its second half is scored. Also the base-logits file for KL-divergence runs (our own format).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"

namespace edgellm {

// ---- scoring of one position ----

// log p(token) under softmax(logits): max-shifted, the sum of exponentials kept in double.
inline double log_softmax_at(const float* logits, int n_vocab, int token) {
  EDGELLM_CHECK(token >= 0 && token < n_vocab, "log_softmax_at: token ", token, " outside [0, ", n_vocab, ")");
  const float mx = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(mx));
  return double(logits[token]) - double(mx) - std::log(sum);
}

// out[i] = log softmax(logits)[i] for the whole row.
inline void log_softmax_row(const float* logits, int n_vocab, float* out) {
  const float mx = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(mx));
  const double lse = double(mx) + std::log(sum);
  for (int i = 0; i < n_vocab; ++i) out[i] = static_cast<float>(double(logits[i]) - lse);
}

// KL(base || q) for one position, from two rows of log-probabilities.
inline double kl_divergence(const float* base_logp, const float* logp, int n_vocab) {
  double kl = 0;
  for (int i = 0; i < n_vocab; ++i) {
    const double pb = std::exp(double(base_logp[i]));
    kl += pb * (double(base_logp[i]) - double(logp[i]));
  }
  return std::max(kl, 0.0);  // rounding can give -1e-17 on identical rows
}

inline int argmax_row(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// Mean negative log-likelihood -> PPL and its error, as llama-perplexity reports them:
// PPL = exp(mean nll), +/- PPL * stddev(nll) / sqrt(count - 1).
class PplAccumulator {
 public:
  void add(double logprob) {
    nll_ += -logprob;
    nll2_ += logprob * logprob;
    ++count_;
  }
  int64_t count() const { return count_; }
  double mean_nll() const { return count_ ? nll_ / double(count_) : 0.0; }
  double ppl() const { return std::exp(mean_nll()); }
  double ppl_error() const {
    if (count_ < 2) return 0.0;
    const double m = mean_nll(), var = nll2_ / double(count_) - m * m;
    return var > 0 ? ppl() * std::sqrt(var / double(count_ - 1)) : 0.0;
  }

 private:
  double nll_ = 0, nll2_ = 0;
  int64_t count_ = 0;
};

// Mean, error of the mean and quantiles of per-position values (KL-divergence, Δp ...).
class SampleStats {
 public:
  void add(double v) { v_.push_back(v); }
  size_t count() const { return v_.size(); }
  double mean() const {
    double s = 0;
    for (double x : v_) s += x;
    return v_.empty() ? 0.0 : s / double(v_.size());
  }
  double mean_error() const {
    if (v_.size() < 2) return 0.0;
    const double m = mean();
    double s = 0;
    for (double x : v_) s += (x - m) * (x - m);
    return std::sqrt(s / double(v_.size() - 1) / double(v_.size()));
  }
  // q in [0, 1], nearest rank on the sorted values.
  double quantile(double q) const {
    if (v_.empty()) return 0.0;
    std::vector<double> s = v_;
    std::sort(s.begin(), s.end());
    const double pos = q * double(s.size() - 1);
    return s[static_cast<size_t>(std::lround(pos))];
  }

 private:
  std::vector<double> v_;
};

// ---- chunking ----

// How llama-perplexity cuts a token stream: n_chunk windows of n_ctx tokens (a partial tail is
// dropped), positions first .. n_ctx-2 scored (predicting tokens first+1 .. n_ctx-1 of the window).
struct PplChunking {
  int n_ctx = 0;
  int n_chunk = 0;
  int first = 0;
  int n_scored() const { return n_ctx - 1 - first; }

  // max_chunks < 0: all. Throws when the text is shorter than two windows (llama-perplexity's rule).
  static PplChunking make(size_t n_tokens, int n_ctx, int max_chunks) {
    EDGELLM_CHECK(n_ctx >= 4, "perplexity: context size must be >= 4, got ", n_ctx);
    if (n_tokens < 2 * static_cast<size_t>(n_ctx))
      throw_error("perplexity: the text has ", n_tokens, " tokens; at least 2 * n_ctx = ", 2 * n_ctx, " are needed");
    PplChunking c;
    c.n_ctx = n_ctx;
    c.n_chunk = static_cast<int>(n_tokens / static_cast<size_t>(n_ctx));
    if (max_chunks >= 0) c.n_chunk = std::min(c.n_chunk, max_chunks);
    c.first = n_ctx / 2;
    return c;
  }

  // Window i: its tokens, the first replaced by BOS when the vocabulary adds one.
  std::vector<int32_t> window(const std::vector<int32_t>& tokens, int i, bool add_bos, int32_t bos) const {
    const size_t start = static_cast<size_t>(i) * static_cast<size_t>(n_ctx);
    std::vector<int32_t> w(tokens.begin() + static_cast<std::ptrdiff_t>(start),
                           tokens.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(n_ctx)));
    if (add_bos) w[0] = bos;
    return w;
  }
};

// Evaluates one window from an empty cache and returns the logits of the scored positions:
// [n_scored][n_vocab] in `out`.
inline void eval_window(const LlamaModel& model, LlamaContext& ctx, const std::vector<int32_t>& window, int first,
                        std::vector<float>& out) {
  const int n_ctx = static_cast<int>(window.size()), n_vocab = model.config().n_vocab;
  PagedKvCache kv(model.kv_params(n_ctx));
  const int seq = kv.create_sequence();
  Batch b;
  for (int i = 0; i < n_ctx; ++i) b.add(window[size_t(i)], i, seq, i >= first && i < n_ctx - 1);
  model.forward(ctx, kv, b);
  EDGELLM_CHECK(ctx.n_outputs() == n_ctx - 1 - first, "perplexity: forward gave ", ctx.n_outputs(), " logits rows, expected ",
                n_ctx - 1 - first);
  out.assign(ctx.logits(0), ctx.logits(0) + static_cast<size_t>(ctx.n_outputs()) * size_t(n_vocab));
}

// ---- base log-probabilities for KL-divergence ----
// File: "EDGEKLD1", u32 n_ctx, n_vocab, n_chunk, first; i32 tokens[n_chunk * n_ctx] (windows as
// evaluated, BOS included); then per chunk f32 log-probs [n_scored][n_vocab].
inline constexpr char kKlMagic[8] = {'E', 'D', 'G', 'E', 'K', 'L', 'D', '1'};

class KlBaseWriter {
 public:
  KlBaseWriter(const std::string& path, const PplChunking& c, int n_vocab, const std::vector<int32_t>& window_tokens)
      : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw_error("file ", path, ": cannot create");
    const uint32_t h[4] = {uint32_t(c.n_ctx), uint32_t(n_vocab), uint32_t(c.n_chunk), uint32_t(c.first)};
    put(kKlMagic, sizeof kKlMagic);
    put(h, sizeof h);
    put(window_tokens.data(), window_tokens.size() * sizeof(int32_t));
  }
  ~KlBaseWriter() {
    if (f_) std::fclose(f_);
  }
  KlBaseWriter(const KlBaseWriter&) = delete;
  KlBaseWriter& operator=(const KlBaseWriter&) = delete;
  void add_chunk(const std::vector<float>& logp) { put(logp.data(), logp.size() * sizeof(float)); }
  void close() {
    std::FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) throw_error("file ", path_, ": write failed");
  }

 private:
  void put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw_error("file ", path_, ": write failed (disk full?)");
  }
  std::string path_;
  std::FILE* f_;
};

class KlBaseReader {
 public:
  explicit KlBaseReader(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw_error("file ", path, ": cannot open");
    char magic[8];
    uint32_t h[4];
    get(magic, sizeof magic);
    if (std::memcmp(magic, kKlMagic, sizeof magic) != 0) throw_error("file ", path, ": not an edgellm KL-divergence base file");
    get(h, sizeof h);
    c_.n_ctx = int(h[0]);
    n_vocab_ = int(h[1]);
    c_.n_chunk = int(h[2]);
    c_.first = int(h[3]);
    EDGELLM_CHECK(c_.n_ctx >= 4 && c_.first >= 0 && c_.first < c_.n_ctx - 1 && n_vocab_ > 0 && c_.n_chunk > 0,
                  "file ", path, ": bad header (n_ctx ", c_.n_ctx, ", n_vocab ", n_vocab_, ", chunks ", c_.n_chunk, ")");
    tokens_.resize(size_t(c_.n_chunk) * size_t(c_.n_ctx));
    get(tokens_.data(), tokens_.size() * sizeof(int32_t));
  }
  ~KlBaseReader() { std::fclose(f_); }
  KlBaseReader(const KlBaseReader&) = delete;
  KlBaseReader& operator=(const KlBaseReader&) = delete;

  const PplChunking& chunking() const { return c_; }
  int n_vocab() const { return n_vocab_; }
  // Window i as the base model evaluated it.
  std::vector<int32_t> window(int i) const {
    const auto b = tokens_.begin() + std::ptrdiff_t(i) * c_.n_ctx;
    return std::vector<int32_t>(b, b + c_.n_ctx);
  }
  // The next chunk's log-probs: [n_scored][n_vocab].
  void next_chunk(std::vector<float>& logp) {
    logp.resize(size_t(c_.n_scored()) * size_t(n_vocab_));
    get(logp.data(), logp.size() * sizeof(float));
  }

 private:
  void get(void* p, size_t n) {
    if (n && std::fread(p, 1, n, f_) != n) throw_error("file ", path_, ": truncated");
  }
  std::string path_;
  std::FILE* f_;
  PplChunking c_;
  int n_vocab_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace edgellm
