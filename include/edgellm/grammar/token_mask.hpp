// Token masks for constrained sampling: which tokens of a vocabulary the grammar accepts next.
// GrammarVocab is built once per vocabulary (a byte trie over every token, in preorder so a
// rejected prefix skips its whole subtree); TokenMasker adds, per grammar and vocabulary, a cache
// of what each stack suffix accepts regardless of the stacks below it (XGrammar's
// context-independent tokens), built at construction (the grammar compile), so a mask is a few
// bitset ORs plus a check of the few tokens that reach below the suffix. Includes grammar/ and
// core/ only (text/ only in grammar/constrained_sampler.hpp).
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
#include <unordered_map>
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
  // Bit i % 64 of word i / 64 is token i (the bits past size() are 0).
  const std::vector<uint64_t>& words() const { return words_; }
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
  // no mask walks the whole trie, the first request's included: build a masker once per grammar
  // and share it (under a second for a schema with long bounded strings on x86, 0.1 s for
  // json_object; docs/PERF.md). Off: entries are built on first use (tens of ms each).
  bool precompute = true;
};

namespace grammar_detail {

// A set of preorder token indices (GrammarVocab::tokens()) as sorted, disjoint runs [begin, end):
// a trie walk reports whole subtrees, so a set of 100k tokens is often a few runs.
using TokenRuns = std::vector<std::pair<uint32_t, uint32_t>>;

// Appends [t0, t1) to runs that all lie before t0, merging a run that ends at t0.
inline void add_run(TokenRuns& runs, uint32_t t0, uint32_t t1) {
  if (t0 >= t1) return;
  if (!runs.empty() && runs.back().second == t0) runs.back().second = t1;
  else runs.emplace_back(t0, t1);
}

inline size_t run_tokens(const TokenRuns& runs) {
  size_t n = 0;
  for (const auto& r : runs) n += r.second - r.first;
  return n;
}

// Sets of parse stacks interned as states, with their transitions memoized: a DFA over the
// stacks the trie walks meet, built as they go. Stack nodes are hash-consed (equal position and
// parent = one node), so equal stack sets are one state; a state's successor on a code point
// depends only on which of its stacks accept it, so that set keys the memo. Walks from one store
// share every transition (the grammar compile walks from many suffixes through the same states).
class StateStore {
 public:
  static constexpr uint32_t kDead = 0;  // the empty set

  explicit StateStore(const Grammar& g) : g_(g), pool_(2, StackNode{Grammar::kNoPos, kEmpty, 0}) {
    std::vector<uint32_t> none;
    intern(none);
  }

  // The state of one stack: positions (top first) on `below` (kEmpty or kContext).
  uint32_t stack_state(const std::vector<uint32_t>& positions, uint32_t below) {
    uint32_t n = below;
    for (size_t k = positions.size(); k-- > 0;) n = node(positions[k], n);
    std::vector<uint32_t> heads{n};
    return intern(heads);
  }

  // The state of a matcher's stacks (nodes of another pool).
  uint32_t import(const std::vector<StackNode>& pool, const std::vector<uint32_t>& heads) {
    std::vector<uint32_t> remap(pool.size(), Grammar::kNoPos);
    remap[kEmpty] = kEmpty;
    remap[kContext] = kContext;
    std::vector<uint32_t> mine, chain;
    for (uint32_t h : heads) {
      chain.clear();
      uint32_t n = h;
      for (; remap[n] == Grammar::kNoPos; n = pool[n].parent) chain.push_back(n);
      for (size_t k = chain.size(); k-- > 0;) remap[chain[k]] = node(pool[chain[k]].pos, remap[pool[chain[k]].parent]);
      mine.push_back(remap[h]);
    }
    return intern(mine);
  }

  // The state after code point cp (kDead when no stack accepts it).
  uint32_t next(uint32_t s, uint32_t cp) {
    if (cp < 128) {
      const int32_t t = ascii_[size_t(s) * 128 + cp];
      if (t >= 0) return uint32_t(t);
    }
    const uint32_t b = states_[s].begin, n = states_[s].n;
    uint64_t matched = 0;
    for (uint32_t k = 0; k < n && k < 64; ++k) {
      const uint32_t h = heads_[b + k];
      if (h > kContext && g_.terminal(pool_[h].pos).matches(cp)) matched |= uint64_t(1) << k;
    }
    uint32_t out = kDead;
    if (n > 64 || matched != 0) {
      auto it = n <= 64 ? memo_.find(MemoKey{s, matched}) : memo_.end();
      if (it != memo_.end()) {
        out = it->second;
      } else {
        out = step(s, cp);
        if (n <= 64) memo_.emplace(MemoKey{s, matched}, out);
      }
    }
    if (cp < 128) ascii_[size_t(s) * 128 + cp] = int32_t(out);
    return out;
  }

