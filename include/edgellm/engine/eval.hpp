// Multiple-choice accuracy evals: each choice of an item scored by log-likelihood (piqa / hellaswag
// / ARC style); the shared prefix is evaluated once and each choice continues a fork of its KV
// sequence. Task files, answer extraction and run statistics are the tools' (tools/eval_tasks.hpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/perplexity.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

// ---- task items ----

struct McItem {
  std::string context;               // scored text continues this (include the separator in one of them)
  std::vector<std::string> choices;  // continuations, e.g. " a bowl"
  int label = 0;                     // index of the right choice
};

// ---- multiple-choice scoring ----

struct ChoiceScore {
  double logprob = 0;  // sum of log p over the choice's tokens
  int n_tokens = 0;
  size_t n_bytes = 0;  // length of the choice text, for acc_norm
};

struct McPick {
  int acc = 0;       // argmax of logprob
  int acc_norm = 0;  // argmax of logprob / n_bytes (lm-eval-harness's length normalisation)
};

// First index wins ties.
inline McPick pick_choice(const std::vector<ChoiceScore>& s) {
  EDGELLM_CHECK(!s.empty(), "pick_choice: no choices");
  McPick p;
  auto norm = [](const ChoiceScore& c) { return c.logprob / double(std::max<size_t>(c.n_bytes, 1)); };
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].logprob > s[size_t(p.acc)].logprob) p.acc = int(i);
    if (norm(s[i]) > norm(s[size_t(p.acc_norm)])) p.acc_norm = int(i);
  }
  return p;
}

inline size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Scores an item's choices by log-likelihood. The context's tokens shared by all choices are
// evaluated once; each choice's tokens are evaluated on a fork of that sequence.
class McScorer {
 public:
  McScorer(const LlamaModel& model, const Tokenizer& tok, ThreadPool* pool) : model_(model), tok_(tok), ctx_(pool) {}

  std::vector<ChoiceScore> score(const McItem& item) {
    const int n_vocab = model_.config().n_vocab;
    const std::vector<int32_t> ctx_toks = tok_.encode(item.context, tok_.add_bos(), /*parse_special=*/false);
    std::vector<std::vector<int32_t>> full;
    std::vector<size_t> start;  // first token of the choice in full[c]
    size_t shared = SIZE_MAX, longest = 0;
    for (const std::string& c : item.choices) {
      full.push_back(tok_.encode(item.context + c, tok_.add_bos(), /*parse_special=*/false));
      // Tokens can merge across the boundary; the choice starts where the context's tokens stop matching.
      start.push_back(common_prefix(ctx_toks, full.back()));
      EDGELLM_CHECK(start.back() < full.back().size(), "choice '", c, "' adds no tokens to the context");
      EDGELLM_CHECK(start.back() > 0, "the context is empty and the vocabulary adds no BOS: nothing predicts the first token");
      shared = std::min(shared, start.back());
      longest = std::max(longest, full.back().size());
    }
    PagedKvCache kv(model_.kv_params(static_cast<int>(longest)));
    const int seq = kv.create_sequence();
    Batch b;
    for (size_t i = 0; i < shared; ++i) b.add(full[0][i], int32_t(i), seq, i + 1 == shared);
    b.n_generated = 0;  // given text: prompt arithmetic however many tokens (Batch::n_generated)
    model_.forward(ctx_, kv, b);
    const std::vector<float> shared_logits(ctx_.logits(0), ctx_.logits(0) + n_vocab);  // [n_vocab] predicts token `shared`
    last_shared_ = static_cast<int>(shared);
    std::vector<ChoiceScore> out;
    for (size_t c = 0; c < full.size(); ++c) out.push_back(score_choice(kv, seq, full[c], start[c], shared, shared_logits, item.choices[c]));
    return out;
  }

  // Tokens evaluated once for all choices in the last score() call.
  int last_shared_tokens() const { return last_shared_; }

 private:
  ChoiceScore score_choice(PagedKvCache& kv, int seq, const std::vector<int32_t>& f, size_t start, size_t shared,
                           const std::vector<float>& shared_logits, const std::string& text) {
    const int n_vocab = model_.config().n_vocab;
    ChoiceScore s;
    s.n_bytes = text.size();
    s.n_tokens = static_cast<int>(f.size() - start);
    // Token t is predicted by the logits at position t - 1: position shared - 1 comes from the
    // shared pass, later ones from this choice's pass over f[shared..).
    if (start == shared) s.logprob += log_softmax_at(shared_logits.data(), n_vocab, f[shared]);
    const size_t first_out = std::max(shared, start - 1);  // first position of this pass whose logits are used
    if (first_out + 1 < f.size()) {
      const int child = kv.fork(seq);
      Batch b;
      for (size_t p = shared; p + 1 < f.size(); ++p) b.add(f[p], int32_t(p), child, p >= first_out);
      b.n_generated = 0;
      try {
        model_.forward(ctx_, kv, b);
      } catch (...) {
        kv.remove_sequence(child);
        throw;
      }
      for (size_t p = first_out; p + 1 < f.size(); ++p)
        s.logprob += log_softmax_at(ctx_.logits(int(p - first_out)), n_vocab, f[p + 1]);
      kv.remove_sequence(child);
    }
    return s;
  }

  const LlamaModel& model_;
  const Tokenizer& tok_;
  LlamaContext ctx_;
  int last_shared_ = 0;
};

}  // namespace edgellm
