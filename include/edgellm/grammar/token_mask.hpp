// Token masks for constrained sampling: which tokens of a vocabulary the grammar accepts next.
// GrammarVocab is built once per vocabulary (a byte trie over every token, in preorder so a
// rejected prefix skips its whole subtree); TokenMasker adds, per grammar and vocabulary, a cache
// of what each stack suffix accepts regardless of the stacks below it (XGrammar's
// context-independent tokens), so a mask is a few bitset ORs plus a check of the few tokens that
// reach below the suffix. Includes grammar/ and core/ only (text/ only in grammar/vocab_text.hpp).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/matcher.hpp"

namespace edgellm {

// A set of token ids as a bitset.
class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(int32_t n_vocab) { reset(n_vocab); }

  void reset(int32_t n_vocab) {
    n_ = n_vocab;
    words_.assign((size_t(n_vocab) + 63) / 64, 0);
  }
  int32_t size() const { return n_; }
  bool test(int32_t id) const { return id >= 0 && id < n_ && ((words_[size_t(id) >> 6] >> (id & 63)) & 1); }
  void set(int32_t id) { words_[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
  void merge(const TokenMask& other) {
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  size_t count() const {
    size_t n = 0;
    for (uint64_t w : words_) n += size_t(__builtin_popcountll(w));
    return n;
  }
  std::vector<int32_t> ids() const {
    std::vector<int32_t> out;
    for (int32_t i = 0; i < n_; ++i)
      if (test(i)) out.push_back(i);
    return out;
  }
  bool operator==(const TokenMask& o) const { return n_ == o.n_ && words_ == o.words_; }
  bool operator!=(const TokenMask& o) const { return !(*this == o); }

 private:
  int32_t n_ = 0;
  std::vector<uint64_t> words_;  // [ceil(n / 64)]
};

// The per-vocabulary structure: every token's bytes in a trie laid out in preorder.
class GrammarVocab {
 public:
  // token_bytes[id]: the bytes the token stands for. eog_ids: tokens that end generation (allowed
  // exactly where the grammar is complete). excluded_ids: never allowed (control tokens). Tokens
  // with no bytes or with a NUL byte are never allowed either.
  GrammarVocab(std::vector<std::string> token_bytes, const std::vector<int32_t>& eog_ids,
               const std::vector<int32_t>& excluded_ids = {})
      : bytes_(std::move(token_bytes)) {
    const auto n = static_cast<int32_t>(bytes_.size());
    EDGELLM_CHECK(bytes_.size() < (size_t(1) << 31), "GrammarVocab: too many tokens");
    std::vector<uint8_t> skip(size_t(n), 0);
    for (int32_t id : eog_ids) {
      EDGELLM_CHECK(id >= 0 && id < n, "GrammarVocab: EOG id ", id, " out of range [0, ", n, ")");
      skip[size_t(id)] = 1;
      eog_.push_back(id);
    }
    for (int32_t id : excluded_ids) {
      EDGELLM_CHECK(id >= 0 && id < n, "GrammarVocab: excluded id ", id, " out of range [0, ", n, ")");
      if (!skip[size_t(id)]) skip[size_t(id)] = 2;
    }
    std::vector<int32_t> order;
    for (int32_t id = 0; id < n; ++id) {
      const std::string& b = bytes_[size_t(id)];
      if (!skip[size_t(id)] && !b.empty() && b.find('\0') == std::string::npos) order.push_back(id);
    }
    // Sorted byte strings make the trie in one pass: a token's node path extends the previous one.
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return bytes_[size_t(a)] < bytes_[size_t(b)] || (bytes_[size_t(a)] == bytes_[size_t(b)] && a < b);
    });
    byte_.push_back(0);
    depth_.push_back(0);
    std::vector<uint32_t> path{0};  // node ids on the current root-to-node path
    std::vector<uint32_t> tok_node;
    std::string prev;
    for (int32_t id : order) {
      const std::string& b = bytes_[size_t(id)];
      size_t common = 0;
      while (common < prev.size() && common < b.size() && prev[common] == b[common]) ++common;
      path.resize(common + 1);
      for (size_t k = common; k < b.size(); ++k) {
        path.push_back(static_cast<uint32_t>(byte_.size()));
        byte_.push_back(static_cast<uint8_t>(b[k]));
        depth_.push_back(static_cast<uint16_t>(std::min<size_t>(k + 1, 65535)));
      }
      EDGELLM_CHECK(b.size() < 65535, "GrammarVocab: token ", id, " longer than 65534 bytes");
      tok_node.push_back(path.back());
      prev = b;
    }
    const size_t n_nodes = byte_.size();
    end_.assign(n_nodes, 0);
    // Preorder: a node's subtree ends at the next node of depth <= its own.
    std::vector<uint32_t> open;
    for (uint32_t i = 0; i < n_nodes; ++i) {
      while (!open.empty() && depth_[open.back()] >= depth_[i]) {
        end_[open.back()] = i;
        open.pop_back();
      }
      open.push_back(i);
    }
    for (uint32_t i : open) end_[i] = static_cast<uint32_t>(n_nodes);
    tok_begin_.assign(n_nodes + 1, 0);
    for (uint32_t node : tok_node) ++tok_begin_[node + 1];
    std::partial_sum(tok_begin_.begin(), tok_begin_.end(), tok_begin_.begin());
    toks_ = order;  // sorted order = preorder of their nodes
    in_trie_.assign(size_t(n), 0);
    for (int32_t id : order) in_trie_[size_t(id)] = 1;
    max_depth_ = *std::max_element(depth_.begin(), depth_.end());
  }

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& token_bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool is_eog(int32_t id) const { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  size_t n_nodes() const { return byte_.size(); }
  // A token the grammar can allow by its bytes (not EOG, excluded, empty or holding NUL).
  bool in_trie(int32_t id) const { return in_trie_[size_t(id)] != 0; }

  // Trie in preorder: node 0 is the root; node i's subtree is [i, end(i)); the tokens whose bytes
  // end at node i are tokens()[tok_begin(i) .. tok_begin(i + 1)), so a subtree's tokens are one run.
  uint8_t byte(uint32_t i) const { return byte_[i]; }
  uint32_t depth(uint32_t i) const { return depth_[i]; }
  uint32_t end(uint32_t i) const { return end_[i]; }
  uint32_t tok_begin(uint32_t i) const { return tok_begin_[i]; }
  const std::vector<int32_t>& tokens() const { return toks_; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;  // [n_vocab]
  std::vector<int32_t> eog_;
  std::vector<uint8_t> byte_;       // [n_nodes] the byte leading into the node
  std::vector<uint16_t> depth_;     // [n_nodes]
  std::vector<uint32_t> end_;       // [n_nodes] first node after the subtree
  std::vector<uint32_t> tok_begin_; // [n_nodes + 1]
  std::vector<int32_t> toks_;       // [n_trie_tokens] ids in preorder
  std::vector<uint8_t> in_trie_;    // [n_vocab]
  uint32_t max_depth_ = 0;
};

struct TokenMaskerOptions {
  // Deepest stack suffix (positions, top first) that keys a cache entry. An entry starts as the
  // top position alone and is refined one position deeper while more than `refine_above` of its
  // tokens depend on what lies below; those still undecided at this depth are checked one by one.
  int suffix_depth = 16;
  size_t refine_above = 16;
  // Bytes of cached entries; beyond it masks are computed by a full trie walk (and entries that
  // cannot be refined further leave more tokens to check).
  size_t max_cache_bytes = size_t(64) << 20;
  // Build the entries at construction ("grammar compile", see TokenMasker::precompute), so that
  // no mask walks the whole trie, the first request's included. Off: entries are built on first use.
  bool precompute = true;
};

namespace grammar_detail {

// A depth-first walk of the vocabulary trie from a set of stacks, pruning a subtree as soon as
// its prefix is rejected. With kContext at the bottom of the stacks (cache builds), a token that
// needs what lies below is reported as uncertain rather than accepted or rejected.
class TrieWalk {
 public:
  TrieWalk(const Grammar& g, const GrammarVocab& v) : g_(g), v_(v) {}

  // pool/heads: the start state (heads_[0, n) = the stacks); modified as scratch. accept and
  // uncertain receive runs [t0, t1) of tokens() (preorder indices). With `only` (sorted preorder
  // indices), subtrees holding none of those tokens are skipped: the runs then still cover other
  // tokens, which the caller ignores.
  template <class Accept, class Uncertain>
  void run(std::vector<StackNode>& pool, std::vector<uint32_t>& heads, PartialUtf8 partial,
           Accept&& accept, Uncertain&& uncertain, const std::vector<uint32_t>* only = nullptr) {
    StackOps ops(g_, pool);
    frames_.resize(v_.max_depth() + 1);
    Frame& root = frames_[0];
    root.heads_begin = 0;
    root.heads_end = uint32_t(heads.size());
    root.partial = partial;
    root.exited = false;
    root.has_context = has(heads, 0, heads.size(), kContext);
    open_memo(root, heads, pool);
    const uint32_t n_nodes = static_cast<uint32_t>(v_.n_nodes());
    size_t cur = 0;  // into *only: the first index not below the current node's tokens
    uint32_t i = 1;
    while (i < n_nodes) {
      if (only) {
        const uint32_t first = v_.tok_begin(i);
        while (cur < only->size() && (*only)[cur] < first) ++cur;
        if (cur == only->size()) break;
        if ((*only)[cur] >= v_.tok_begin(v_.end(i))) {
          i = v_.end(i);
          continue;
        }
      }
      const uint32_t d = v_.depth(i);
      Frame& pf = frames_[d - 1];
      pool.resize(pf.memo_pool_end);  // drops the previous sibling's subtree, keeps memoized steps
      heads.resize(pf.memo_heads_end);
      Frame& f = frames_[d];
      f.partial = pf.partial;
      f.exited = pf.exited || pf.has_context;
      f.has_context = false;
      uint32_t cp = 0;
      const int r = feed_utf8(f.partial, v_.byte(i), &cp);
      bool live = false;
      bool ends_ok = true;  // a token ending here passes llama.cpp's partial-character rule
      if (r == 0) {  // inside a multi-byte sequence: same stacks, is the sequence still possible?
        f.heads_begin = pf.heads_begin;
        f.heads_end = pf.heads_end;
        uint32_t lo = 0, hi = 0;
        ends_ok = false;
        if (partial_span(f.partial, &lo, &hi)) {
          for (uint32_t k = f.heads_begin; k < f.heads_end; ++k) {
            if (heads[k] <= kContext) continue;
            const GTerminal& t = g_.terminal(pool[heads[k]].pos);
            live = live || t.can_match_some(lo, hi);
            ends_ok = ends_ok || t.may_match(lo, hi);
          }
        }
      } else if (r == 1) {
        step(ops, pf, f, cp, pool, heads);
        live = f.heads_end > f.heads_begin;
      }
      open_memo(f, heads, pool);
      const uint32_t t0 = v_.tok_begin(i), t1 = v_.tok_begin(i + 1);
      if (!live) {
        if (f.exited) uncertain(t0, v_.tok_begin(v_.end(i)));
        i = v_.end(i);
        continue;
      }
      if (ends_ok) {
        if (t1 > t0) accept(t0, t1);
      } else if (f.exited) {
        uncertain(t0, t1);
      }
      if (!has_real(heads, f.heads_begin, f.heads_end) && r == 1) {
        // Only sentinels: nothing below can be consumed here; past the context it is unknown.
        if (f.exited || f.has_context) uncertain(t1, v_.tok_begin(v_.end(i)));
        i = v_.end(i);
        continue;
      }
      ++i;
    }
  }

 private:
  // A child's stacks depend on its code point only through which of the parent's stacks accept
  // it (each accepting stack continues the same way whatever the character): siblings with the
  // same set share one step. That set is the memo key.
  struct Memo {
    uint64_t matched;  // bit k: the parent's k-th stack accepts the code point
    uint32_t heads_begin, heads_end;
    bool has_context;
  };
  struct Frame {
    uint32_t heads_begin, heads_end;  // this prefix's stacks in the heads vector
    PartialUtf8 partial;
    bool exited;       // a path reached the context and went on consuming bytes
    bool has_context;  // a stack of this prefix is at the context (the suffix fully consumed)
    // Children's memoized steps live in heads/pool below these marks, kept across siblings.
    uint32_t memo_heads_end, memo_pool_end;
    std::vector<Memo> memo;
  };

  static void open_memo(Frame& f, const std::vector<uint32_t>& heads, const std::vector<StackNode>& pool) {
    f.memo.clear();
    f.memo_heads_end = uint32_t(heads.size());
    f.memo_pool_end = uint32_t(pool.size());
  }

  // f's stacks: the parent's stacks advanced by cp.
  void step(StackOps& ops, Frame& pf, Frame& f, uint32_t cp, std::vector<StackNode>& pool,
            std::vector<uint32_t>& heads) {
    const uint32_t n = pf.heads_end - pf.heads_begin;
    uint64_t matched = 0;
    if (n <= 64) {
      for (uint32_t k = 0; k < n; ++k) {
        const uint32_t h = heads[pf.heads_begin + k];
        if (h > kContext && g_.terminal(pool[h].pos).matches(cp)) matched |= uint64_t(1) << k;
      }
      if (matched == 0) {
        f.heads_begin = f.heads_end = 0;
        return;
      }
      for (const Memo& m : pf.memo)
        if (m.matched == matched) {
          f.heads_begin = m.heads_begin;
          f.heads_end = m.heads_end;
          f.has_context = m.has_context;
          return;
        }
    }
    f.heads_begin = uint32_t(heads.size());
    ops.step(heads.data() + pf.heads_begin, n, cp, heads);
    f.heads_end = uint32_t(heads.size());
    f.has_context = has(heads, f.heads_begin, f.heads_end, kContext);
    if (n <= 64) {  // keep it for the siblings
      pf.memo.push_back(Memo{matched, f.heads_begin, f.heads_end, f.has_context});
      pf.memo_heads_end = uint32_t(heads.size());
      pf.memo_pool_end = uint32_t(pool.size());
    }
  }

  static bool has(const std::vector<uint32_t>& h, size_t b, size_t e, uint32_t x) {
    for (size_t k = b; k < e; ++k)
      if (h[k] == x) return true;
    return false;
  }
  static bool has_real(const std::vector<uint32_t>& h, size_t b, size_t e) {
    for (size_t k = b; k < e; ++k)
      if (h[k] > kContext) return true;
    return false;
  }

  const Grammar& g_;
  const GrammarVocab& v_;
  std::vector<Frame> frames_;  // [max_depth + 1] one per trie depth on the current path
};

}  // namespace grammar_detail

// Masks of a grammar over a vocabulary, with its cache; thread-safe, shared by every sequence
// (each with its own GrammarMatcher) that uses the same grammar and vocabulary.
//
// The cache is a tree per top-of-stack position: the root entry holds the tokens that position
// accepts whatever lies below it (XGrammar's context-independent tokens) and the tokens that reach
// below it (uncertain); a child, keyed by the position below, re-walks only its parent's uncertain
// tokens with one more stack position known. A mask descends each stack's path until few tokens
// are uncertain, ORs the bitset found there and checks those few against the whole state.
class TokenMasker {
 public:
  // Statistics of the cache (precompute()'s result, and cache_stats()).
  struct CacheStats {
    size_t entries = 0;
    size_t bytes = 0;  // bitsets, undecided token lists and keys
  };

  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
              TokenMaskerOptions opt = {})
      : g_(std::move(grammar)), v_(std::move(vocab)), opt_(opt) {
    EDGELLM_CHECK(g_ && v_, "TokenMasker: null grammar or vocabulary");
    EDGELLM_CHECK(opt_.suffix_depth >= 1, "TokenMasker: suffix_depth must be >= 1");
    roots_.assign(g_->n_elems(), nullptr);
    if (opt_.precompute) precompute();
  }

  const GrammarVocab& vocab() const { return *v_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return g_; }
  GrammarMatcher new_matcher() const { return GrammarMatcher(g_); }

  // The tokens `m` accepts next; EOG tokens only where the grammar is complete.
  void fill_mask(const GrammarMatcher& m, TokenMask& mask) const {
    check_matcher(m);
    mask.reset(v_->n_vocab());
    if (m.partial_utf8().n_remain != 0) {
      walk_exact(m, mask, nullptr);  // mid-character: the cache is keyed at character boundaries
    } else {
      std::vector<const Entry*> leaves;
      bool cached = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (uint32_t h : m.heads()) {
          if (h == grammar_detail::kEmpty) continue;
          const Entry* e = leaf_for(m, h);
          if (!e) {
            cached = false;
            break;
          }
          leaves.push_back(e);
        }
      }
      if (!cached) {
        walk_exact(m, mask, nullptr);
      } else {
        std::vector<uint32_t> unsure;
        for (const Entry* e : leaves) {
          for (const Entry* a = e; a; a = a->parent) {
            if (a->dense.size()) mask.merge(a->dense);
            for (int32_t id : a->sparse) mask.set(id);
          }
          unsure.insert(unsure.end(), e->uncertain.begin(), e->uncertain.end());
        }
        check_tokens(m, unsure, mask);
      }
    }
    if (m.is_complete())
      for (int32_t id : v_->eog_ids()) mask.set(id);
  }
  TokenMask allowed_tokens(const GrammarMatcher& m) const {
    TokenMask mask;
    fill_mask(m, mask);
    return mask;
  }

  // The tokens `m` accepts, one token at a time (the reference the masks are tested against).
  TokenMask allowed_tokens_brute_force(const GrammarMatcher& m) const {
    TokenMask mask(v_->n_vocab());
    for (int32_t id = 0; id < v_->n_vocab(); ++id)
      if (can_accept_token(m, id)) mask.set(id);
    return mask;
  }

  bool can_accept_token(const GrammarMatcher& m, int32_t id) const {
    if (id < 0 || id >= v_->n_vocab()) return false;
    if (v_->is_eog(id)) return m.is_complete();
    if (!in_trie(id)) return false;
    return m.can_accept_token_bytes(v_->token_bytes(id));
  }

  // Advances `m` on token id; false (state unchanged) when the grammar does not allow it. An EOG
  // token is accepted only where the grammar is complete, and leaves the state as it is.
  bool accept_token(GrammarMatcher& m, int32_t id) const {
    check_matcher(m);
    if (id < 0 || id >= v_->n_vocab()) return false;
    if (v_->is_eog(id)) return m.is_complete();
    if (!in_trie(id)) return false;
    return m.accept_bytes(v_->token_bytes(id));
  }

  // The grammar compile (run by the constructor unless TokenMaskerOptions::precompute is off):
  // builds the root entry of every terminal position, then refines, through every position that
  // can lie below (from the grammar's rule references), each entry that leaves more than
  // refine_above tokens undecided, up to suffix_depth positions or max_cache_bytes. The expensive
  // entries (those whose tokens span the whole trie, as a string's characters) are all built here;
  // what is left to build on first use re-walks only a few undecided tokens. Returns the cache
  // size after it. A grammar too ambiguous for the matcher's bounds leaves those entries to first
  // use (where the Error surfaces as before).
  CacheStats precompute() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Entry*> todo;
    for (uint32_t p = 0; p < g_->n_elems(); ++p) {
      if (!g_->is_terminal(p)) continue;
      Entry* e = roots_[p] ? roots_[p] : try_build(nullptr, p, false);
      if (e) todo.push_back(e);
    }
    if (!below_ready_) compute_below();
    for (size_t k = 0; k < todo.size(); ++k) {  // breadth first: shallow entries first
      Entry* e = todo[k];
      if (e->bottom || !needs_refining(*e)) continue;
      const uint32_t rule = rule_of_[e->positions.back()];
      for (uint32_t key : below_[rule]) {
        Entry* c = find_child(*e, key);
        if (!c) c = try_build(e, key, key == kBottom);
        if (c) todo.push_back(c);
      }
    }
    return CacheStats{entries_.size(), cache_bytes_};
  }