  const uint32_t* heads(uint32_t s) const { return heads_.data() + states_[s].begin; }
  uint32_t n_heads(uint32_t s) const { return states_[s].n; }
  bool has_context(uint32_t s) const { return states_[s].has_context; }
  bool has_real(uint32_t s) const { return states_[s].has_real; }
  const GTerminal& terminal_of(uint32_t head) const { return g_.terminal(pool_[head].pos); }
  size_t bytes() const {
    return pool_.size() * sizeof(StackNode) + heads_.size() * 4 + states_.size() * (sizeof(State) + 128 * 4 + 48) +
           nodes_.size() * 32 + memo_.size() * 48;
  }

 private:
  struct State {
    uint32_t begin, n;  // heads_[begin, begin + n), sorted
    bool has_context, has_real;
  };
  struct MemoKey {
    uint32_t state;
    uint64_t matched;
    bool operator==(const MemoKey& o) const { return state == o.state && matched == o.matched; }
  };
  struct MemoHash {
    size_t operator()(const MemoKey& k) const {
      return size_t((uint64_t(k.state) * 0x9E3779B97F4A7C15ull) ^ (k.matched * 0xC2B2AE3D27D4EB4Full));
    }
  };

  uint32_t node(uint32_t pos, uint32_t parent) {
    const auto fresh = static_cast<uint32_t>(pool_.size());
    const uint32_t id = nodes_.emplace((uint64_t(pos) << 32) | parent, fresh).first->second;
    if (id == fresh) pool_.push_back(StackNode{pos, parent, pool_[parent].depth + 1});
    return id;
  }

  // The stacks' step on cp (StackOps on the pool), its new nodes hash-consed, then interned.
  uint32_t step(uint32_t s, uint32_t cp) {
    const size_t first = pool_.size();
    scratch_.clear();
    StackOps ops(g_, pool_);  // copies the heads it steps from first
    ops.step(heads_.data() + states_[s].begin, states_[s].n, cp, scratch_);
    // New nodes: each parent comes before its child, so one pass maps them to canonical ids.
    remap_.assign(pool_.size() - first, 0);
    std::vector<StackNode> fresh(pool_.begin() + std::ptrdiff_t(first), pool_.end());
    pool_.resize(first);
    for (size_t k = 0; k < fresh.size(); ++k) {
      const uint32_t parent = fresh[k].parent >= first ? remap_[fresh[k].parent - first] : fresh[k].parent;
      remap_[k] = node(fresh[k].pos, parent);
    }
    for (uint32_t& h : scratch_)
      if (h >= first) h = remap_[h - first];
    return intern(scratch_);
  }

  uint32_t intern(std::vector<uint32_t>& heads) {
    std::sort(heads.begin(), heads.end());
    heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
    std::string key(reinterpret_cast<const char*>(heads.data()), heads.size() * sizeof(uint32_t));
    const auto id = static_cast<uint32_t>(states_.size());
    auto ins = ids_.emplace(std::move(key), id);
    if (!ins.second) return ins.first->second;
    State st{uint32_t(heads_.size()), uint32_t(heads.size()), false, false};
    for (uint32_t h : heads) {
      st.has_context = st.has_context || h == kContext;
      st.has_real = st.has_real || h > kContext;
    }
    heads_.insert(heads_.end(), heads.begin(), heads.end());
    states_.push_back(st);
    ascii_.resize(states_.size() * 128, -1);
    return id;
  }

  const Grammar& g_;
  std::vector<StackNode> pool_;  // hash-consed nodes; 0 and 1 are the sentinels
  std::unordered_map<uint64_t, uint32_t> nodes_;  // (pos, parent) -> node
  std::vector<uint32_t> heads_;  // every state's heads, one run each
  std::vector<State> states_;
  std::unordered_map<std::string, uint32_t> ids_;  // sorted heads -> state
  std::vector<int32_t> ascii_;   // [n_states * 128] successor on an ASCII code point, -1 unknown
  std::unordered_map<MemoKey, uint32_t, MemoHash> memo_;  // (state, accepting stacks) -> successor
  std::vector<uint32_t> scratch_, remap_;
};

// A depth-first walk of the vocabulary trie from a state, pruning a subtree as soon as its prefix
// is rejected. With kContext at the bottom of the stacks (cache builds), a token that needs what
// lies below is reported as uncertain rather than accepted or rejected.
class TrieWalk {
 public:
  TrieWalk(const GrammarVocab& v, StateStore& store) : v_(v), st_(store) {}

