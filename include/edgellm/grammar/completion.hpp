// How far a grammar state is from complete: the fewest bytes that finish a sentence of the
// grammar from the matcher's stacks. Constrained generation with a token budget uses it to close
// what it has opened (a string, an object) before max_tokens ends the answer mid-way, so a JSON
// answer cut by the budget still parses. Includes grammar/ only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/matcher.hpp"

namespace edgellm {

class CompletionDistance {
 public:
  static constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max() / 4;

  // tail_[p]: the fewest bytes that match the sequence from element p to the end of its
  // alternative, with each rule at its shortest (a fixpoint: rules refer to each other).
  explicit CompletionDistance(const Grammar& g) : tail_(g.n_elems() + 1, kInf), rule_min_(g.n_rules(), kInf) {
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < g.n_rules(); ++r) {
        uint32_t best = kInf;
        uint32_t alt = g.rule_start(r);
        for (;;) {
          uint32_t end = alt;
          while (!g.is_end_of_seq(end)) ++end;
          best = std::min(best, sequence(g, alt, end));
          if (g.elem(end).type == GType::End) break;
          alt = end + 1;
        }
        if (best < rule_min_[r]) {
          rule_min_[r] = best;
          changed = true;
        }
      }
    }
  }

  // Bytes the matcher needs at least before it is complete (0: complete now; kInf: never).
  uint32_t bytes_to_complete(const GrammarMatcher& m) const {
    uint32_t best = kInf;
    const auto& pool = m.pool();
    for (uint32_t h : m.heads()) {
      uint32_t d = 0;
      for (uint32_t n = h; n > grammar_detail::kContext && d < kInf; n = pool[n].parent) d += tail_[pool[n].pos];
      best = std::min(best, d);
    }
    return best >= kInf ? kInf : best + m.partial_utf8().n_remain;
  }

 private:
  // Fills tail_ for the elements of one alternative [begin, end) from the back; returns its length.
  uint32_t sequence(const Grammar& g, uint32_t begin, uint32_t end) {
    tail_[end] = 0;
    // Element starts, in order (a class's CharAlt / CharRngUpper belong to its start).
    starts_.clear();
    for (uint32_t p = begin; p < end;) {
      starts_.push_back(p);
      p = g.elem(p).type == GType::RuleRef ? p + 1 : (g.terminal(p).next == Grammar::kNoPos ? end : g.terminal(p).next);
    }
    uint32_t after = 0;  // the length from the next element start
    for (size_t i = starts_.size(); i-- > 0;) {
      const uint32_t p = starts_[i];
      const uint32_t here = g.elem(p).type == GType::RuleRef ? rule_min_[g.elem(p).value] : 1;
      after = std::min(kInf, here + after);
      tail_[p] = after;
    }
    return after;
  }

  std::vector<uint32_t> tail_;
  std::vector<uint32_t> rule_min_;
  std::vector<uint32_t> starts_;
};

}  // namespace edgellm
