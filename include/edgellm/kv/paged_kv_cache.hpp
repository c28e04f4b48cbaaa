// PagedKvCache: K and V of every layer in fixed-size blocks of tokens (PagedAttention-style),
// allocated on demand up to a byte budget, a block table per sequence, reference counts so that
// sequences share a prefix (fork) and copy a shared block on write, "sinks + window" eviction,
// and a storage type per cache (F32, F16, Q8_0; the most recent tokens optionally also in F32).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_legacy.hpp"

namespace edgellm {

// Throws unless `type` can store rows of head_dim elements per head (F32, F16, or Q8_0 when
// head_dim is a multiple of its 32-element blocks); the message names the tools' flag.
inline void check_kv_storage(DType type, int head_dim) {
  EDGELLM_CHECK(type == DType::F32 || type == DType::F16 || type == DType::Q8_0, "KV cache: storage type ",
                dtype_name(type), " not supported (--kv-type f32, f16 or q8_0)");
  if (type == DType::Q8_0)
    EDGELLM_CHECK(head_dim % QK8_0 == 0, "KV cache type q8_0 (--kv-type) needs a head dim that is a multiple of ", QK8_0,
                  ", the model's is ", head_dim, " (use f16 or f32)");
}

struct KvCacheParams {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_size = 16;      // tokens per block
  int max_tokens = 0;       // per-sequence context limit (positions 0..max_tokens-1); 0 = no limit
  size_t max_bytes = 0;     // budget for all blocks together; 0 = no limit
  DType type = DType::F32;  // storage of K and V rows: F32, F16 or Q8_0 (head_dim a multiple of 32)
  int n_recent_f32 = 0;     // per sequence, the last n positions are also kept in F32 (0 = off; unused for F32)
};

// Positions [begin, begin + count) were dropped; later positions moved down by count.
struct KvEviction {
  int begin = 0;
  int count = 0;
};

// Rotation kernel used to re-rotate keys after an eviction (FloatKernels::rope's signature).
using KvRopeFn = void (*)(float* x, int n_heads, int head_dim, int n_rot, const float* cs);

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheParams& p) : p_(p) {
    EDGELLM_CHECK(p.n_layer > 0 && p.n_kv_head > 0 && p.head_dim > 0, "KV cache: layers, heads and head dim must be > 0, got ",
                  p.n_layer, ", ", p.n_kv_head, ", ", p.head_dim);
    EDGELLM_CHECK(p.block_size >= 1 && p.block_size <= 4096, "KV cache: block size ", p.block_size, " not in 1..4096");
    EDGELLM_CHECK(p.max_tokens >= 0, "KV cache: max_tokens must be >= 0, got ", p.max_tokens);
    EDGELLM_CHECK(p.n_recent_f32 >= 0, "KV cache: n_recent_f32 must be >= 0, got ", p.n_recent_f32);
    check_kv_storage(p.type, p.head_dim);
    kv_dim_ = p.n_kv_head * p.head_dim;
    row_bytes_ = dtype_row_bytes(p.type, p.head_dim);
    n_shadow_ = p.type == DType::F32 ? 0 : p.n_recent_f32;
    // One block: [n_layer][2 (K, V)][n_kv_head][block_size] head rows of row_bytes_, so that
    // attention walks one head's rows contiguously.
    block_bytes_ = static_cast<size_t>(p.n_layer) * 2 * p.n_kv_head * p.block_size * row_bytes_;
  }

  const KvCacheParams& params() const { return p_; }
  DType type() const { return p_.type; }
  int kv_dim() const { return kv_dim_; }
  int block_size() const { return p_.block_size; }
  size_t head_row_bytes() const { return row_bytes_; }
  size_t block_bytes() const { return block_bytes_; }
  size_t bytes_per_token() const { return block_bytes_ / static_cast<size_t>(p_.block_size); }
  // F32 copy of the recent positions, per sequence: [n_layer][2][n_recent][kv_dim] floats.
  size_t shadow_bytes() const { return static_cast<size_t>(n_shadow_) * p_.n_layer * 2 * kv_dim_ * sizeof(float); }

  // ---- sequences ----
  int create_sequence() {
    size_t i = 0;
    while (i < seqs_.size() && seqs_[i].alive) ++i;
    if (i == seqs_.size()) seqs_.emplace_back();
    seqs_[i] = Seq{};
    seqs_[i].alive = true;
    seqs_[i].shadow.resize(shadow_bytes() / sizeof(float));
    return static_cast<int>(i);
  }
  void remove_sequence(int s) {
    Seq& q = seq(s);
    for (int b : q.table) release(b);
    q = Seq{};
  }
  // A new sequence sharing every block of `s`; a shared block is copied when either side writes
  // to it (in practice the partly-filled last block).
  int fork(int s) {
    seq(s);
    const int child = create_sequence();
    const Seq& parent = seqs_[static_cast<size_t>(s)];
    Seq& c = seqs_[static_cast<size_t>(child)];
    c.table = parent.table;
    c.n_tokens = parent.n_tokens;
    c.shadow = parent.shadow;
    c.shadow_lo = parent.shadow_lo;
    c.ring_off = parent.ring_off;
    for (int b : c.table) ++refs_[static_cast<size_t>(b)];
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
    q.shadow_lo = std::min(q.shadow_lo, n);  // ring slots below n were not overwritten (see write)
  }
  int n_tokens(int s) const { return cseq(s).n_tokens; }
  int n_evicted(int s) const { return cseq(s).n_evicted; }
  int n_sequences() const {
    int n = 0;
    for (const auto& q : seqs_) n += q.alive;
    return n;
  }

  // Whether append(s, n) would succeed (context limit and byte budget, copies on write included).
  bool fits(int s, int n) const {
    const Seq& q = cseq(s);
    if (p_.max_tokens > 0 && q.n_tokens + static_cast<int64_t>(n) > p_.max_tokens) return false;
    return p_.max_bytes == 0 || blocks_needed(q, n) <= static_cast<int64_t>(free_.size()) + blocks_below_budget();
  }

  // Makes positions [n_tokens, n_tokens + n) of `s` writable (allocating blocks, copying shared
  // ones) and counts them as held. Throws Error when the context limit or byte budget is reached;
  // the sequence is then unchanged.
  void append(int s, int n) {
    Seq& q = seq(s);
    EDGELLM_CHECK(n >= 0, "KV cache: append of ", n, " tokens");
    const int end = q.n_tokens + n;
    if (p_.max_tokens > 0 && end > p_.max_tokens)
      throw_error("KV cache: sequence ", s, " would hold ", end, " tokens, more than the context of ", p_.max_tokens);
    if (p_.max_bytes > 0 && blocks_needed(q, n) > static_cast<int64_t>(free_.size()) + blocks_below_budget())
      throw_error("KV cache: byte budget of ", p_.max_bytes, " bytes exhausted (", blocks_used(), " blocks of ",
                  block_bytes_, " bytes in use, ", blocks_needed(q, n), " more needed for ", n,
                  " tokens) and no eviction policy is set");
    const int first_block = q.n_tokens / p_.block_size;
    const int n_blocks = (end + p_.block_size - 1) / p_.block_size;
    for (int b = first_block; b < n_blocks; ++b) {
      if (b < static_cast<int>(q.table.size())) make_unique(q, static_cast<size_t>(b));
      else q.table.push_back(allocate());
    }
    q.n_tokens = end;
  }

  // Stores K and V of one token of `layer` at `pos` (< n_tokens): k, v: [kv_dim], heads one after
  // another, converted to the storage type (and kept in F32 too when pos is among the recent ones).
  void write(int s, int layer, int pos, const float* k, const float* v) {
    Seq& q = seqs_[static_cast<size_t>(s)];
    EDGELLM_DASSERT(pos >= 0 && pos < q.n_tokens && layer >= 0 && layer < p_.n_layer);
    const int b = q.table[static_cast<size_t>(pos / p_.block_size)];
    EDGELLM_DASSERT(refs_[static_cast<size_t>(b)] == 1);
    for (int kv = 0; kv < 2; ++kv) {
      const float* src = kv == 0 ? k : v;
      for (int h = 0; h < p_.n_kv_head; ++h)
        store_row(head_rows_mut(b, layer, kv, h) + static_cast<size_t>(pos % p_.block_size) * row_bytes_, src + h * p_.head_dim);
    }
    if (n_shadow_ == 0) return;
    // The ring keeps positions (newest - n_shadow_, newest]; positions are written in increasing
    // order per layer, so an older position never overwrites a newer one's slot.
    q.shadow_lo = std::max(q.shadow_lo, pos - n_shadow_ + 1);
    if (pos < q.shadow_lo) return;
    std::copy_n(k, kv_dim_, shadow_row_mut(q, layer, 0, pos));
    std::copy_n(v, kv_dim_, shadow_row_mut(q, layer, 1, pos));
  }

  // ---- reading in place (attention) ----
  const std::vector<int>& block_table(int s) const { return cseq(s).table; }
  // Rows of one head in `block`: [block_size][head_row_bytes()] in the storage type.
  const uint8_t* head_rows(int block, int layer, int kv, int head) const {
    return block_ptr(block) + ((static_cast<size_t>(layer) * 2 + kv) * p_.n_kv_head + head) * p_.block_size * row_bytes_;
  }
  // Positions >= shadow_begin(s) (and < n_tokens) are also available in F32 via shadow_row.
  int shadow_begin(int s) const { return n_shadow_ ? cseq(s).shadow_lo : cseq(s).n_tokens; }
  // F32 K (kv = 0) or V (kv = 1) of `layer` at a position >= shadow_begin(s): [kv_dim].
  const float* shadow_row(int s, int layer, int kv, int pos) const {
    PagedKvCache* self = const_cast<PagedKvCache*>(this);
    return self->shadow_row_mut(self->seqs_[static_cast<size_t>(s)], layer, kv, pos);
  }
  // K or V of one position as floats (from the shadow when there): out [kv_dim]. For tests and tools.
  void read_row(int s, int layer, int kv, int pos, float* out) const {
    const Seq& q = cseq(s);
    EDGELLM_CHECK(pos >= 0 && pos < q.n_tokens, "KV cache: position ", pos, " not held by sequence ", s);
    if (pos >= shadow_begin(s)) {
      std::copy_n(shadow_row(s, layer, kv, pos), kv_dim_, out);
      return;
    }
    const int b = q.table[static_cast<size_t>(pos / p_.block_size)];
    for (int h = 0; h < p_.n_kv_head; ++h)
      load_row(head_rows(b, layer, kv, h) + static_cast<size_t>(pos % p_.block_size) * row_bytes_, out + h * p_.head_dim);
  }

  // ---- saving and restoring one sequence (Session::save / restore) ----
  // Block i of sequence s as stored: block_bytes() bytes.
  const uint8_t* block_data(int s, size_t i) const {
    const Seq& q = cseq(s);
    EDGELLM_CHECK(i < q.table.size(), "KV cache: sequence ", s, " has no block ", i);
    return block_ptr(q.table[i]);
  }
  // Replaces the contents of sequence s by n positions (n_evicted dropped before them): blocks
  // copied from `blocks` (ceil(n / block_size) of block_bytes()), and with F32 copies kept, those
  // of positions [shadow_lo, n) from `shadow` ([position][layer][K, V][kv_dim]). Throws Error
  // (the sequence then empty) when the context or the byte budget cannot hold them.
  void load_sequence(int s, int n, int n_evicted, const uint8_t* blocks, int shadow_lo, const float* shadow) {
    truncate(s, 0);
    append(s, n);
    Seq& q = seq(s);
    for (size_t i = 0; i < q.table.size(); ++i) std::memcpy(block_ptr(q.table[i]), blocks + i * block_bytes_, block_bytes_);
    q.n_evicted = n_evicted;
    q.ring_off = 0;
    q.shadow_lo = n;
    if (n_shadow_ == 0) return;
    EDGELLM_CHECK(shadow_lo >= 0 && shadow_lo <= n && n - shadow_lo <= n_shadow_, "KV cache: F32 copies from ", shadow_lo, " of ", n);
    q.shadow_lo = shadow_lo;
    for (int pos = shadow_lo; pos < n; ++pos)
      for (int l = 0; l < p_.n_layer; ++l)
        for (int kv = 0; kv < 2; ++kv)
          std::copy_n(shadow + ((static_cast<size_t>(pos - shadow_lo) * p_.n_layer + l) * 2 + kv) * kv_dim_, kv_dim_, shadow_row_mut(q, l, kv, pos));
  }
  // Positions whose F32 copy is kept per sequence (0: none).
  int n_recent_f32() const { return n_shadow_; }

  // ---- eviction ("sinks + window", StreamingLLM) ----
  // Drops the whole blocks after the ones holding the first n_sink positions and before the one
  // holding the first of the last `window` positions. Keys after the dropped range still carry
  // their old rotation: the caller re-rotates them (rotate_keys) by -count positions.
  KvEviction evict_sink_window(int s, int n_sink, int window) {
    Seq& q = seq(s);
    EDGELLM_CHECK(n_sink >= 0 && window >= 1, "KV cache: eviction needs n_sink >= 0 and window >= 1, got ", n_sink, " and ", window);
    const int bs = p_.block_size;
    const int first = (n_sink + bs - 1) / bs;                 // first droppable block
    const int last = std::max(0, q.n_tokens - window) / bs;   // block of the window's first position
    if (last <= first) return {};
    for (int b = first; b < last; ++b) release(q.table[static_cast<size_t>(b)]);
    q.table.erase(q.table.begin() + first, q.table.begin() + last);
    const KvEviction e{first * bs, (last - first) * bs};
    q.n_tokens -= e.count;
    q.n_evicted += e.count;
    if (n_shadow_) {  // slots follow their positions down; sink positions lose theirs
      q.ring_off = (q.ring_off + e.count) % n_shadow_;
      q.shadow_lo = std::max(q.shadow_lo, e.begin + e.count) - e.count;
    }
    return e;
  }
  // Applies `rope` (the rotation given by cs, n_rot values) to the keys of every layer at positions
  // >= from of `s`, in the storage type and the F32 copy. Shared blocks are copied first.
  void rotate_keys(int s, int from, KvRopeFn rope, int n_rot, const float* cs) {
    Seq& q = seq(s);
    std::vector<float> tmp(static_cast<size_t>(p_.head_dim));
    const int bs = p_.block_size;
    for (int bi = std::max(0, from) / bs; bi < static_cast<int>(q.table.size()); ++bi) {
      make_unique(q, static_cast<size_t>(bi));
      const int b = q.table[static_cast<size_t>(bi)];
      const int lo = std::max(from, bi * bs), hi = std::min(q.n_tokens, (bi + 1) * bs);
      for (int l = 0; l < p_.n_layer; ++l)
        for (int h = 0; h < p_.n_kv_head; ++h)
          for (int pos = lo; pos < hi; ++pos) {
            uint8_t* row = head_rows_mut(b, l, 0, h) + static_cast<size_t>(pos % bs) * row_bytes_;
            load_row(row, tmp.data());
            rope(tmp.data(), 1, p_.head_dim, n_rot, cs);
            store_row(row, tmp.data());
          }
    }
    if (n_shadow_ == 0) return;
    for (int pos = std::max(from, q.shadow_lo); pos < q.n_tokens; ++pos)
      for (int l = 0; l < p_.n_layer; ++l) rope(shadow_row_mut(q, l, 0, pos), p_.n_kv_head, p_.head_dim, n_rot, cs);
  }

  // ---- stats ----
  int blocks_allocated() const { return static_cast<int>(blocks_.size()); }
  int blocks_free() const { return static_cast<int>(free_.size()); }
  int blocks_used() const { return blocks_allocated() - blocks_free(); }
  // Bytes held: every allocated block (used or free) plus the F32 copies of live sequences.
  size_t bytes_allocated() const { return blocks_.size() * block_bytes_ + static_cast<size_t>(n_sequences()) * shadow_bytes(); }
  int block_refs(int block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  struct Seq {
    bool alive = false;
    int n_tokens = 0;
    int n_evicted = 0;        // positions dropped by eviction so far
    std::vector<int> table;   // block ids, one per block_size positions
    std::vector<float> shadow;  // [n_layer][2][n_shadow_][kv_dim] ring of recent positions
    int shadow_lo = 0;        // the ring holds positions [shadow_lo, n_tokens)
    int ring_off = 0;         // slot of position p: (p + ring_off) % n_shadow_
  };

  Seq& seq(int s) {
    EDGELLM_CHECK(s >= 0 && s < static_cast<int>(seqs_.size()) && seqs_[static_cast<size_t>(s)].alive, "KV cache: no sequence ", s);
    return seqs_[static_cast<size_t>(s)];
  }
  const Seq& cseq(int s) const { return const_cast<PagedKvCache*>(this)->seq(s); }

  uint8_t* block_ptr(int b) const { return blocks_[static_cast<size_t>(b)].get(); }
  uint8_t* head_rows_mut(int block, int layer, int kv, int head) { return const_cast<uint8_t*>(head_rows(block, layer, kv, head)); }
  float* shadow_row_mut(Seq& q, int layer, int kv, int pos) {
    const int slot = (pos + q.ring_off) % n_shadow_;
    return q.shadow.data() + ((static_cast<size_t>(layer) * 2 + kv) * n_shadow_ + slot) * kv_dim_;
  }

  // One head row (head_dim values) between floats and the storage type.
  void store_row(uint8_t* dst, const float* x) const {
    switch (p_.type) {
      case DType::F16: {
        uint16_t* d = reinterpret_cast<uint16_t*>(dst);
        for (int i = 0; i < p_.head_dim; ++i) d[i] = fp32_to_fp16(x[i]);
        return;
      }
      case DType::Q8_0: quantize_row_q8_0_ref(x, reinterpret_cast<block_q8_0*>(dst), p_.head_dim); return;
      default: std::memcpy(dst, x, row_bytes_); return;
    }
  }
  void load_row(const uint8_t* src, float* y) const {
    switch (p_.type) {
      case DType::F16: {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
        for (int i = 0; i < p_.head_dim; ++i) y[i] = fp16_to_fp32(h[i]);
        return;
      }
      case DType::Q8_0: dequantize_row_q8_0(reinterpret_cast<const block_q8_0*>(src), y, p_.head_dim); return;
      default: std::memcpy(y, src, row_bytes_); return;
    }
  }

  // New blocks plus copies of shared blocks that append(q, n) would take.
  int64_t blocks_needed(const Seq& q, int n) const {
    if (n <= 0) return 0;
    const int64_t end = q.n_tokens + static_cast<int64_t>(n);
    const int64_t n_blocks = (end + p_.block_size - 1) / p_.block_size;
    int64_t need = std::max<int64_t>(0, n_blocks - static_cast<int64_t>(q.table.size()));
    for (int64_t b = q.n_tokens / p_.block_size; b < static_cast<int64_t>(q.table.size()); ++b)
      need += refs_[static_cast<size_t>(q.table[static_cast<size_t>(b)])] > 1;
    return need;
  }
  int64_t blocks_below_budget() const {
    if (p_.max_bytes == 0) return std::numeric_limits<int64_t>::max() / 2;
    return std::max<int64_t>(0, static_cast<int64_t>(p_.max_bytes / block_bytes_) - static_cast<int64_t>(blocks_.size()));
  }
  // Copy on write: gives q its own copy of table[i] when the block is shared.
  void make_unique(Seq& q, size_t i) {
    const int b = q.table[i];
    if (refs_[static_cast<size_t>(b)] <= 1) return;
    const int copy = allocate();
    std::memcpy(block_ptr(copy), block_ptr(b), block_bytes_);
    release(b);
    q.table[i] = copy;
  }
  int allocate() {
    if (!free_.empty()) {
      const int b = free_.back();
      free_.pop_back();
      refs_[static_cast<size_t>(b)] = 1;
      return b;
    }
    if (p_.max_bytes > 0 && (blocks_.size() + 1) * block_bytes_ > p_.max_bytes)
      throw_error("KV cache: byte budget of ", p_.max_bytes, " bytes exhausted (", blocks_.size(), " blocks of ",
                  block_bytes_, " bytes in use) and no eviction policy is set");
    blocks_.push_back(aligned_bytes(block_bytes_));
    refs_.push_back(1);
    return static_cast<int>(blocks_.size() - 1);
  }
  void release(int b) {
    EDGELLM_DASSERT(refs_[static_cast<size_t>(b)] > 0);
    if (--refs_[static_cast<size_t>(b)] == 0) free_.push_back(b);
  }

  KvCacheParams p_;
  int kv_dim_ = 0;
  size_t row_bytes_ = 0;    // bytes of one head's row in the storage type
  int n_shadow_ = 0;        // recent positions also kept in F32
  size_t block_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t, AlignedFree>> blocks_;
  std::vector<int> refs_;
  std::vector<int> free_;
  std::vector<Seq> seqs_;
};