  // accept and uncertain receive runs [t0, t1) of tokens() (preorder indices), in increasing
  // order. With `only`, subtrees holding none of those tokens are skipped: the runs then still
  // cover other tokens, which the caller ignores.
  template <class Accept, class Uncertain>
  void run(uint32_t start, PartialUtf8 partial, Accept&& accept, Uncertain&& uncertain,
           const TokenRuns* only = nullptr) {
    frames_.resize(v_.max_depth() + 1);
    frames_[0] = Frame{start, partial, false, st_.has_context(start)};
    const uint32_t n_nodes = static_cast<uint32_t>(v_.n_nodes());
    size_t cur = 0;  // into *only: the first run ending after the current node's first token
    uint32_t i = 1;
    while (i < n_nodes) {
      if (only) {
        const uint32_t first = v_.tok_begin(i);
        while (cur < only->size() && (*only)[cur].second <= first) ++cur;
        if (cur == only->size()) break;
        if ((*only)[cur].first >= v_.tok_begin(v_.end(i))) {
          i = v_.end(i);
          continue;
        }
      }
      const uint32_t d = v_.depth(i);
      const Frame& pf = frames_[d - 1];
      Frame& f = frames_[d];
      f.partial = pf.partial;
      f.exited = pf.exited || pf.has_context;  // a path reached the context and goes on
      f.has_context = false;
      uint32_t cp = 0;
      const int r = feed_utf8(f.partial, v_.byte(i), &cp);
      bool live = false;
      bool ends_ok = true;  // a token ending here passes llama.cpp's partial-character rule
      if (r == 0) {  // inside a multi-byte sequence: same stacks, is the sequence still possible?
        f.state = pf.state;
        uint32_t lo = 0, hi = 0;
        ends_ok = false;
        if (partial_span(f.partial, &lo, &hi)) {
          const uint32_t* hs = st_.heads(f.state);
          for (uint32_t k = 0, n = st_.n_heads(f.state); k < n; ++k) {
            if (hs[k] <= kContext) continue;
            const GTerminal& t = st_.terminal_of(hs[k]);
            live = live || t.can_match_some(lo, hi);
            ends_ok = ends_ok || t.may_match(lo, hi);
          }
        }
      } else if (r == 1) {
        f.state = st_.next(pf.state, cp);
        live = f.state != StateStore::kDead;
        f.has_context = st_.has_context(f.state);
      }
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
      if (r == 1 && !st_.has_real(f.state)) {
        // Only sentinels: nothing below can be consumed here; past the context it is unknown.
        if (f.exited || f.has_context) uncertain(t1, v_.tok_begin(v_.end(i)));
        i = v_.end(i);
        continue;
      }
      ++i;
    }
  }

 private:
  struct Frame {
    uint32_t state;
    PartialUtf8 partial;
    bool exited;       // a path reached the context and went on consuming bytes
    bool has_context;  // a stack of this prefix is at the context (the suffix fully consumed)
  };

  const GrammarVocab& v_;
  StateStore& st_;
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
        grammar_detail::TokenRuns unsure;
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
    store_.reset();
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
    grammar_detail::TokenRuns uncertain;  // depend on it (runs of vocab tokens() indices)
    size_t n_uncertain = 0;
    std::vector<uint32_t> positions;  // the suffix, top first
    bool bottom = false;              // ... and the stack ends below it (nothing is uncertain)
    std::vector<std::pair<uint32_t, Entry*>> children;  // by the position below (kBottom)
  };

  // A subset of preorder token indices (all of them when null), read in increasing order.
  class Subset {
   public:
    explicit Subset(const grammar_detail::TokenRuns* runs) : r_(runs) {}
    // Calls f(lo, hi) for each part [lo, hi) of [t0, t1) in the subset.
    template <class F>
    void clip(uint32_t t0, uint32_t t1, F&& f) {
      if (!r_) {
        if (t0 < t1) f(t0, t1);
        return;
      }
      while (cur_ < r_->size() && (*r_)[cur_].second <= t0) ++cur_;
      for (size_t k = cur_; k < r_->size() && (*r_)[k].first < t1; ++k)
        f(std::max(t0, (*r_)[k].first), std::min(t1, (*r_)[k].second));
    }

