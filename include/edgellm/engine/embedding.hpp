// Embeddings: the model's last hidden state (after the final RMSNorm) of each text, pooled over
// its tokens (none / mean / cls / last, as llama.cpp's pooling types) and L2-normalised. Texts go
// through the batch forward path several at a time, one KV sequence each; a text longer than a
// batch continues in the next one (causal attention: the same numbers as one pass).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

// llama.cpp's values of the GGUF key <arch>.pooling_type.
enum class Pooling : int { None = 0, Mean = 1, Cls = 2, Last = 3 };

inline const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
  }
  return "?";
}

// "none" | "mean" | "cls" | "last"; Error naming `what` (a flag or option) otherwise.
inline Pooling parse_pooling(std::string_view s, std::string_view what = "pooling") {
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last})
    if (s == pooling_name(p)) return p;
  throw_error(what, ": unknown pooling '", s, "' (none, mean, cls or last)");
}

// The model file's pooling: <arch>.pooling_type (0..3); None when the key is absent (llama.cpp's
// default). Other values (rank, ...) are refused naming the key.
inline Pooling model_pooling(const LlamaModel& m) {
  const std::string key = m.config().arch + ".pooling_type";
  const int64_t v = m.file().get_int_or(key, 0);
  if (v < 0 || v > 3) throw_error(m.file().path(), ": key '", key, "' = ", v, " is not a pooling edgellm computes (0 none, 1 mean, 2 cls, 3 last)");
  return static_cast<Pooling>(v);
}

struct EmbedParams {
  std::optional<Pooling> pooling;  // unset: the model's (model_pooling)
  bool normalize = true;           // L2 norm 1 (a zero vector stays zero)
  int n_batch = 512;               // tokens per forward pass
  int n_ctx = 0;                   // longest text in tokens; 0: the model's training context
  int n_threads = 0;               // own pool's threads when no pool is given; 0: default_thread_count()
  bool add_special = true;         // BOS / EOS as the vocabulary asks (llama.cpp's add_special)
  bool parse_special = false;      // control-token text in a text is matched as control tokens
};

// One text's result: pooled, one row of n_embd; Pooling::None, one row per token.
struct Embedding {
  std::vector<float> data;  // [n_rows][n_embd]
  int n_rows = 0;
  int n_tokens = 0;         // tokens the text had
};

class Embedder {
 public:
  // pool: the threads forward() uses (null: the Embedder's own, n_threads of them).
  Embedder(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok, const EmbedParams& p = {},
           ThreadPool* pool = nullptr)
      : model_(std::move(model)), tok_(std::move(tok)), p_(p), pooling_(p.pooling ? *p.pooling : model_pooling(*model_)) {
    EDGELLM_CHECK(p.n_batch >= 1, "embed: n_batch must be >= 1, got ", p.n_batch);
    EDGELLM_CHECK(p.n_ctx >= 0, "embed: n_ctx must be >= 0, got ", p.n_ctx);
    if (!pool) {
      own_pool_ = std::make_unique<ThreadPool>(p.n_threads > 0 ? p.n_threads : default_thread_count());
      pool = own_pool_.get();
    }
    ctx_.set_pool(pool);
    ctx_.set_hidden_output(true);
  }

  Pooling pooling() const { return pooling_; }
  bool normalize() const { return p_.normalize; }
  void set_normalize(bool on) { p_.normalize = on; }
  int n_embd() const { return model_->config().n_embd; }
  int n_ctx() const { return p_.n_ctx > 0 ? p_.n_ctx : model_->config().n_ctx_train; }
  const Tokenizer& tokenizer() const { return *tok_; }

  std::vector<int32_t> tokenize(std::string_view text) const { return tok_->encode(text, p_.add_special, p_.parse_special); }

  std::vector<Embedding> embed(const std::vector<std::string>& texts) {
    std::vector<std::vector<int32_t>> toks;
    toks.reserve(texts.size());
    for (const std::string& t : texts) toks.push_back(tokenize(t));
    return embed_tokens(toks);
  }

