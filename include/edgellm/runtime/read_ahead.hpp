// ReadAheadRing: a fixed cycle of jobs (each a list of byte ranges of one file) read from storage
// ahead of their consumer into a ring of slots, by two threads: a reader thread preads the ranges
// in cycle order into a few read buffers (FileReader: O_DIRECT where possible), and a placing
// thread hands each buffer to the caller's place function, which puts the bytes into the job's
// slot (copied, or transformed: the model's weight stream repacks matrices there), once the slot
// is free. So storage reads, placing and the consumer's work overlap, also across cycles. The
// consumer takes jobs in cycle order (next(), release()); one consumer at a time, holding one job
// at a time. The weight stream (model/weight_stream.hpp) says what the jobs and slots mean.
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/runtime/file_reader.hpp"

namespace edgellm {

// One storage read of a job: bytes [off, off + bytes) of the file (bytes <= the reader's chunk).
struct ReadRequest {
  uint64_t off = 0;
  size_t bytes = 0;
};

struct ReadAheadStats {
  uint64_t bytes_read = 0;   // from storage since the ring started
  uint64_t jobs_loaded = 0;  // jobs placed into their slots
  double read_s = 0;         // reader thread: in pread
  double place_s = 0;        // placing thread: in the place function
  double wait_s = 0;         // consumer: waiting for a job that was not loaded yet
  bool direct_io = false;    // O_DIRECT reads (page cache bypassed)
};

class ReadAheadRing {
 public:
  // Puts read `read` of job `job` (its bytes at src) into the job's slot memory `slot`.
  using PlaceFn = std::function<void(size_t job, size_t read, const uint8_t* src, uint8_t* slot)>;

  // jobs: the cycle (every job at least one read); slots of slot_bytes each, n_slots >= 2 of them
  // (mlock'ed when the process may); n_buffers read buffers between the two threads.
  ReadAheadRing(FileReader reader, std::vector<std::vector<ReadRequest>> jobs, size_t slot_bytes, int n_slots, int n_buffers,
                PlaceFn place)
      : rd_(std::move(reader)),
        jobs_(std::move(jobs)),
        place_(std::move(place)),
        n_slots_(std::max(2, n_slots)),
        n_bufs_(std::max(1, n_buffers)),
        slot_bytes_(slot_bytes) {
    EDGELLM_CHECK(!jobs_.empty(), "ReadAheadRing: no jobs");
    for (const auto& j : jobs_) EDGELLM_CHECK(!j.empty(), "ReadAheadRing: a job without reads");
    slots_ = AnonymousMemory(slot_bytes_ * size_t(n_slots_));
    locked_ = ::mlock(slots_.data(), slots_.size()) == 0;
    buf_bytes_ = rd_.from_memory() ? 0 : FileReader::staging_for(rd_.chunk());
    if (buf_bytes_) bufs_ = AnonymousMemory(buf_bytes_ * size_t(n_bufs_));
    errors_.resize(size_t(n_slots_));
    buf_src_.resize(size_t(n_bufs_));
    buf_err_.resize(size_t(n_bufs_));
    reader_ = std::thread([this] { reader_main(); });
    placer_ = std::thread([this] { placer_main(); });
  }
  ReadAheadRing(const ReadAheadRing&) = delete;
  ReadAheadRing& operator=(const ReadAheadRing&) = delete;
  ~ReadAheadRing() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (reader_.joinable()) reader_.join();
    if (placer_.joinable()) placer_.join();
  }

  // A job in its slot, held by the consumer until release().
  struct Held {
    size_t job = 0;
    size_t slot = 0;
    uint8_t* data = nullptr;
  };

