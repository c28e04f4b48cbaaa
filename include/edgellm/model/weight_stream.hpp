// Weights larger than memory: the threads that stream the matrices a memory budget could not keep
// resident (LlamaWeights::plan_residency) from storage while compute runs (WeightStream), and the
// reader that also loads the resident ones (WeightReader).
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
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"

namespace edgellm {

// Bytes of one storage read of the stream (and of the staging buffer reads go through).
inline constexpr size_t kStreamReadBytes = size_t(4) << 20;
// Slots of the ring: the unit being computed plus two read ahead.
inline constexpr int kStreamSlots = 3;
// Row chunks of a streamed output matrix start at multiples of this (a multiple of every packed
// form's group and of every multi-row kernel's rows, so each row is computed as unchunked).
inline constexpr int64_t kStreamRowAlign = 64;

// Reads byte ranges of a model file into memory: pread with O_DIRECT when the file system allows
// it (the page cache is not filled, so reads count only once against a memory limit), else plain
// pread followed by POSIX_FADV_DONTNEED of the range. A file that is already in memory (a GGUF
// made in memory, or read because it could not be mapped) is copied from.
class WeightReader {
 public:
  WeightReader() = default;
  // chunk: most bytes per read (a whole number of O_DIRECT blocks is added around it).
  WeightReader(std::string path, const uint8_t* mem_base, size_t chunk = kStreamReadBytes)
      : path_(std::move(path)), mem_(mem_base), chunk_(chunk) {
    if (mem_) return;
#ifdef O_DIRECT
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct_ = fd_ >= 0;
#endif
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_error("file ", path_, ": cannot open for streaming: ", std::strerror(errno));
  }
  WeightReader(WeightReader&& o) noexcept { *this = std::move(o); }
  WeightReader& operator=(WeightReader&& o) noexcept {
    if (this != &o) {
      close_fd();
      path_ = std::move(o.path_);
      mem_ = o.mem_;
      chunk_ = o.chunk_;
      fd_ = o.fd_;
      direct_ = o.direct_;
      staging_ = std::move(o.staging_);
      bytes_read_ = o.bytes_read_;
      o.fd_ = -1;
    }
    return *this;
  }
  WeightReader(const WeightReader&) = delete;
  WeightReader& operator=(const WeightReader&) = delete;
  ~WeightReader() { close_fd(); }

  // Bytes of the read buffer a reader of `chunk`-byte reads holds.
  static size_t staging_for(size_t chunk) { return (chunk + kAlign - 1) / kAlign * kAlign + 2 * kAlign; }

  // Bytes [off, off + n) of the file, n <= chunk(); valid until the next call.
  const uint8_t* read(uint64_t off, size_t n) {
    if (!mem_ && staging_.size() == 0) staging_ = AnonymousMemory(staging_for(chunk_));  // on first use
    return read_into(off, n, staging_.data());
  }

  // The same into buf (staging_for(chunk()) bytes, 4096-aligned); returns where the bytes start in
  // it (or in the in-memory file).
  const uint8_t* read_into(uint64_t off, size_t n, uint8_t* buf) {
    EDGELLM_CHECK(n <= chunk_, "WeightReader: read of ", n, " bytes exceeds the ", chunk_, "-byte read buffer");
    bytes_read_ += n;
    if (mem_) return mem_ + off;
    const uint64_t a0 = off / kAlign * kAlign;
    const size_t skip = size_t(off - a0), len = (skip + n + kAlign - 1) / kAlign * kAlign;
    size_t got = 0;
    while (got < skip + n) {
      const ssize_t r = ::pread(fd_, buf + got, len - got, off_t(a0 + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EINVAL && direct_) {  // O_DIRECT refused for this range or file system
        reopen_buffered();
        continue;
      }
      if (r <= 0)
        throw_error("file ", path_, ": read of weights failed at byte ", a0 + got, ": ",
                    r < 0 ? std::strerror(errno) : "unexpected end of file");
      got += size_t(r);
    }
#ifdef POSIX_FADV_DONTNEED
    if (!direct_) ::posix_fadvise(fd_, off_t(a0), off_t(got), POSIX_FADV_DONTNEED);
#endif
    return buf + skip;
  }
  bool direct() const { return direct_; }
  bool from_memory() const { return mem_ != nullptr; }
  uint64_t bytes_read() const { return bytes_read_; }
  size_t chunk() const { return chunk_; }

 private:
  static constexpr size_t kAlign = 4096;  // O_DIRECT: offset, length and buffer aligned to this
  void reopen_buffered() {
    close_fd();
    direct_ = false;
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_error("file ", path_, ": cannot open for streaming: ", std::strerror(errno));
  }
  void close_fd() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string path_;
  const uint8_t* mem_ = nullptr;
  size_t chunk_ = kStreamReadBytes;
  int fd_ = -1;
  bool direct_ = false;
  AnonymousMemory staging_;
  uint64_t bytes_read_ = 0;
};

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
inline void load_piece(WeightReader& rd, const StreamPiece& p, uint8_t* dst) {
  for (const ReadOp& op : piece_reads(p, 0, rd.chunk())) place_rows(p, op, rd.read(op.off, op.bytes), dst);
}

// The matrices one matmul call of forward() reads that are streamed; key says which call.
struct StreamUnit {
  int key = 0;
  std::vector<StreamPiece> pieces;
  size_t bytes = 0;       // in memory (sum of dst_bytes)
  uint64_t file_bytes = 0;  // read from storage
};

struct StreamStats {
  uint64_t bytes_read = 0;    // from storage by the stream since load
  uint64_t units_loaded = 0;
  double read_s = 0;          // reader thread: in pread
  double place_s = 0;         // placing thread: copying / repacking into the slots
  double wait_s = 0;          // compute: waiting for a unit that was not loaded yet
  bool direct_io = false;     // O_DIRECT reads (page cache bypassed)
};

// Read buffers between the reader and the placing thread: the reader runs up to this many reads
// ahead, so storage stays busy while a chunk is repacked.
inline constexpr int kStreamReadBuffers = 3;

// The ring of slots and its two threads. The reader thread preads the units' chunks in cycle order
// into kStreamReadBuffers buffers; the placing thread copies or repacks them into the unit's slot
// (sequence number mod n_slots) once that slot is released, so reads and repacking overlap. Units
// are loaded in list order, cyclically. acquire(key) returns the next unit of the cycle, which
// must be `key` (units a caller skipped, e.g. after an exception or a pass without logits, are
// waited for and released first). One consumer at a time (the model serializes forward passes of
// a streamed model), holding one unit at a time.
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
      if (s_) s_->release();
      s_ = nullptr;
    }