  // Token ids as given (no BOS/EOS added). An empty list is an error naming its index.
  std::vector<Embedding> embed_tokens(const std::vector<std::vector<int32_t>>& texts) {
    const int D = n_embd();
    for (size_t i = 0; i < texts.size(); ++i) {
      EDGELLM_CHECK(!texts[i].empty(), "embed: input ", i, " has no tokens");
      EDGELLM_CHECK(static_cast<int64_t>(texts[i].size()) <= n_ctx(), "embed: input ", i, " has ", texts[i].size(),
                    " tokens, more than the context of ", n_ctx());
    }
    std::vector<Embedding> out(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      out[i].n_tokens = static_cast<int>(texts[i].size());
      out[i].n_rows = pooling_ == Pooling::None ? out[i].n_tokens : 1;
      out[i].data.assign(static_cast<size_t>(out[i].n_rows) * D, 0.0f);
    }
    PagedKvCache kv(model_->kv_params(n_ctx()));
    std::vector<int> seq(texts.size(), -1);
    std::vector<int> done(texts.size(), 0);  // tokens evaluated per text
    size_t next = 0;                          // first text not finished
    Batch b;
    std::vector<std::pair<size_t, int>> rows;  // per batch row: text, token index
    while (next < texts.size()) {
      b.clear();
      b.n_generated = 0;  // every row a prompt token: its numbers do not depend on the batch
      rows.clear();
      for (size_t t = next; t < texts.size() && b.size() < p_.n_batch; ++t) {
        if (seq[t] < 0) seq[t] = kv.create_sequence();
        const int n = static_cast<int>(texts[t].size());
        while (done[t] < n && b.size() < p_.n_batch) {
          b.add(texts[t][static_cast<size_t>(done[t])], done[t], seq[t], wanted(done[t], n));
          if (b.logits.back()) rows.emplace_back(t, done[t]);
          ++done[t];
        }
      }
      model_->forward(ctx_, kv, b);
      for (size_t r = 0; r < rows.size(); ++r) take(out[rows[r].first], rows[r].second, ctx_.hidden(static_cast<int>(r)), D);
      while (next < texts.size() && done[next] == static_cast<int>(texts[next].size())) {
        kv.remove_sequence(seq[next]);
        finish(out[next], D);
        ++next;
      }
    }
    return out;
  }

 private:
  // Whether token i of a text of n tokens contributes to its result.
  bool wanted(int i, int n) const {
    switch (pooling_) {
      case Pooling::Cls: return i == 0;
      case Pooling::Last: return i == n - 1;
      default: return true;
    }
  }
  void take(Embedding& e, int i, const float* h, int D) const {
    float* dst = e.data.data() + (pooling_ == Pooling::None ? static_cast<size_t>(i) * D : 0);
    if (pooling_ == Pooling::Mean)
      for (int j = 0; j < D; ++j) dst[j] += h[j];
    else
      std::copy_n(h, D, dst);
  }
  void finish(Embedding& e, int D) const {
    if (pooling_ == Pooling::Mean)
      for (float& v : e.data) v /= static_cast<float>(e.n_tokens);
    if (!p_.normalize) return;
    for (int r = 0; r < e.n_rows; ++r) {
      float* row = e.data.data() + static_cast<size_t>(r) * D;
      double ss = 0;
      for (int j = 0; j < D; ++j) ss += static_cast<double>(row[j]) * row[j];
      const float inv = ss > 0 ? static_cast<float>(1.0 / std::sqrt(ss)) : 0.0f;
      for (int j = 0; j < D; ++j) row[j] *= inv;
    }
  }

  std::shared_ptr<const LlamaModel> model_;
  std::shared_ptr<const Tokenizer> tok_;
  EmbedParams p_;
  Pooling pooling_;
  std::unique_ptr<ThreadPool> own_pool_;
  LlamaContext ctx_;
};

// One-shot form: embeds `texts` on a pool of p.n_threads threads.
inline std::vector<Embedding> embed(std::shared_ptr<const LlamaModel> model, std::shared_ptr<const Tokenizer> tok,
                                    const std::vector<std::string>& texts, const EmbedParams& p = {}) {
  Embedder e(std::move(model), std::move(tok), p);
  return e.embed(texts);
}

}  // namespace edgellm