  // Waits for the next job of the cycle and holds it. When reading or placing it threw, the job is
  // released and the error rethrown (the next call goes on with the job after it).
  Held next() {
    std::unique_lock<std::mutex> lk(mu_);
    EDGELLM_CHECK(!held_, "ReadAheadRing: next() while a job is still held (release it first)");
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lk, [&] { return filled_ > consumed_; });
    stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const size_t slot = size_t(consumed_ % uint64_t(n_slots_));
    if (errors_[slot]) {
      std::exception_ptr e = errors_[slot];
      errors_[slot] = nullptr;
      ++consumed_;
      lk.unlock();
      cv_.notify_all();
      std::rethrow_exception(e);
    }
    held_ = true;
    return Held{size_t(consumed_ % jobs_.size()), slot, slots_.data() + slot * slot_bytes_};
  }

  // Frees the held job's slot for the job n_slots further in the cycle.
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++consumed_;
      held_ = false;
    }
    cv_.notify_all();
  }

  size_t n_jobs() const { return jobs_.size(); }
  int n_slots() const { return n_slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  size_t ring_bytes() const { return slots_.size(); }
  size_t read_buffer_bytes() const { return bufs_.size(); }
  bool pinned() const { return locked_; }
  ReadAheadStats stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    ReadAheadStats s = stats_;
    s.direct_io = rd_.direct();
    return s;
  }

 private:
  // Reads every job's ranges in cycle order, up to n_bufs_ ahead of the placing thread.
  void reader_main() {
    size_t j = 0, i = 0;
    for (uint64_t k = 0;; ++k) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || k < ops_placed_ + uint64_t(n_bufs_); });
        if (stop_) return;
      }
      const ReadRequest& op = jobs_[j][i];
      const size_t b = size_t(k % uint64_t(n_bufs_));
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
        stats_.read_s += dt;
        if (!err) stats_.bytes_read += op.bytes;
        buf_err_[b] = std::exchange(err, nullptr);  // see errors_: no reference stays on this thread
        ops_read_ = k + 1;
      }
      cv_.notify_all();
      if (++i == jobs_[j].size()) {
        i = 0;
        j = (j + 1) % jobs_.size();
      }
    }
  }

  // Fills slot after slot from the reader's buffers through the place function.
  void placer_main() {
    uint64_t k = 0;  // next read to take
    for (uint64_t seq = 0;; ++seq) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || seq < consumed_ + uint64_t(n_slots_); });
        if (stop_) return;
      }
      const size_t job = size_t(seq % jobs_.size());
      uint8_t* base = slots_.data() + size_t(seq % uint64_t(n_slots_)) * slot_bytes_;
      std::exception_ptr err;
      double dt = 0;
      for (size_t r = 0; r < jobs_[job].size(); ++r) {
        const uint8_t* src;
        std::exception_ptr e;
        {
          std::unique_lock<std::mutex> lk(mu_);
          cv_.wait(lk, [&] { return stop_ || ops_read_ > k; });
          if (stop_) return;
          const size_t b = size_t(k % uint64_t(n_bufs_));
          src = buf_src_[b];
          e = std::exchange(buf_err_[b], nullptr);
        }
        if (e && !err) err = std::exchange(e, nullptr);
        if (!err) {
          const auto t0 = std::chrono::steady_clock::now();
          try {
            place_(job, r, src, base);
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
      {
        std::lock_guard<std::mutex> lk(mu_);
        errors_[size_t(seq % uint64_t(n_slots_))] = std::exchange(err, nullptr);
        stats_.place_s += dt;
        ++stats_.jobs_loaded;
        filled_ = seq + 1;
      }
      cv_.notify_all();
    }
  }

  FileReader rd_;
  std::vector<std::vector<ReadRequest>> jobs_;
  PlaceFn place_;
  int n_slots_;
  int n_bufs_;
  size_t slot_bytes_;
  AnonymousMemory slots_;
  bool locked_ = false;
  size_t buf_bytes_ = 0;
  AnonymousMemory bufs_;                     // n_bufs_ read buffers
  std::vector<const uint8_t*> buf_src_;      // per buffer: where its read's bytes start
  std::vector<std::exception_ptr> buf_err_;  // per buffer: what its read threw
  // per slot: what loading it threw. An exception object is handed on by moving its pointer under
  // mu_, so the thread that made it keeps no reference: the consumer frees it after reading it
  // (a worker's late release would free it with no order to the consumer's reads that a race
  // checker can see, since exception_ptr counts references inside the uninstrumented C++ runtime).
  std::vector<std::exception_ptr> errors_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t filled_ = 0;      // jobs [0, filled_) of the cycle sequence are placed
  uint64_t consumed_ = 0;    // jobs [0, consumed_) were used (or skipped) and their slots are free
  uint64_t ops_read_ = 0;    // reads [0, ops_read_) are in their buffers
  uint64_t ops_placed_ = 0;  // reads [0, ops_placed_) were placed and their buffers are free
  bool stop_ = false;
  bool held_ = false;
  ReadAheadStats stats_;
  std::thread reader_;
  std::thread placer_;
};

}  // namespace edgellm
