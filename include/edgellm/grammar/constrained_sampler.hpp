// Constrained sampling: the grammar's token mask applied to the logits (-inf) before the sampler
// chain, and the grammar advanced on the chosen token. Also the GrammarVocab of a Tokenizer.
// Includes grammar/ and text/ (tokenizer, sampler).
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
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

// A Sampler with a grammar stage in front: sample() only returns tokens the grammar allows (EOG
// only where it is complete); accept() advances both. Copyable, so each sequence (or a draft)
// has its own grammar state while the masker and its cache are shared.
class ConstrainedSampler {
 public:
  ConstrainedSampler(std::shared_ptr<const TokenMasker> masker, const SamplerParams& params = SamplerParams())
      : masker_(std::move(masker)), sampler_(params), matcher_(checked(masker_)->new_matcher()) {}

  // Picks the next token from a logits row [n_vocab]. Throws Error when the grammar allows no
  // token at all (it has nothing left and EOG is not in the vocabulary).
  int32_t sample(const float* logits, int n_vocab) {
    EDGELLM_CHECK(logits != nullptr, "ConstrainedSampler: logits is null");
    EDGELLM_CHECK(n_vocab == masker_->vocab().n_vocab(), "ConstrainedSampler: n_vocab ", n_vocab,
                  " differs from the grammar vocabulary's ", masker_->vocab().n_vocab());
    masker_->fill_mask(matcher_, mask_);
    EDGELLM_CHECK(mask_.count() > 0, "ConstrainedSampler: the grammar allows no token here");
    masked_.assign(logits, logits + n_vocab);
    const float kNegInf = -std::numeric_limits<float>::infinity();
    bool any_finite = false;
    for (int i = 0; i < n_vocab; ++i) {
      if (!mask_.test(i)) masked_[size_t(i)] = kNegInf;
      else any_finite = any_finite || masked_[size_t(i)] != kNegInf;
    }
    // Every allowed logit -inf (or NaN): the chain would fall back to token 0; pick an allowed one.
    if (!any_finite)
      for (int i = 0; i < n_vocab; ++i)
        if (mask_.test(i)) masked_[size_t(i)] = 0.0f;
    return sampler_.sample(masked_.data(), n_vocab);
  }

  // Advances the grammar and the sampler's history on token id (sampled or forced). Throws
  // Error when the grammar does not allow it.
  void accept(int32_t id) {
    EDGELLM_CHECK(masker_->accept_token(matcher_, id), "ConstrainedSampler: token ", id,
                  " is not allowed by the grammar here");
    sampler_.accept(id);
  }

  // Prompt tokens count for the penalties but are not checked against the grammar.
  void accept_prompt(int32_t id) { sampler_.accept(id); }

  bool is_complete() const { return matcher_.is_complete(); }
  // Whether the grammar allows token id next (a speculative draft's token, say).
  bool allows(int32_t id) const { return masker_->can_accept_token(matcher_, id); }
  const GrammarMatcher& matcher() const { return matcher_; }
  Sampler& sampler() { return sampler_; }
  void reset() {
    sampler_.reset();
    matcher_.reset();
  }

 private:
  static const std::shared_ptr<const TokenMasker>& checked(const std::shared_ptr<const TokenMasker>& m) {
    EDGELLM_CHECK(m != nullptr, "ConstrainedSampler: null masker");
    return m;
  }

  std::shared_ptr<const TokenMasker> masker_;
  Sampler sampler_;
  GrammarMatcher matcher_;
  TokenMask mask_;
  std::vector<float> masked_;  // [n_vocab] logits with the disallowed ones at -inf
};

}  // namespace edgellm