  // Fills the cache by random walks through the grammar with this vocabulary's tokens (closing
  // characters preferred half the time, so strings and objects end), max_tokens steps in all:
  // what precompute() leaves to first use. Returns the entries built.
  size_t warm_up(int max_tokens = 1000, uint64_t seed = 1) const {
    std::mt19937_64 rng(seed);
    const size_t before = cache_entries();
    GrammarMatcher m = new_matcher();
    TokenMask mask;
    std::vector<int32_t> ids, closing;
    for (int step = 0; step < max_tokens; ++step) {
      fill_mask(m, mask);
      ids.clear();
      closing.clear();
      for (int32_t id = 0; id < mask.size(); ++id) {
        if (!mask.test(id) || v_->is_eog(id)) continue;
        ids.push_back(id);
        const char c = v_->token_bytes(id)[0];
        if (c == '"' || c == '}' || c == ']' || c == ',' || (c >= '0' && c <= '9')) closing.push_back(id);
      }
      if (ids.empty() || (m.is_complete() && rng() % 4 == 0)) {
        m.reset();
        continue;
      }
      const std::vector<int32_t>& pick = !closing.empty() && rng() % 2 ? closing : ids;
      if (!accept_token(m, pick[rng() % pick.size()])) m.reset();
    }
    return cache_entries() - before;
  }

