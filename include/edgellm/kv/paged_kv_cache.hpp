// PagedKvCache: K and V of every layer in fixed-size blocks of tokens (PagedAttention-style),
// allocated on demand up to a byte budget, a block table per sequence, reference counts so that
// sequences can share a prefix (fork) and copy a shared block on write.
// Storage is F32 here. Includes only core/.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "edgellm/config.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"

namespace edgellm {

struct KvCacheParams {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_size = 16;   // tokens per block
  int max_tokens = 0;    // per-sequence context limit (positions 0..max_tokens-1); 0 = no limit
  size_t max_bytes = 0;  // budget for all blocks together; 0 = no limit
};

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheParams& p) : p_(p) {
    EDGELLM_CHECK(p.n_layer > 0 && p.n_kv_head > 0 && p.head_dim > 0, "KV cache: layers, heads and head dim must be > 0");
    EDGELLM_CHECK(p.block_size >= 1 && p.block_size <= 4096, "KV cache: block size ", p.block_size, " not in 1..4096");
    EDGELLM_CHECK(p.max_tokens >= 0, "KV cache: max_tokens must be >= 0");
    kv_dim_ = p.n_kv_head * p.head_dim;
    // One block: [n_layer][2 (K, V)][block_size][kv_dim] floats.
    block_floats_ = static_cast<size_t>(p.n_layer) * 2 * p.block_size * kv_dim_;
  }

  const KvCacheParams& params() const { return p_; }
  int kv_dim() const { return kv_dim_; }
  size_t block_bytes() const { return block_floats_ * sizeof(float); }
  size_t bytes_per_token() const { return block_bytes() / p_.block_size; }

  // ---- sequences ----
  int create_sequence() {
    for (size_t i = 0; i < seqs_.size(); ++i)
      if (!seqs_[i].alive) {
        seqs_[i] = Seq{};
        seqs_[i].alive = true;
        return static_cast<int>(i);
      }
    seqs_.push_back(Seq{});
    seqs_.back().alive = true;
    return static_cast<int>(seqs_.size() - 1);
  }
  void remove_sequence(int s) {
    Seq& q = seq(s);
    for (int b : q.table) release(b);
    q = Seq{};
  }
  // A new sequence sharing every block of `s` (copy on write when either side writes to one).
  int fork(int s) {
    const int child = create_sequence();
    Seq& parent = seq(s);
    Seq& c = seqs_[child];
    c.table = parent.table;
    c.n_tokens = parent.n_tokens;
    for (int b : c.table) ++refs_[b];
    return child;
  }
  // Drops positions >= n (edits, speculative rollback); whole blocks past the end return to the pool.
  void truncate(int s, int n) {
    Seq& q = seq(s);
    EDGELLM_CHECK(n >= 0 && n <= q.n_tokens, "KV cache: truncate sequence ", s, " to ", n, " but it holds ", q.n_tokens);
    const size_t keep = static_cast<size_t>((n + p_.block_size - 1) / p_.block_size);
    while (q.table.size() > keep) {
      release(q.table.back());
      q.table.pop_back();
    }
    q.n_tokens = n;
  }
  int n_tokens(int s) const { return cseq(s).n_tokens; }
  int n_sequences() const {
    int n = 0;
    for (const auto& q : seqs_) n += q.alive;
    return n;
  }

  // Makes positions [n_tokens, n_tokens + n) of `s` writable (allocating blocks, copying shared
  // ones) and counts them as held. Throws Error when the context limit or byte budget is reached.
  void append(int s, int n) {
    Seq& q = seq(s);
    EDGELLM_CHECK(n >= 0, "KV cache: append of ", n, " tokens");
    const int end = q.n_tokens + n;
    if (p_.max_tokens > 0 && end > p_.max_tokens)
      throw_error("KV cache: sequence ", s, " would hold ", end, " tokens, more than the context of ", p_.max_tokens);
    const int first_block = q.n_tokens / p_.block_size;
    const int n_blocks = (end + p_.block_size - 1) / p_.block_size;
    for (int b = first_block; b < n_blocks; ++b) {
      if (b < static_cast<int>(q.table.size())) {
        if (refs_[q.table[b]] > 1) {  // shared block: copy on write
          const int copy = allocate();
          std::memcpy(block_ptr(copy), block_ptr(q.table[b]), block_bytes());
          release(q.table[b]);
          q.table[b] = copy;
        }
      } else {
        q.table.push_back(allocate());
      }
    }
    q.n_tokens = end;
  }

  // K / V of (sequence, layer, position): kv_dim floats, heads one after another.
  float* k(int s, int layer, int pos) { return row(s, layer, 0, pos); }
  float* v(int s, int layer, int pos) { return row(s, layer, 1, pos); }
  const float* k(int s, int layer, int pos) const { return const_cast<PagedKvCache*>(this)->row(s, layer, 0, pos); }
  const float* v(int s, int layer, int pos) const { return const_cast<PagedKvCache*>(this)->row(s, layer, 1, pos); }
  // Block table access for kernels that walk a block at a time.
  const std::vector<int>& block_table(int s) const { return cseq(s).table; }
  // K (kv = 0) or V (kv = 1) of `layer` in `block`: [block_size][kv_dim].
  const float* block_data(int block, int layer, int kv) const {
    return block_ptr(block) + (static_cast<size_t>(layer) * 2 + kv) * p_.block_size * kv_dim_;
  }

  // ---- stats ----
  int blocks_allocated() const { return static_cast<int>(blocks_.size()); }
  int blocks_free() const { return static_cast<int>(free_.size()); }
  int blocks_used() const { return blocks_allocated() - blocks_free(); }
  size_t bytes_allocated() const { return blocks_.size() * block_bytes(); }
  int block_refs(int block) const { return refs_[block]; }

 private:
  struct Seq {
    bool alive = false;
    int n_tokens = 0;
    std::vector<int> table;  // block ids, one per block_size positions
  };

  Seq& seq(int s) {
    EDGELLM_CHECK(s >= 0 && s < static_cast<int>(seqs_.size()) && seqs_[s].alive, "KV cache: no sequence ", s);
    return seqs_[s];
  }
  const Seq& cseq(int s) const { return const_cast<PagedKvCache*>(this)->seq(s); }

  float* block_ptr(int b) const { return reinterpret_cast<float*>(blocks_[b].get()); }
  float* row(int s, int layer, int kv, int pos) {
    const Seq& q = seqs_[s];
    EDGELLM_DASSERT(pos >= 0 && pos < q.n_tokens);
    const int b = q.table[pos / p_.block_size];
    return block_ptr(b) + ((static_cast<size_t>(layer) * 2 + kv) * p_.block_size + pos % p_.block_size) * kv_dim_;
  }

  int allocate() {
    if (!free_.empty()) {
      const int b = free_.back();
      free_.pop_back();
      refs_[b] = 1;
      return b;
    }
    if (p_.max_bytes > 0 && (blocks_.size() + 1) * block_bytes() > p_.max_bytes)
      throw_error("KV cache: byte budget of ", p_.max_bytes, " bytes exhausted (", blocks_.size(), " blocks of ",
                  block_bytes(), " bytes in use) and no eviction policy is set");
    blocks_.push_back(aligned_bytes(block_bytes()));
    refs_.push_back(1);
    return static_cast<int>(blocks_.size() - 1);
  }
  void release(int b) {
    EDGELLM_DASSERT(refs_[b] > 0);
    if (--refs_[b] == 0) free_.push_back(b);
  }

  KvCacheParams p_;
  int kv_dim_ = 0;
  size_t block_floats_ = 0;
  std::vector<std::unique_ptr<uint8_t, AlignedFree>> blocks_;
  std::vector<int> refs_;
  std::vector<int> free_;
  std::vector<Seq> seqs_;
};

}  // namespace edgellm
