// Weights larger than memory: the matrices a memory budget could not keep resident
// (model/residency.hpp) streamed from storage while compute runs (WeightStream), on the runtime's
// read-ahead ring (runtime/read_ahead.hpp: the I/O threads) and file reader
// (runtime/file_reader.hpp: O_DIRECT / buffered reads, also used to load the resident matrices).
// This header says what is read: matrices in matmul units, row ranges, and their resident form.
//
// Every matrix is read once per forward pass, so a resident byte saves one byte of storage reads
// per token whichever matrix it belongs to; the planner keeps as many bytes resident as the budget
// allows. The streamed matrices are read in "units" — the matrices one matmul call uses (Q/K/V,
// the attention output, gate/up, down of a layer; the output matrix in row chunks) — into a ring
// of slots, in the order forward() uses them, cyclically, so the reader runs ahead of compute
// (also across tokens) by up to n_slots - 1 units. A streamed matrix takes the same form as a
// resident one (repacked on the way where the kernel table has an interleaved form), so logits do
// not depend on the budget.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/runtime/file_reader.hpp"
#include "edgellm/runtime/read_ahead.hpp"

namespace edgellm {

// Bytes of one storage read of the stream (and of the staging buffer reads go through).
inline constexpr size_t kStreamReadBytes = size_t(4) << 20;
// Slots of the ring: the unit being computed plus two read ahead.
inline constexpr int kStreamSlots = 3;
// Read buffers between the reader and the placing thread: the reader runs up to this many reads
// ahead, so storage stays busy while a chunk is repacked.
inline constexpr int kStreamReadBuffers = 3;
// Row chunks of a streamed output matrix start at multiples of this (a multiple of every packed
// form's group and of every multi-row kernel's rows, so each row is computed as unchunked).
inline constexpr int64_t kStreamRowAlign = 64;

// The reader of the model file (runtime/file_reader.hpp), by its earlier name.
using WeightReader = FileReader;

// Rows [row0, row1) of one matrix, in the file at file_off, to be placed at dst_off of a unit's
// memory in the matrix's resident form (repacked with pf, or the file's bytes when pf is null).
struct StreamPiece {
  const MatmulWeight* w = nullptr;  // the matrix as loaded (file view: type, n_in, row_bytes)
  const PackedFormat* pf = nullptr;
  int64_t row0 = 0, row1 = 0;
  uint64_t file_off = 0;  // of row0
  size_t dst_off = 0;
  size_t dst_bytes = 0;
  size_t file_bytes() const { return size_t(row1 - row0) * w->row_bytes; }
  // The matrix view compute uses, with its bytes at base + dst_off.
  MatmulWeight view(uint8_t* base) const {
    MatmulWeight v = *w;
    v.n_out = row1 - row0;
    if (pf) {
      v.packed = base + dst_off;
      v.pf = pf;
    } else {
      v.data = base + dst_off;
      v.packed = nullptr;
      v.pf = nullptr;
    }
    return v;
  }
};

// Bytes of rows [0, n_rows) of w in its resident form (pf groups, or file rows), 64-byte rounded.
inline size_t resident_form_bytes(const MatmulWeight& w, const PackedFormat* pf, int64_t n_rows) {
  const size_t raw = pf ? size_t((n_rows + pf->rows - 1) / pf->rows) * pf->group_bytes(w.n_in) : size_t(n_rows) * w.row_bytes;
  return (raw + kDefaultAlignment - 1) / kDefaultAlignment * kDefaultAlignment;
}

// One read of a piece: rows [r, r + n) of piece `piece` of a unit, at file offset off.
struct ReadOp {
  size_t piece = 0;
  int64_t r = 0, n = 0;
  uint64_t off = 0;
  size_t bytes = 0;
};

// A piece's reads of at most `chunk` bytes, whole packed groups each.
inline std::vector<ReadOp> piece_reads(const StreamPiece& p, size_t piece, size_t chunk) {
  const size_t rb = p.w->row_bytes;
  const int64_t step_rows = p.pf ? std::max<int64_t>(1, int64_t(chunk / (size_t(p.pf->rows) * rb))) * p.pf->rows
                                 : std::max<int64_t>(1, int64_t(chunk / rb));
  EDGELLM_CHECK(size_t(p.pf ? p.pf->rows : 1) * rb <= chunk, "stream: a row group of ", p.pf ? p.pf->rows : 1,
                " rows of ", rb, " bytes exceeds the ", chunk, "-byte read buffer");
  std::vector<ReadOp> ops;
  for (int64_t r = p.row0; r < p.row1; r += step_rows) {
    ReadOp op;
    op.piece = piece;
    op.r = r;
    op.n = std::min(step_rows, p.row1 - r);
    op.off = p.file_off + uint64_t(r - p.row0) * rb;
    op.bytes = size_t(op.n) * rb;
    ops.push_back(op);
  }
  return ops;
}

// Puts one read's rows (src: the file's bytes) into the piece's memory at dst: copied, or repacked.
inline void place_rows(const StreamPiece& p, const ReadOp& op, const uint8_t* src, uint8_t* dst) {
  const size_t rb = p.w->row_bytes;
  if (!p.pf) {
    std::memcpy(dst + size_t(op.r - p.row0) * rb, src, op.bytes);
    return;
  }
  const size_t gb = p.pf->group_bytes(p.w->n_in);
  for (int64_t g = 0; g < op.n; g += p.pf->rows) {
    const int count = int(std::min<int64_t>(p.pf->rows, op.n - g));
    p.pf->pack(src + size_t(g) * rb, rb, count, p.w->n_in, dst + size_t((op.r - p.row0 + g) / p.pf->rows) * gb);
  }
}

// Reads a piece through the reader into dst (its dst_bytes), repacking on the way when pf is set
// (the load of the resident matrices: one read after the other).
inline void load_piece(FileReader& rd, const StreamPiece& p, uint8_t* dst) {
  for (const ReadOp& op : piece_reads(p, 0, rd.chunk())) place_rows(p, op, rd.read(op.off, op.bytes), dst);
}

// The matrices one matmul call of forward() reads that are streamed; key says which call.
struct StreamUnit {
  int key = 0;
  std::vector<StreamPiece> pieces;
  size_t bytes = 0;       // in memory (sum of dst_bytes)
  uint64_t file_bytes = 0;  // read from storage
};

// The stream's counters: the ring's (jobs are units; placing is copying / repacking into the slots).
using StreamStats = ReadAheadStats;

// The streamed units on the runtime's read-ahead ring: the ring's jobs are the units' reads in
// order, its place function copies or repacks each read's rows into the unit's slot. Units are
// loaded in list order, cyclically. acquire(key) returns the next unit of the cycle, which must be
// `key` (units a caller skipped, e.g. after an exception or a pass without logits, are waited for
// and released first). One consumer at a time (the model serializes forward passes of a streamed
// model), holding one unit at a time.
class WeightStream {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(WeightStream* s, const std::vector<MatmulWeight>* views, const StreamUnit* unit)
        : s_(s), views_(views), unit_(unit) {}
    Lease(Lease&& o) noexcept : s_(o.s_), views_(o.views_), unit_(o.unit_) { o.s_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        release();
        s_ = o.s_;
        views_ = o.views_;
        unit_ = o.unit_;
        o.s_ = nullptr;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    // The matrix compute should use for m: its streamed copy when this unit holds it, else m.
    const MatmulWeight& operator()(const MatmulWeight& m) const {
      if (s_)
        for (size_t i = 0; i < unit_->pieces.size(); ++i)
          if (unit_->pieces[i].w == &m) return (*views_)[i];
      return m;
    }
    // The i-th piece's view (row chunks of the output matrix).
    const MatmulWeight& piece(size_t i) const { return (*views_)[i]; }
    const StreamUnit* unit() const { return unit_; }
    void release() {
      if (s_) s_->ring_->release();
      s_ = nullptr;
    }

   private:
    WeightStream* s_ = nullptr;
    const std::vector<MatmulWeight>* views_ = nullptr;
    const StreamUnit* unit_ = nullptr;
  };