   private:
    const grammar_detail::TokenRuns* r_;
    size_t cur_ = 0;
  };

  void check_matcher(const GrammarMatcher& m) const {
    EDGELLM_CHECK(m.grammar_ptr() == g_ || m.grammar_ptr().get() == g_.get(),
                  "TokenMasker: the matcher runs a different grammar");
  }
  bool in_trie(int32_t id) const { return v_->in_trie(id); }
  bool needs_refining(const Entry& e) const {
    return e.n_uncertain > opt_.refine_above && e.positions.size() < size_t(opt_.suffix_depth);
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
    if (!store_ || store_->bytes() > kStoreBytes) store_ = std::make_unique<StateStore>(*g_);
    const TokenRuns* only = parent ? &parent->uncertain : nullptr;
    e.parent = parent;
    Subset acc(only), unc(only);
    const std::vector<int32_t>& toks = v_->tokens();
    try {
      TrieWalk walk(*v_, *store_);
      walk.run(store_->stack_state(e.positions, bottom ? kEmpty : kContext), PartialUtf8{},
               [&](uint32_t t0, uint32_t t1) {
                 acc.clip(t0, t1, [&](uint32_t lo, uint32_t hi) { e.sparse.insert(e.sparse.end(), toks.begin() + lo, toks.begin() + hi); });
               },
               [&](uint32_t t0, uint32_t t1) { unc.clip(t0, t1, [&](uint32_t lo, uint32_t hi) { add_run(e.uncertain, lo, hi); }); },
               only);
    } catch (const Error&) {
      store_.reset();  // a step cut short by the matcher's bounds: start the next build afresh
      throw;
    }
    size_t own_bytes = e.sparse.size() * sizeof(int32_t);
    if (own_bytes > bitset_bytes) {
      e.dense.reset(v_->n_vocab());
      for (int32_t id : e.sparse) e.dense.set(id);
      e.sparse = {};
      own_bytes = bitset_bytes;
    }
    e.n_uncertain = run_tokens(e.uncertain);
    const size_t bytes = fixed + own_bytes + e.uncertain.size() * sizeof(e.uncertain[0]);
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
  void walk_exact(const GrammarMatcher& m, TokenMask& mask, const grammar_detail::TokenRuns* only) const {
    grammar_detail::StateStore store(*g_);  // this state's own: the cache's is under the lock
    grammar_detail::TrieWalk walk(*v_, store);
    Subset acc(only);
    const std::vector<int32_t>& toks = v_->tokens();
    walk.run(store.import(m.pool(), m.heads()), m.partial_utf8(),
             [&](uint32_t t0, uint32_t t1) {
               acc.clip(t0, t1, [&](uint32_t lo, uint32_t hi) {
                 for (uint32_t t = lo; t < hi; ++t) mask.set(toks[t]);
               });
             },
             [](uint32_t, uint32_t) {}, only);
  }

  // Tokens whose fate depends on the whole stack: one by one when few, else one restricted walk.
  void check_tokens(const GrammarMatcher& m, grammar_detail::TokenRuns& runs, TokenMask& mask) const {
    if (runs.empty()) return;
    std::sort(runs.begin(), runs.end());
    grammar_detail::TokenRuns merged;  // the union of the leaves' runs
    for (const auto& r : runs) {
      if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
      else merged.push_back(r);
    }
    if (grammar_detail::run_tokens(merged) > kCheckOneByOne) {
      walk_exact(m, mask, &merged);
      return;
    }
    const std::vector<int32_t>& toks = v_->tokens();
    for (const auto& r : merged)
      for (uint32_t t = r.first; t < r.second; ++t) {
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
  // The builds' states and transitions (dropped after precompute, and when above kStoreBytes).
  mutable std::unique_ptr<grammar_detail::StateStore> store_;
  static constexpr size_t kStoreBytes = size_t(32) << 20;
  mutable size_t cache_bytes_ = 0;
  mutable bool below_ready_ = false;
  mutable std::vector<uint32_t> rule_of_;               // [n_elems]
  mutable std::vector<std::vector<uint32_t>> below_;    // [n_rules]
};

}  // namespace edgellm