// The K or V rows of one KV head of one sequence and layer, read as floats a step of positions at
// a time, as attention consumes them (S = Q K^T, then O = P V). A step is whole cache blocks, at
// most max_step_rows positions, never straddling the F32 shadow boundary; rows come from the
// blocks through to_float (one call per block: a head's rows are back to back in it) or are copied
// from the shadow. Each read asks for the next step's rows ahead of use, K's last step for V's
// first: the blocks of a sequence are scattered (paged), so the hardware prefetcher does not run
// from one into the next.
class KvHeadReader {
 public:
  enum Part { K = 0, V = 1 };

  // Positions [0, n_pos) of sequence seq; to_float converts the cache's row type.
  KvHeadReader(const PagedKvCache& kv, int seq, int layer, int kv_head, int n_pos, ToFloatFn to_float,
               int max_step_rows)
      : kv_(kv), table_(kv.block_table(seq)), seq_(seq), layer_(layer), head_(kv_head), n_pos_(n_pos),
        n_in_blocks_(std::min(n_pos, kv.shadow_begin(seq))), head_dim_(kv.params().head_dim),
        step_rows_(kv.block_size() * std::max(1, max_step_rows / kv.block_size())), to_float_(to_float) {}

  int n_pos() const { return n_pos_; }
  int max_step() const { return step_rows_; }
  // Positions of the step that starts at j0.
  int step(int j0) const {
    return j0 < n_in_blocks_ ? std::min(step_rows_, n_in_blocks_ - j0) : std::min(step_rows_, n_pos_ - j0);
  }
  // out [step(j0), head_dim]: the part's rows of the step at j0 as floats; prefetches what comes next.
  void read(Part part, int j0, float* out) const {
    const int cnt = step(j0);
    if (j0 + cnt < n_pos_) prefetch(part, j0 + cnt);
    else if (part == K) prefetch(V, 0);
    const size_t hd = static_cast<size_t>(head_dim_);
    if (j0 < n_in_blocks_) {
      for_block_runs(j0, cnt, [&](int block, int row, int rows, int at) {
        to_float_(rows_of(block, part) + size_t(row) * kv_.head_row_bytes(), out + size_t(at) * hd, int64_t(rows) * head_dim_);
      });
      return;
    }
    for (int r = 0; r < cnt; ++r)
      std::copy_n(kv_.shadow_row(seq_, layer_, part, j0 + r) + size_t(head_) * hd, hd, out + size_t(r) * hd);
  }