  WeightStream(FileReader reader, std::vector<StreamUnit> units, int n_slots) : units_(std::move(units)) {
    EDGELLM_CHECK(!units_.empty(), "WeightStream: no units");
    size_t slot_bytes = 0;
    std::vector<std::vector<ReadRequest>> jobs;
    for (const StreamUnit& u : units_) {
      EDGELLM_CHECK(u.key >= 0, "WeightStream: negative unit key");
      slot_bytes = std::max(slot_bytes, u.bytes);
      if (size_t(u.key) >= streamed_key_.size()) streamed_key_.resize(size_t(u.key) + 1, 0);
      streamed_key_[size_t(u.key)] = 1;
      std::vector<ReadOp> ops;
      for (size_t i = 0; i < u.pieces.size(); ++i) {
        const std::vector<ReadOp> p = piece_reads(u.pieces[i], i, reader.chunk());
        ops.insert(ops.end(), p.begin(), p.end());
      }
      EDGELLM_CHECK(!ops.empty(), "WeightStream: a unit without reads");
      std::vector<ReadRequest> job;
      for (const ReadOp& op : ops) job.push_back({op.off, op.bytes});
      jobs.push_back(std::move(job));
      ops_.push_back(std::move(ops));
    }
    views_.resize(size_t(std::max(2, n_slots)));
    ring_ = std::make_unique<ReadAheadRing>(std::move(reader), std::move(jobs), slot_bytes, n_slots, kStreamReadBuffers,
                                            [this](size_t job, size_t read, const uint8_t* src, uint8_t* slot) {
                                              const ReadOp& op = ops_[job][read];
                                              const StreamPiece& p = units_[job].pieces[op.piece];
                                              place_rows(p, op, src, slot + p.dst_off);
                                            });
  }
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  bool has(int key) const { return key >= 0 && size_t(key) < streamed_key_.size() && streamed_key_[size_t(key)]; }

