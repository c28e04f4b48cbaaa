// GrammarMatcher: incremental recognizer of a compiled Grammar over Unicode code points and UTF-8
// bytes (llama.cpp's llama_grammar_accept semantics). Standard library and grammar/gbnf.hpp only.
//
// State is a set of parse stacks, each a chain of nodes in a pool (node = grammar position +
// parent), so stacks share their common bottoms and a copy is two small vectors.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/grammar/gbnf.hpp"

namespace edgellm {

namespace grammar_detail {

struct StackNode {
  uint32_t pos;     // grammar position: a terminal at the top, a return position below
  uint32_t parent;  // node id; kEmpty at the bottom
  uint32_t depth;
};

// Node ids 0 and 1 are sentinels: the empty stack (the grammar is complete) and, in the mask
// cache's walks only, the unknown context below a stack suffix.
inline constexpr uint32_t kEmpty = 0;
inline constexpr uint32_t kContext = 1;

// Hard bounds: a grammar that needs more is refused with an Error instead of exhausting memory
// or time (ambiguous or deeply recursive grammars on adversarial input).
inline constexpr size_t kMaxStacks = 4096;         // live stacks after one code point
inline constexpr size_t kMaxStepNodes = 1u << 16;  // nodes created by one code point
inline constexpr uint32_t kMaxDepth = 8192;        // nesting of one stack

// UTF-8 decoding state between bytes (and between tokens): llama.cpp's llama_partial_utf8.
struct PartialUtf8 {
  uint32_t value = 0;
  int n_remain = 0;  // continuation bytes still expected
};

// A set of 64-bit keys with values: a linear scan while small (the common case: a few stacks),
// a hash map once large, so adversarial grammars stay O(n) per step.
class SmallMap {
 public:
  void clear() {
    small_.clear();
    big_.clear();
  }
  // The value stored for key, or inserts v and returns it.
  uint32_t find_or_insert(uint64_t key, uint32_t v) {
    if (big_.empty()) {
      for (const auto& kv : small_)
        if (kv.first == key) return kv.second;
      small_.push_back({key, v});
      if (small_.size() > kSmall) big_.insert(small_.begin(), small_.end());
      return v;
    }
    return big_.emplace(key, v).first->second;
  }
  // True when key was not in the set yet (and adds it).
  bool insert(uint64_t key) {
    ++tag_;
    return find_or_insert(key, tag_) == tag_;
  }

 private:
  static constexpr size_t kSmall = 32;
  std::vector<std::pair<uint64_t, uint32_t>> small_;
  std::unordered_map<uint64_t, uint32_t> big_;
  uint32_t tag_ = 0;
};

// The stack operations, over a pool that the caller owns (the matcher's, or a walk's scratch).
class StackOps {
 public:
  StackOps(const Grammar& g, std::vector<StackNode>& pool) : g_(g), pool_(pool) {}

  // Heads reached from `heads` by code point cp, appended to out (deduplicated). Sentinels
  // consume nothing. heads may point into out (copied first).
  void step(const uint32_t* heads, size_t n, uint32_t cp, std::vector<uint32_t>& out) {
    in_.assign(heads, heads + n);
    begin_step(out.size());
    for (const uint32_t h : in_) {
      if (h <= kContext) continue;
      const StackNode node = pool_[h];
      const GTerminal& t = g_.terminal(node.pos);
      if (!t.matches(cp)) continue;
      expand(t.next == Grammar::kNoPos ? node.parent : push(t.next, node.parent), out);
    }
  }

  // Expands a stack until every resulting stack has a terminal (or a sentinel) at its top.
  void expand(uint32_t stack, std::vector<uint32_t>& out) {
    todo_.clear();
    todo_.push_back(stack);
    run(out);
  }

  // The stacks that start rule `rule` on top of stack `base`, expanded.
  void expand_rule(uint32_t rule, uint32_t base, std::vector<uint32_t>& out) {
    todo_.clear();
    push_alternatives(rule, base);
    run(out);
  }

  void begin_step(size_t out_begin) {
    step_first_node_ = pool_.size();
    out_begin_ = out_begin;
    seen_.clear();
    nodes_.clear();
    heads_seen_.clear();
  }

  // A new node (pos on top of parent), reusing one created in this step with the same content.
  uint32_t push(uint32_t pos, uint32_t parent) {
    const auto fresh = static_cast<uint32_t>(pool_.size());
    const uint32_t id = nodes_.find_or_insert((uint64_t(pos) << 32) | parent, fresh);
    if (id != fresh) return id;
    if (pool_.size() - step_first_node_ >= kMaxStepNodes)
      throw_error("grammar: one character expands to more than ", kMaxStepNodes,
                  " parse stack nodes (the grammar is too ambiguous)");
    const uint32_t depth = pool_[parent].depth + 1;
    if (depth > kMaxDepth)
      throw_error("grammar: parse stack deeper than ", kMaxDepth, " (input nested too deeply for the grammar)");
    pool_.push_back(StackNode{pos, parent, depth});
    return uint32_t(pool_.size() - 1);
  }