   private:
    WeightStream* s_ = nullptr;
    const std::vector<MatmulWeight>* views_ = nullptr;
    const StreamUnit* unit_ = nullptr;
  };

  WeightStream(WeightReader reader, std::vector<StreamUnit> units, int n_slots)
      : rd_(std::move(reader)), units_(std::move(units)), n_slots_(std::max(2, n_slots)) {
    EDGELLM_CHECK(!units_.empty(), "WeightStream: no units");
    for (const StreamUnit& u : units_) {
      EDGELLM_CHECK(u.key >= 0, "WeightStream: negative unit key");
      slot_bytes_ = std::max(slot_bytes_, u.bytes);
      if (size_t(u.key) >= streamed_key_.size()) streamed_key_.resize(size_t(u.key) + 1, 0);
      streamed_key_[size_t(u.key)] = 1;
      std::vector<ReadOp> ops;
      for (size_t i = 0; i < u.pieces.size(); ++i) {
        const std::vector<ReadOp> p = piece_reads(u.pieces[i], i, rd_.chunk());
        ops.insert(ops.end(), p.begin(), p.end());
      }
      EDGELLM_CHECK(!ops.empty(), "WeightStream: a unit without reads");
      ops_.push_back(std::move(ops));
    }
    slots_ = AnonymousMemory(slot_bytes_ * size_t(n_slots_));
    locked_ = ::mlock(slots_.data(), slots_.size()) == 0;
    buf_bytes_ = rd_.from_memory() ? 0 : WeightReader::staging_for(rd_.chunk());
    if (buf_bytes_) bufs_ = AnonymousMemory(buf_bytes_ * size_t(kStreamReadBuffers));
    errors_.resize(size_t(n_slots_));
    views_.resize(size_t(n_slots_));
    buf_src_.resize(size_t(kStreamReadBuffers));
    buf_err_.resize(size_t(kStreamReadBuffers));
    reader_ = std::thread([this] { reader_main(); });
    placer_ = std::thread([this] { placer_main(); });
  }
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;
  ~WeightStream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (reader_.joinable()) reader_.join();
    if (placer_.joinable()) placer_.join();
  }

  bool has(int key) const { return key >= 0 && size_t(key) < streamed_key_.size() && streamed_key_[size_t(key)]; }

  // Waits for unit `key` (the next one of the cycle after skipping others) and hands it out until
  // the lease is released. Rethrows an error the reader met (e.g. the file shrank): as an Error
  // naming the file.
  Lease acquire(int key) {
    EDGELLM_CHECK(has(key), "WeightStream: unit ", key, " is not streamed");
    std::unique_lock<std::mutex> lk(mu_);
    EDGELLM_CHECK(!leased_, "WeightStream: acquire while a unit is still held (release each lease first)");
    for (;;) {
      const StreamUnit& u = units_[size_t(consumed_ % units_.size())];
      const auto t0 = std::chrono::steady_clock::now();
      cv_.wait(lk, [&] { return filled_ > consumed_; });
      stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const size_t slot = size_t(consumed_ % uint64_t(n_slots_));
      if (errors_[slot]) {
        std::exception_ptr e = errors_[slot];
        errors_[slot] = nullptr;
        ++consumed_;
        cv_.notify_all();
        std::rethrow_exception(e);
      }
      if (u.key == key) {
        leased_ = true;
        return Lease(this, &views_[slot], &u);
      }
      ++consumed_;  // a unit this pass did not use: skip it
      cv_.notify_all();
    }
  }

  const std::vector<StreamUnit>& units() const { return units_; }
  int n_slots() const { return n_slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t ring_bytes() const { return slots_.size(); }
  size_t read_buffer_bytes() const { return bufs_.size(); }
  bool pinned() const { return locked_; }
  uint64_t streamed_bytes_per_cycle() const {
    uint64_t s = 0;
    for (const StreamUnit& u : units_) s += u.file_bytes;
    return s;
  }
  StreamStats stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    StreamStats s = stats_;
    s.direct_io = rd_.direct();
    return s;
  }
  // Serializes forward passes that use the stream (one consumer at a time).
  std::mutex& pass_mutex() { return pass_mu_; }

 private:
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++consumed_;
      leased_ = false;
    }
    cv_.notify_all();
  }

  // Reads every unit's chunks in cycle order, up to kStreamReadBuffers ahead of the placing thread.
  void reader_main() {
    size_t u = 0, i = 0;
    for (uint64_t k = 0;; ++k) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || k < ops_placed_ + uint64_t(kStreamReadBuffers); });
        if (stop_) return;
      }
      const ReadOp& op = ops_[u][i];
      const size_t b = size_t(k % uint64_t(kStreamReadBuffers));
      const uint8_t* src = nullptr;
      std::exception_ptr err;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        src = rd_.read_into(op.off, op.bytes, bufs_.data() + b * buf_bytes_);
      } catch (...) {
        err = std::current_exception();
      }
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      {
        std::lock_guard<std::mutex> lk(mu_);
        buf_src_[b] = src;
        buf_err_[b] = err;
        stats_.read_s += dt;
        if (!err) stats_.bytes_read += op.bytes;
        ops_read_ = k + 1;
      }
      cv_.notify_all();
      if (++i == ops_[u].size()) {
        i = 0;
        u = (u + 1) % units_.size();
      }
    }
  }

  // Fills slot after slot from the reader's buffers: copies or repacks each chunk into place.
  void placer_main() {
    uint64_t k = 0;  // next read to take
    for (uint64_t seq = 0;; ++seq) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || seq < consumed_ + uint64_t(n_slots_); });
        if (stop_) return;
      }
      const size_t ui = size_t(seq % units_.size());
      const StreamUnit& u = units_[ui];
      const size_t slot = size_t(seq % uint64_t(n_slots_));
      uint8_t* base = slots_.data() + slot * slot_bytes_;
      std::exception_ptr err;
      double dt = 0;
      for (const ReadOp& op : ops_[ui]) {
        const uint8_t* src;
        std::exception_ptr e;
        {
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait(lk, [&] { return stop_ || ops_read_ > k; });
          if (stop_) return;
          const size_t b = size_t(k % uint64_t(kStreamReadBuffers));
          src = buf_src_[b];
          e = buf_err_[b];
        }
        if (e && !err) err = e;
        if (!err) {
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const StreamPiece& p = u.pieces[op.piece];
            place_rows(p, op, src, base + p.dst_off);
          } catch (...) {
            err = std::current_exception();
          }
          dt += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        {
          std::lock_guard<std::mutex> lk(mu_);
          ops_placed_ = ++k;
        }
        cv_.notify_all();
      }
      std::vector<MatmulWeight> v;
      v.reserve(u.pieces.size());
      for (const StreamPiece& p : u.pieces) v.push_back(p.view(base));
      {
        std::lock_guard<std::mutex> lk(mu_);
        views_[slot] = std::move(v);
        errors_[slot] = err;
        stats_.place_s += dt;
        ++stats_.units_loaded;
        filled_ = seq + 1;
      }
      cv_.notify_all();
    }
  }

  WeightReader rd_;
  std::vector<StreamUnit> units_;
  std::vector<std::vector<ReadOp>> ops_;  // per unit: its reads in order
  std::vector<char> streamed_key_;        // [key] = 1 when a unit has that key
  int n_slots_;
  size_t slot_bytes_ = 0;
  AnonymousMemory slots_;
  bool locked_ = false;
  size_t buf_bytes_ = 0;
  AnonymousMemory bufs_;                          // kStreamReadBuffers read buffers
  std::vector<const uint8_t*> buf_src_;           // per buffer: where its read's bytes start
  std::vector<std::exception_ptr> buf_err_;       // per buffer: what its read threw
  std::vector<std::vector<MatmulWeight>> views_;  // per slot: its unit's pieces as matrices
  std::vector<std::exception_ptr> errors_;        // per slot: what loading it threw
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t filled_ = 0;      // units [0, filled_) of the cycle sequence are loaded
  uint64_t consumed_ = 0;    // units [0, consumed_) were used (or skipped) and their slots are free
  uint64_t ops_read_ = 0;    // reads [0, ops_read_) are in their buffers
  uint64_t ops_placed_ = 0;  // reads [0, ops_placed_) were placed and their buffers are free
  bool stop_ = false;
  bool leased_ = false;
  StreamStats stats_;
  std::mutex pass_mu_;
  std::thread reader_;
  std::thread placer_;
};

}  // namespace edgellm
