// Constrained sampling: the grammar's token mask applied to the logits (-inf) before the sampler
// chain, and the grammar advanced on the chosen token (GrammarConstraint, what the decode loop
// runs per sequence; ConstrainedSampler, a Sampler with it in front). Also the GrammarVocab of a
// Tokenizer and a cache of compiled grammars.
// Includes grammar/ and text/ (tokenizer, sampler).
#pragma once
#include <cstdint>
#include <algorithm>
#include <limits>
#include <mutex>
#include <string_view>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/grammar/completion.hpp"
#include "edgellm/grammar/matcher.hpp"
#include "edgellm/grammar/token_mask.hpp"
#include "edgellm/text/sampler.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

// The vocabulary as the grammar sees it: each token's bytes (control tokens' text included, so
// EOG ids are known), EOG ids allowed where the grammar is complete, other control tokens never.
inline std::shared_ptr<const GrammarVocab> grammar_vocab_of(const Tokenizer& tok) {
  std::vector<std::string> bytes(size_t(tok.n_vocab()));
  std::vector<int32_t> excluded;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    bytes[size_t(id)] = tok.token_to_piece(id, /*special=*/true);
    if (tok.is_control(id) && !tok.is_eog(id)) excluded.push_back(id);
  }
  return std::make_shared<const GrammarVocab>(std::move(bytes), tok.vocab().eog_ids, excluded);
}

// What a generation must match (GenerateParams::grammar): a compiled grammar, shareable across
// requests and sequences (the masker and its cache are thread-safe), and lazy triggers.
struct GrammarParams {
  std::shared_ptr<const TokenMasker> masker;  // null: unconstrained
  // Lazy: the text is free until one of these strings appears in it (control tokens' text
  // included); the grammar then matches the text from the trigger's first byte on. Empty: the
  // grammar holds from the first generated token.
  std::vector<std::string> triggers;
  explicit operator bool() const { return masker != nullptr; }
};

// One sequence's grammar state: the mask applied to a logits row, the grammar advanced on the
// chosen token, and (lazy) the search for a trigger. Copyable (a draft, a fork).
class GrammarConstraint {
 public:
  explicit GrammarConstraint(const GrammarParams& p)
      : masker_(checked(p.masker)), triggers_(p.triggers), matcher_(masker_->new_matcher()),
        active_(p.triggers.empty()) {
    for (const std::string& t : triggers_) {
      EDGELLM_CHECK(!t.empty(), "grammar: an empty trigger");
      max_trigger_ = std::max(max_trigger_, t.size());
    }
  }

  // Whether the grammar holds now (lazy: a trigger has appeared).
  bool active() const { return active_; }
  bool is_complete() const { return matcher_.is_complete(); }
  // Whether the grammar allows token id next (always while inactive).
  bool allows(int32_t id) const { return !active_ || masker_->can_accept_token(matcher_, id); }
  const GrammarMatcher& matcher() const { return matcher_; }