 private:
  void add_head(uint32_t s, std::vector<uint32_t>& out) {
    if (!heads_seen_.insert(s)) return;
    if (out.size() - out_begin_ >= kMaxStacks)
      throw_error("grammar: more than ", kMaxStacks, " parse stacks at once (the grammar is too ambiguous)");
    out.push_back(s);
  }

  void push_alternatives(uint32_t rule, uint32_t base) {
    for (uint32_t p = g_.rule_start(rule);; ++p) {
      todo_.push_back(g_.is_end_of_seq(p) ? base : push(p, base));
      while (!g_.is_end_of_seq(p)) ++p;
      if (g_.elem(p).type == GType::End) break;
    }
  }

  void run(std::vector<uint32_t>& out) {
    while (!todo_.empty()) {
      const uint32_t s = todo_.back();
      todo_.pop_back();
      if (s <= kContext || g_.is_terminal(pool_[s].pos)) {
        add_head(s, out);
        continue;
      }
      if (!seen_.insert(s)) continue;  // a stack reached twice expands the same way
      const StackNode node = pool_[s];  // a RuleRef: replace it by its return position + the rule
      const uint32_t ret_pos = node.pos + 1;
      push_alternatives(g_.elem(node.pos).value,
                        g_.is_end_of_seq(ret_pos) ? node.parent : push(ret_pos, node.parent));
    }
  }

