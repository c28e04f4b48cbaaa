// Speculative decoding's drafts: a Drafter proposes the tokens likely to follow a sequence, which
// the token loop (DecodeLoop, engine/decode_loop.hpp) then verifies in one forward pass of the
// target model, keeping the longest prefix the target's own sampling agrees with plus the target's
// next token. Two drafters:
// - LookupDrafter (prompt lookup): the continuation of the latest earlier occurrence of the
//   sequence's last n tokens (n = 4 down to 1, longest first); no model, no memory.
// - ModelDrafter: a small model with the target's vocabulary (-md), or the target itself cut after
//   its first N layers (early exit, --draft-layers), drafting greedily with its own paged KV cache
//   (one sequence per target sequence, rolled back to the common prefix at each draft).
// Drafts are deterministic (a one-hot draft distribution): the verifier samples each row as plain
// decoding would and accepts the draft when the sample equals it, which is rejection sampling for
// a one-hot draft (accept x with probability p_target(x); on reject the sample is distributed as
// p_target without x, renormalized), so the output is the target's, token for token.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/thread_pool.hpp"
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
};

inline void validate(const SpeculativeParams& p) {
  EDGELLM_CHECK(p.n_max >= 0 && p.n_max <= 64, "speculative: --draft-max must be in 0..64, got ", p.n_max);
  EDGELLM_CHECK(p.n_min >= 0 && p.n_min <= p.n_max, "speculative: --draft-min must be in 0..--draft-max (", p.n_max,
                "), got ", p.n_min);
  EDGELLM_CHECK(p.p_min >= 0.0f && p.p_min <= 1.0f, "speculative: --draft-p-min must be in 0..1, got ", p.p_min);
}

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to n_max tokens likely to follow `tokens` (the target sequence `seq`'s tokens, ending with
  // the token the coming pass evaluates), appended to `out` (cleared first).
  virtual void draft(int seq, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams& p,
                     std::vector<int32_t>& out) = 0;
};

// Prompt lookup: for n = kMaxN down to 1, the latest earlier occurrence of the last n tokens;
// its continuation (up to n_max tokens) is the draft.
class LookupDrafter final : public Drafter {
 public:
  static constexpr int kMaxN = 4;  // llama.cpp's lookup n-gram sizes: 1..4
  void draft(int, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams&,
             std::vector<int32_t>& out) override {
    out.clear();
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
             std::vector<int32_t>& out) override {
    out.clear();
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
    // 3. Greedy drafts; each but the last is read for the next one's logits.
    const int n_vocab = model_->config().n_vocab;
    for (int k = 0; k < n_max; ++k) {
      const float* logits = ctx_.logits(0);
      const int32_t id = static_cast<int32_t>(std::max_element(logits, logits + n_vocab) - logits);
      if (p.p_min > 0.0f && top_probability(logits, n_vocab, id) < p.p_min) break;
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