  // The row [n_vocab] with every token the grammar refuses at -inf (the row itself while
  // inactive); valid until the next call. Throws Error when the grammar allows no token at all.
  //
  // With a budget (tokens_left >= 0: tokens that may still be generated, this one included), a
  // state that needs about as many bytes to complete as tokens are left closes: only the tokens
  // that bring it nearest to complete stay allowed, so an answer cut by max_tokens still ends
  // as a sentence of the grammar (a JSON string and object closed) whenever its vocabulary can.
  const float* apply(const float* logits, int n_vocab, int tokens_left = -1) {
    EDGELLM_CHECK(logits != nullptr, "grammar: logits is null");
    if (!active_) return logits;
    const int n_grammar = masker_->vocab().n_vocab();
    EDGELLM_CHECK(n_vocab >= n_grammar, "grammar: a logits row of ", n_vocab, " tokens for a vocabulary of ", n_grammar);
    masker_->fill_mask(matcher_, mask_);
    EDGELLM_CHECK(mask_.count() > 0, "grammar: no token can continue the text here");
    if (tokens_left >= 0) close_within(tokens_left);
    const float kNegInf = -std::numeric_limits<float>::infinity();
    // 64 tokens a word: a refused run is filled, an allowed one copied (most words are one or
    // the other: a mask is runs of the vocabulary's ids), the rest bit by bit.
    row_.resize(size_t(n_vocab));
    const std::vector<uint64_t>& words = mask_.words();
    bool any_finite = false;
    for (size_t w = 0; w < words.size(); ++w) {
      const size_t b = w * 64, e = std::min(b + 64, size_t(n_grammar));
      const uint64_t bits = words[w];
      if (bits == 0) {
        std::fill(row_.begin() + std::ptrdiff_t(b), row_.begin() + std::ptrdiff_t(e), kNegInf);
        continue;
      }
      if (bits == ~uint64_t(0) && e == b + 64) {
        std::copy(logits + b, logits + e, row_.begin() + std::ptrdiff_t(b));
        for (size_t i = b; i < e && !any_finite; ++i) any_finite = logits[i] != kNegInf;
        continue;
      }
      for (size_t i = b; i < e; ++i) {
        const bool ok = (bits >> (i - b)) & 1;
        row_[i] = ok ? logits[i] : kNegInf;
        any_finite = any_finite || (ok && logits[i] != kNegInf);
      }
    }
    std::fill(row_.begin() + n_grammar, row_.end(), kNegInf);
    // Every allowed logit -inf (or NaN): a sampler would fall back to token 0; make them even.
    if (!any_finite)
      for (int i = 0; i < n_grammar; ++i)
        if (mask_.test(i)) row_[size_t(i)] = 0.0f;
    return row_.data();
  }

  // After token id was chosen: advances the grammar (an EOG token leaves it as it is), or, while
  // lazy, looks for a trigger in the text so far and hands the grammar the text from it. Throws
  // Error when the grammar refuses the token.
  void accept(int32_t id) {
    if (active_) {
      if (masker_->vocab().is_eog(id)) return;
      EDGELLM_CHECK(masker_->accept_token(matcher_, id), "grammar: token ", id, " ('", masker_->vocab().token_bytes(id),
                    "') is not allowed here");
      return;
    }
    if (gave_up_) return;
    if (id >= 0 && id < masker_->vocab().n_vocab()) seen_ += masker_->vocab().token_bytes(id);  // control tokens' text too
    size_t at = std::string::npos;
    for (const std::string& t : triggers_) at = std::min(at, seen_.find(t));
    if (at != std::string::npos) {
      // The text from the trigger on must be the grammar's; when the token that completed the
      // trigger already wrote past what it allows, the reply stays free (its parser decides).
      active_ = matcher_.accept_bytes(std::string_view(seen_).substr(at));
      gave_up_ = !active_;
      seen_.clear();
    } else if (seen_.size() >= max_trigger_) {
      seen_.erase(0, seen_.size() - (max_trigger_ - 1));  // a trigger cut between tokens still shows
    }
  }

  // Bytes the grammar needs at least before it is complete (0: complete).
  uint32_t bytes_to_complete() {
    if (!distance_) distance_ = std::make_shared<const CompletionDistance>(matcher_.grammar());
    return distance_->bytes_to_complete(matcher_);
  }

  void reset() {
    matcher_.reset();
    active_ = triggers_.empty();
    gave_up_ = false;
    seen_.clear();
  }

 private:
  // The budget rule of apply(): when the completion needs at least tokens_left - 1 bytes, mask_
  // keeps only the tokens after which the fewest bytes are needed, among the shortest tokens that
  // make progress (single bytes first: one along the shortest completion exists in byte-level and
  // byte-fallback vocabularies, and there are at most 256 of them to try).
  void close_within(int tokens_left) {
    const uint32_t d = bytes_to_complete();
    if (d == 0 || d == CompletionDistance::kInf || uint32_t(tokens_left) > d + 1) return;
    const std::vector<int32_t> allowed = mask_.ids();
    for (size_t max_len : {size_t(1), size_t(4), std::numeric_limits<size_t>::max()}) {  // byte tokens first: few, and enough
      uint32_t best = d;
      best_.clear();
      for (int32_t id : allowed) {
        const std::string& b = masker_->vocab().token_bytes(id);
        if (b.empty() || b.size() > max_len) continue;
        GrammarMatcher next = matcher_;
        if (!masker_->accept_token(next, id)) continue;
        const uint32_t nd = distance_->bytes_to_complete(next);
        if (nd > best) continue;
        if (nd < best) best_.clear();
        best = nd;
        best_.push_back(id);
      }
      if (best < d) {
        mask_.reset(masker_->vocab().n_vocab());
        for (int32_t id : best_) mask_.set(id);
        return;
      }
    }
  }