  const Grammar& g_;
  std::vector<StackNode>& pool_;
  std::vector<uint32_t> in_;
  std::vector<uint32_t> todo_;
  SmallMap seen_;        // stacks expanded in this step
  SmallMap nodes_;       // (pos, parent) -> node created in this step
  SmallMap heads_seen_;  // heads added in this step
  size_t step_first_node_ = 0;
  size_t out_begin_ = 0;
};

// The span of code points a partial UTF-8 sequence can complete to, or false when it cannot
// complete to a valid one (llama.cpp's llama_grammar_match_partial_char preamble).
inline bool partial_span(const PartialUtf8& p, uint32_t* lo, uint32_t* hi) {
  if (p.n_remain < 0 || (p.n_remain == 1 && p.value < 2)) return false;  // invalid or overlong
  *lo = p.value << (p.n_remain * 6);
  *hi = *lo | ((1u << (p.n_remain * 6)) - 1);
  if (*lo == 0) {
    if (p.n_remain == 2) *lo = 1u << 11;
    if (p.n_remain == 3) *lo = 1u << 16;
  }
  return true;
}

// Feeds one byte to a UTF-8 decoder. Returns -1 for an invalid byte, 1 when a code point is
// complete (in *cp), 0 when more bytes are needed. Lead bytes follow llama.cpp's decode_utf8.
inline int feed_utf8(PartialUtf8& p, uint8_t b, uint32_t* cp) {
  if (p.n_remain > 0) {
    if ((b >> 6) != 2) return -1;
    p.value = (p.value << 6) | (b & 0x3F);
    if (--p.n_remain > 0) return 0;
    *cp = p.value;
    p.value = 0;
    return 1;
  }
  static const int kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
  const int len = kLen[b >> 4];
  if (len == 0) return -1;
  if (len == 1) {
    *cp = b;
    return 1;
  }
  p.n_remain = len - 1;
  p.value = b & ((1u << (7 - p.n_remain)) - 1);
  return 0;
}

}  // namespace grammar_detail

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
    EDGELLM_CHECK(g_ != nullptr, "GrammarMatcher: null grammar");
    reset();
  }

  // Back to the start of the root rule.
  void reset() {
    using namespace grammar_detail;
    pool_.assign(2, StackNode{Grammar::kNoPos, kEmpty, 0});
    heads_.clear();
    partial_ = PartialUtf8{};
    StackOps ops(*g_, pool_);
    ops.begin_step(0);
    ops.expand_rule(g_->root(), kEmpty, heads_);
  }

  // Consumes one code point; false (state unchanged) when the grammar cannot accept it here.
  bool accept(uint32_t cp) {
    if (partial_.n_remain != 0) return false;
    return step_cp(cp);
  }

  // Consumes bytes, which may end (and, after an earlier call, start) inside a UTF-8 sequence.
  // False, with the state unchanged, when some byte cannot be accepted.
  bool accept_bytes(std::string_view bytes) {
    GrammarMatcher saved = *this;
    for (char c : bytes) {
      if (!accept_byte(static_cast<uint8_t>(c))) {
        *this = std::move(saved);
        return false;
      }
    }
    compact();
    return true;
  }

  // Whether bytes could be accepted now (no state change).
  bool can_accept_bytes(std::string_view bytes) const {
    GrammarMatcher copy = *this;
    for (char c : bytes)
      if (!copy.accept_byte(static_cast<uint8_t>(c))) return false;
    return true;
  }

  // Whether a token with these bytes may come next, as llama.cpp's grammar sampler decides: its
  // whole characters are accepted and, when it ends inside a UTF-8 sequence, some stack could
  // still take a character that sequence can become (llama.cpp's partial-character rule).
  bool can_accept_token_bytes(std::string_view bytes) const {
    GrammarMatcher copy = *this;
    for (char c : bytes)
      if (!copy.accept_byte(static_cast<uint8_t>(c))) return false;
    return copy.partial_ok_at_token_end();
  }

  // The input so far is a whole sentence of the grammar: EOS may come now.
  bool is_complete() const {
    if (partial_.n_remain != 0) return false;
    for (uint32_t h : heads_)
      if (h == grammar_detail::kEmpty) return true;
    return false;
  }

  // Nothing more can be accepted (only completion is left, or nothing at all).
  bool is_terminated() const {
    for (uint32_t h : heads_)
      if (h != grammar_detail::kEmpty) return false;
    return true;
  }

  const Grammar& grammar() const { return *g_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return g_; }
  size_t n_stacks() const { return heads_.size(); }
  const grammar_detail::PartialUtf8& partial_utf8() const { return partial_; }
  const std::vector<grammar_detail::StackNode>& pool() const { return pool_; }
  const std::vector<uint32_t>& heads() const { return heads_; }

  // Positions of one stack, top first (for tests and the mask cache).
  std::vector<uint32_t> stack_positions(uint32_t head) const {
    std::vector<uint32_t> out;
    for (uint32_t n = head; n > grammar_detail::kContext; n = pool_[n].parent) out.push_back(pool_[n].pos);
    return out;
  }

 private:
  bool partial_ok_at_token_end() const {
    if (partial_.n_remain == 0) return true;
    uint32_t lo = 0, hi = 0;
    if (!grammar_detail::partial_span(partial_, &lo, &hi)) return false;
    for (uint32_t h : heads_)
      if (h > grammar_detail::kContext && g_->terminal(pool_[h].pos).may_match(lo, hi)) return true;
    return false;
  }

  bool accept_byte(uint8_t b) {
    uint32_t cp = 0;
    grammar_detail::PartialUtf8 p = partial_;
    const int r = grammar_detail::feed_utf8(p, b, &cp);
    if (r < 0) return false;
    if (r == 0) {
      // A sequence no stack can complete is refused now rather than at its last byte.
      uint32_t lo = 0, hi = 0;
      if (!grammar_detail::partial_span(p, &lo, &hi)) return false;
      bool any = false;
      for (uint32_t h : heads_)
        any = any || (h > grammar_detail::kContext && g_->terminal(pool_[h].pos).can_match_some(lo, hi));
      if (!any) return false;
      partial_ = p;
      return true;
    }
    partial_ = p;
    return step_cp(cp);
  }

  bool step_cp(uint32_t cp) {
    const size_t pool_before = pool_.size();
    grammar_detail::StackOps ops(*g_, pool_);
    next_.clear();
    ops.step(heads_.data(), heads_.size(), cp, next_);
    if (next_.empty()) {
      pool_.resize(pool_before);
      return false;
    }
    heads_.swap(next_);
    if (pool_.size() > compact_at_ || heads_.size() > kMergeAbove) compact();
    return true;
  }

  // Keeps only the nodes the heads reach and merges nodes of equal content (same position, same
  // parent), so equal stacks have equal ids and are deduplicated: otherwise stacks rebuilt on
  // different steps would pile up on long inputs.
  void compact() {
    using grammar_detail::StackNode;
    std::vector<uint8_t> live(pool_.size(), 0);
    for (uint32_t h : heads_)
      for (uint32_t n = h; n > grammar_detail::kContext && !live[n]; n = pool_[n].parent) live[n] = 1;
    std::vector<uint32_t> remap(pool_.size(), 0);
    remap[1] = 1;
    std::vector<StackNode> out(pool_.begin(), pool_.begin() + 2);
    std::unordered_map<uint64_t, uint32_t> interned;
    for (uint32_t n = 2; n < pool_.size(); ++n) {  // a parent's id is always below its child's
      if (!live[n]) continue;
      StackNode node = pool_[n];
      node.parent = remap[node.parent];
      const auto fresh = static_cast<uint32_t>(out.size());
      const uint32_t id = interned.emplace((uint64_t(node.pos) << 32) | node.parent, fresh).first->second;
      if (id == fresh) out.push_back(node);
      remap[n] = id;
    }
    std::vector<uint32_t> heads;
    for (uint32_t h : heads_) {
      const uint32_t id = remap[h];
      if (std::find(heads.begin(), heads.end(), id) == heads.end()) heads.push_back(id);
    }
    heads_.swap(heads);
    pool_.swap(out);
    compact_at_ = std::max(kCompactAbove, 2 * pool_.size());  // deep stacks: amortized, not per step
  }

  static constexpr size_t kCompactAbove = 1024;  // pool nodes before garbage is dropped
  static constexpr size_t kMergeAbove = 16;      // stacks before equal ones are merged

  std::shared_ptr<const Grammar> g_;
  std::vector<grammar_detail::StackNode> pool_;  // [n_nodes] nodes 0 and 1 are the sentinels
  std::vector<uint32_t> heads_;                  // [n_stacks] top node of each stack
  grammar_detail::PartialUtf8 partial_;
  size_t compact_at_ = kCompactAbove;
  std::vector<uint32_t> next_;  // scratch
};

}  // namespace edgellm