 private:
  static constexpr size_t kCacheLine = 64;

  const uint8_t* rows_of(int block, Part part) const { return kv_.head_rows(block, layer_, part, head_); }
  // fn(block id, first row in it, rows, offset from j0) for the cache-block runs of [j0, j0 + cnt).
  template <class Fn>
  void for_block_runs(int j0, int cnt, Fn&& fn) const {
    const int bs = kv_.block_size();
    for (int j = j0; j < j0 + cnt;) {
      const int rows = std::min(bs - j % bs, j0 + cnt - j);
      fn(table_[static_cast<size_t>(j / bs)], j % bs, rows, j - j0);
      j += rows;
    }
  }
  void prefetch(Part part, int j0) const {
    if (j0 >= n_in_blocks_) return;  // the shadow is one contiguous array
    for_block_runs(j0, step(j0), [&](int block, int row, int rows, int) {
      const uint8_t* p = rows_of(block, part) + size_t(row) * kv_.head_row_bytes();
      for (size_t off = 0; off < size_t(rows) * kv_.head_row_bytes(); off += kCacheLine) __builtin_prefetch(p + off);
    });
  }

  const PagedKvCache& kv_;
  const std::vector<int>& table_;
  int seq_, layer_, head_, n_pos_, n_in_blocks_, head_dim_, step_rows_;
  ToFloatFn to_float_;
};

}  // namespace edgellm