  static const std::shared_ptr<const TokenMasker>& checked(const std::shared_ptr<const TokenMasker>& m) {
    EDGELLM_CHECK(m != nullptr, "grammar: no compiled grammar");
    return m;
  }

  std::shared_ptr<const TokenMasker> masker_;
  std::vector<std::string> triggers_;
  size_t max_trigger_ = 1;
  GrammarMatcher matcher_;
  bool active_;
  bool gave_up_ = false;     // lazy: the text after a trigger did not match; free to the end
  std::string seen_;         // lazy: the recent text a trigger may still complete
  TokenMask mask_;
  std::vector<float> row_;   // [n_vocab] logits with the refused ones at -inf
  std::shared_ptr<const CompletionDistance> distance_;  // built at the first budget check
  std::vector<int32_t> best_;
};

// A Sampler with a grammar stage in front: sample() only returns tokens the grammar allows (EOG
// only where it is complete); accept() advances both. Copyable, so each sequence (or a draft)
// has its own grammar state while the masker and its cache are shared.
class ConstrainedSampler {
 public:
  ConstrainedSampler(std::shared_ptr<const TokenMasker> masker, const SamplerParams& params = SamplerParams())
      : sampler_(params), grammar_(GrammarParams{std::move(masker), {}}) {}

  // Picks the next token from a logits row [n_vocab]. Throws Error when the grammar allows no
  // token at all (it has nothing left and EOG is not in the vocabulary).
  int32_t sample(const float* logits, int n_vocab) { return sampler_.sample(grammar_.apply(logits, n_vocab), n_vocab); }

  // Advances the grammar and the sampler's history on token id (sampled or forced). Throws
  // Error when the grammar does not allow it.
  void accept(int32_t id) {
    grammar_.accept(id);
    sampler_.accept(id);
  }

  // Prompt tokens count for the penalties but are not checked against the grammar.
  void accept_prompt(int32_t id) { sampler_.accept(id); }

  bool is_complete() const { return grammar_.is_complete(); }
  // Whether the grammar allows token id next (a speculative draft's token, say).
  bool allows(int32_t id) const { return grammar_.allows(id); }
  const GrammarMatcher& matcher() const { return grammar_.matcher(); }
  Sampler& sampler() { return sampler_; }
  void reset() {
    sampler_.reset();
    grammar_.reset();
  }

 private:
  Sampler sampler_;
  GrammarConstraint grammar_;
};

// Compiled grammars of one vocabulary by their GBNF text, most recently used kept (a schema sent
// with every request is parsed and its mask cache built once). Thread-safe.
class GrammarCache {
 public:
  explicit GrammarCache(const Tokenizer& tok, size_t capacity = 16) : tok_(tok), capacity_(std::max<size_t>(1, capacity)) {}

  // The masker of `gbnf` (root rule "root"); Error (with the parser's line and column) when the
  // text is not a grammar.
  std::shared_ptr<const TokenMasker> get(const std::string& gbnf) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < items_.size(); ++i)
      if (items_[i].first == gbnf) {
        std::rotate(items_.begin(), items_.begin() + std::ptrdiff_t(i), items_.begin() + std::ptrdiff_t(i) + 1);
        return items_.front().second;
      }
    if (!vocab_) vocab_ = grammar_vocab_of(tok_);
    auto g = std::make_shared<const Grammar>(Grammar::parse(gbnf));
    auto m = std::make_shared<const TokenMasker>(std::move(g), vocab_);
    items_.insert(items_.begin(), {gbnf, m});
    if (items_.size() > capacity_) items_.pop_back();
    return m;
  }
  std::shared_ptr<const GrammarVocab> vocab() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!vocab_) vocab_ = grammar_vocab_of(tok_);
    return vocab_;
  }

 private:
  const Tokenizer& tok_;
  size_t capacity_;
  std::mutex mu_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::vector<std::pair<std::string, std::shared_ptr<const TokenMasker>>> items_;  // most recent first
};

}  // namespace edgellm