  // Waits for unit `key` (the next one of the cycle after skipping others) and hands it out until
  // the lease is released. Rethrows an error the reader met (e.g. the file shrank): as an Error
  // naming the file.
  Lease acquire(int key) {
    EDGELLM_CHECK(has(key), "WeightStream: unit ", key, " is not streamed");
    for (;;) {
      const ReadAheadRing::Held h = ring_->next();
      const StreamUnit& u = units_[h.job];
      if (u.key == key) {
        std::vector<MatmulWeight>& v = views_[h.slot];
        v.clear();
        for (const StreamPiece& p : u.pieces) v.push_back(p.view(h.data));
        return Lease(this, &v, &u);
      }
      ring_->release();  // a unit this pass did not use: skip it
    }
  }

  const std::vector<StreamUnit>& units() const { return units_; }
  int n_slots() const { return ring_->n_slots(); }
  size_t slot_bytes() const { return ring_->slot_bytes(); }
  size_t ring_bytes() const { return ring_->ring_bytes(); }
  size_t read_buffer_bytes() const { return ring_->read_buffer_bytes(); }
  bool pinned() const { return ring_->pinned(); }
  uint64_t streamed_bytes_per_cycle() const {
    uint64_t s = 0;
    for (const StreamUnit& u : units_) s += u.file_bytes;
    return s;
  }
  StreamStats stats() const { return ring_->stats(); }
  // Serializes forward passes that use the stream (one consumer at a time).
  std::mutex& pass_mutex() { return pass_mu_; }

 private:
  std::vector<StreamUnit> units_;
  std::vector<std::vector<ReadOp>> ops_;          // per unit: its reads in order
  std::vector<char> streamed_key_;                // [key] = 1 when a unit has that key
  std::vector<std::vector<MatmulWeight>> views_;  // per slot: the held unit's pieces as matrices (consumer only)
  std::mutex pass_mu_;
  std::unique_ptr<ReadAheadRing> ring_;           // last: its threads stop before the units go
};

}  // namespace edgellm