  size_t cache_entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }
  CacheStats cache_stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return CacheStats{entries_.size(), cache_bytes_};
  }

 private:
  static constexpr uint32_t kBottom = Grammar::kNoPos;  // child key: the stack ends there

  // The tokens an entry accepts whatever lies below its suffix are those its own sets hold and
  // those its parent accepts: a child holds only what its parent left uncertain.
  struct Entry {
    const Entry* parent = nullptr;
    TokenMask dense;                  // its own accepted tokens as a bitset when many (else size 0)
    std::vector<int32_t> sparse;      // ... or as ids when few
    std::vector<uint32_t> uncertain;  // depend on it (indices into vocab tokens(), sorted)
    std::vector<uint32_t> positions;  // the suffix, top first
    bool bottom = false;              // ... and the stack ends below it (nothing is uncertain)
    std::vector<std::pair<uint32_t, Entry*>> children;  // by the position below (kBottom)
  };

  // A sorted subset of preorder token indices, read in increasing order.
  class Subset {
   public:
    explicit Subset(const std::vector<uint32_t>* v) : v_(v) {}
    // Calls f(t) for each member t (each token when there is no subset) in [t0, t1).
    template <class F>
    void each(uint32_t t0, uint32_t t1, F&& f) {
      if (!v_) {
        for (uint32_t t = t0; t < t1; ++t) f(t);
        return;
      }
      while (cur_ < v_->size() && (*v_)[cur_] < t0) ++cur_;
      for (; cur_ < v_->size() && (*v_)[cur_] < t1; ++cur_) f((*v_)[cur_]);
    }

   private:
    const std::vector<uint32_t>* v_;
    size_t cur_ = 0;
  };

  void check_matcher(const GrammarMatcher& m) const {
    EDGELLM_CHECK(m.grammar_ptr() == g_ || m.grammar_ptr().get() == g_.get(),
                  "TokenMasker: the matcher runs a different grammar");
  }
  bool in_trie(int32_t id) const { return v_->in_trie(id); }
  bool needs_refining(const Entry& e) const {
    return e.uncertain.size() > opt_.refine_above && e.positions.size() < size_t(opt_.suffix_depth);
  }
  static Entry* find_child(const Entry& e, uint32_t key) {
    for (const auto& kv : e.children)
      if (kv.first == key) return kv.second;
    return nullptr;
  }

  // The entry deciding most tokens for stack h: the root of its top position, then children
  // along the positions below while needed (built on first use). Null when over the byte budget
  // at the root. Called with mu_ held.
  const Entry* leaf_for(const GrammarMatcher& m, uint32_t h) const {
    const auto& pool = m.pool();
    const uint32_t top = pool[h].pos;
    Entry* e = roots_[top];
    if (!e) e = build(nullptr, top, false);
    if (!e) return nullptr;
    uint32_t n = pool[h].parent;
    while (!e->bottom && needs_refining(*e)) {
      const uint32_t key = n == grammar_detail::kEmpty ? kBottom : pool[n].pos;
      Entry* c = find_child(*e, key);
      if (!c) c = build(e, key, key == kBottom);
      if (!c) break;
      e = c;
      if (key != kBottom) n = pool[n].parent;
    }
    return e;
  }

  Entry* try_build(Entry* parent, uint32_t key, bool bottom) const {
    try {
      return build(parent, key, bottom);
    } catch (const Error&) {
      return nullptr;  // the matcher's bounds: first use will report it
    }
  }

  // A new entry: the root of position `key` (no parent), or parent's suffix extended by the
  // position `key` below it (or ended, `bottom`). Null when over the byte budget.
  Entry* build(Entry* parent, uint32_t key, bool bottom) const {
    using namespace grammar_detail;
    Entry e;
    if (parent) e.positions = parent->positions;
    if (!bottom) e.positions.push_back(key);
    e.bottom = bottom;
    const size_t bitset_bytes = size_t(v_->n_vocab()) / 8;
    const size_t fixed = sizeof(Entry) + 64 + e.positions.size() * 4;
    if (cache_bytes_ + fixed + bitset_bytes > opt_.max_cache_bytes) return nullptr;
    std::vector<StackNode> pool(2, StackNode{Grammar::kNoPos, kEmpty, 0});
    uint32_t below = bottom ? kEmpty : kContext;
    for (size_t k = e.positions.size(); k-- > 0;) {
      pool.push_back(StackNode{e.positions[k], below, pool[below].depth + 1});
      below = uint32_t(pool.size() - 1);
    }
    std::vector<uint32_t> heads{below};
    const std::vector<uint32_t>* only = parent ? &parent->uncertain : nullptr;
    e.parent = parent;
    Subset acc(only), unc(only);
    const std::vector<int32_t>& toks = v_->tokens();
    TrieWalk walk(*g_, *v_);
    walk.run(pool, heads, PartialUtf8{}, [&](uint32_t t0, uint32_t t1) { acc.each(t0, t1, [&](uint32_t t) { e.sparse.push_back(toks[t]); }); },
             [&](uint32_t t0, uint32_t t1) { unc.each(t0, t1, [&](uint32_t t) { e.uncertain.push_back(t); }); },
             only);
    size_t own_bytes = e.sparse.size() * sizeof(int32_t);
    if (own_bytes > bitset_bytes) {
      e.dense.reset(v_->n_vocab());
      for (int32_t id : e.sparse) e.dense.set(id);
      e.sparse = {};
      own_bytes = bitset_bytes;
    }
    const size_t bytes = fixed + own_bytes + e.uncertain.size() * sizeof(uint32_t);
    if (cache_bytes_ + bytes + sizeof(std::pair<uint32_t, Entry*>) > opt_.max_cache_bytes) return nullptr;
    e.sparse.shrink_to_fit();
    e.uncertain.shrink_to_fit();
    cache_bytes_ += bytes;
    entries_.push_back(std::move(e));
    Entry* out = &entries_.back();
    if (parent) {
      parent->children.emplace_back(key, out);
      cache_bytes_ += sizeof(std::pair<uint32_t, Entry*>);
    } else {
      roots_[key] = out;
    }
    return out;
  }

  // below_[rule]: the positions a stack node of `rule` can lie on (returns after a reference to
  // it; through references that end an alternative, the positions below their own rule), and
  // kBottom when it can be the stack's last rule.
  void compute_below() const {
    const size_t n_rules = g_->n_rules();
    rule_of_.assign(g_->n_elems(), 0);
    for (uint32_t r = 0; r < n_rules; ++r)
      for (uint32_t p = g_->rule_start(r);; ++p) {
        rule_of_[p] = r;
        if (g_->elem(p).type == GType::End) break;
      }
    std::vector<std::vector<uint32_t>> direct(n_rules), via(n_rules);
    for (uint32_t p = 0; p < g_->n_elems(); ++p) {
      if (g_->elem(p).type != GType::RuleRef) continue;
      const uint32_t s = g_->elem(p).value;
      if (g_->is_end_of_seq(p + 1)) via[s].push_back(rule_of_[p]);
      else direct[s].push_back(p + 1);
    }
    direct[g_->root()].push_back(kBottom);
    below_.assign(n_rules, {});
    std::vector<uint32_t> seen(n_rules, 0), stack;
    for (uint32_t r = 0; r < n_rules; ++r) {  // a walk up the tail references from each rule
      std::vector<uint32_t>& out = below_[r];
      stack.assign(1, r);
      seen[r] = r + 1;
      while (!stack.empty()) {
        const uint32_t s = stack.back();
        stack.pop_back();
        out.insert(out.end(), direct[s].begin(), direct[s].end());
        for (uint32_t t : via[s])
          if (seen[t] != r + 1) {
            seen[t] = r + 1;
            stack.push_back(t);
          }
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    }
    below_ready_ = true;
  }

  // The whole state's trie walk (restricted to the tokens `only` when given).
  void walk_exact(const GrammarMatcher& m, TokenMask& mask, const std::vector<uint32_t>* only) const {
    std::vector<grammar_detail::StackNode> pool = m.pool();
    std::vector<uint32_t> heads = m.heads();
    grammar_detail::TrieWalk walk(*g_, *v_);
    Subset acc(only);
    const std::vector<int32_t>& toks = v_->tokens();
    walk.run(pool, heads, m.partial_utf8(),
             [&](uint32_t t0, uint32_t t1) { acc.each(t0, t1, [&](uint32_t t) { mask.set(toks[t]); }); },
             [](uint32_t, uint32_t) {}, only);
  }

  // Tokens whose fate depends on the whole stack: one by one when few, else one restricted walk.
  void check_tokens(const GrammarMatcher& m, std::vector<uint32_t>& ts, TokenMask& mask) const {
    if (ts.empty()) return;
    std::sort(ts.begin(), ts.end());
    ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
    const std::vector<int32_t>& toks = v_->tokens();
    if (ts.size() > kCheckOneByOne) {
      walk_exact(m, mask, &ts);
      return;
    }
    for (uint32_t t : ts) {
      const int32_t id = toks[t];
      if (!mask.test(id) && m.can_accept_token_bytes(v_->token_bytes(id))) mask.set(id);
    }
  }
  static constexpr size_t kCheckOneByOne = 24;

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const GrammarVocab> v_;
  TokenMaskerOptions opt_;
  mutable std::mutex mu_;
  mutable std::deque<Entry> entries_;  // stable addresses
  mutable std::vector<Entry*> roots_;  // [n_elems] by top position
  mutable size_t cache_bytes_ = 0;
  mutable bool below_ready_ = false;
  mutable std::vector<uint32_t> rule_of_;               // [n_elems]
  mutable std::vector<std::vector<uint32_t>> below_;    // [n_rules]
};

}  // namespace edgellm
