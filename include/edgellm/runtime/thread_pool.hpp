// ThreadPool: created once, parallel_for splits [0, n) into one contiguous chunk per thread with the
// caller taking part; chunks go to whichever thread is free first. Workers spin briefly, then sleep on a condition variable. Standard library
// only (no OpenMP, no affinity calls).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"

namespace edgellm {

// Tells the core we are busy-waiting (lets the sibling hyper-thread run, saves power).
#if defined(__x86_64__) || defined(__i386__)
inline void cpu_relax() { __builtin_ia32_pause(); }
#elif defined(__aarch64__)
inline void cpu_relax() { asm volatile("yield" ::: "memory"); }
#else
inline void cpu_relax() {}
#endif

// Threads worth using by default: hardware_concurrency(), at least 1.
inline int default_thread_count() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

class ThreadPool {
 public:
  // n_threads includes the caller: 1 = no workers, everything runs on the calling thread.
  explicit ThreadPool(int n_threads) : n_threads_(n_threads) {
    EDGELLM_CHECK(n_threads >= 1 && n_threads <= 1024, "ThreadPool: n_threads must be in [1, 1024], got ",
                  n_threads);
    workers_.reserve(size_t(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_main(); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true, std::memory_order_release);
    }
    wake_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int n_threads() const { return n_threads_; }

  // Calls f(begin, end, thread) on contiguous chunks covering [0, n) in order, one per thread
  // (threads without work are skipped when n < n_threads); chunk 0 runs on the caller. Returns when
  // all chunks are done; the first exception thrown by any chunk is rethrown here. Calls from
  // several threads are serialised; a call from inside a task runs the whole range inline.
  // Chunks 1.. are claimed by whichever thread is free first (the caller included), and the call
  // does not wait for workers that have not started: on a shared machine a descheduled worker
  // costs one chunk's time, not a scheduler time slice. `thread` is the chunk index, so per-thread
  // scratch indexed by it is never used by two threads at once.
  template <class F>
  void parallel_for(int64_t n, F&& f) {
    if (n <= 0) return;
    using Fn = std::remove_reference_t<F>;
    if (n_threads_ == 1 || tls_inside_task() || n == 1) {
      f(int64_t(0), n, 0);
      return;
    }
    std::lock_guard<std::mutex> call_lock(call_mu_);
    task_.call = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); };
    task_.ctx = const_cast<void*>(static_cast<const void*>(&f));
    task_.n = n;
    error_ = nullptr;
    next_chunk_.store(1, std::memory_order_relaxed);
    closed_.store(false, std::memory_order_release);  // publishes the task to workers that see it open
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) wake_cv_.notify_all();
    run_chunk(0);
    claim_chunks();
    // Late workers see the task closed and leave it alone; wait for those already inside.
    closed_.store(true, std::memory_order_seq_cst);
    wait_done();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Task {
    void (*call)(void* ctx, int64_t begin, int64_t end, int thread) = nullptr;
    void* ctx = nullptr;
    int64_t n = 0;
  };

  // Spin budget before sleeping: long enough to bridge the short gaps between the matmuls of a
  // decode step, short enough not to steal a shared machine's cores for long.
  static constexpr auto kSpin = std::chrono::microseconds(200);

  static bool& tls_inside_task() {
    thread_local bool inside = false;
    return inside;
  }

  void run_chunk(int thread) {
    const int64_t n = task_.n;
    // Balanced split, the first n % n_threads chunks one longer: the caller's chunk is never empty.
    const int64_t q = n / n_threads_, rem = n % n_threads_;
    const int64_t begin = thread * q + std::min<int64_t>(thread, rem);
    const int64_t end = begin + q + (thread < rem ? 1 : 0);
    if (begin >= end) return;
    tls_inside_task() = true;
    try {
      task_.call(task_.ctx, begin, end, thread);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    tls_inside_task() = false;
  }

  void claim_chunks() {
    for (;;) {
      const int c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_threads_) return;
      run_chunk(c);
    }
  }

  void wait_done() {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; active_.load(std::memory_order_seq_cst) != 0; ++i) {
      if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) {  // the clock every 64 spins, as workers
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return active_.load(std::memory_order_seq_cst) == 0; });
        return;
      }
      cpu_relax();
    }
  }

  void worker_main() {
    uint64_t seen = 0;
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0;; ++i) {
        if (stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen) break;
        if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > kSpin) {
          std::unique_lock<std::mutex> lock(mu_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          wake_cv_.wait(lock, [&] {
            return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
          });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          break;
        }
        cpu_relax();
      }
      if (stop_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      // Announce first, then look: either the caller sees us active and waits, or we see the task
      // closed and touch nothing of it (seq_cst on both sides).
      active_.fetch_add(1, std::memory_order_seq_cst);
      if (!closed_.load(std::memory_order_seq_cst)) claim_chunks();
      if (active_.fetch_sub(1, std::memory_order_seq_cst) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's predicate check
        done_cv_.notify_one();
      }
    }
  }

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel_for at a time
  std::mutex mu_;       // guards sleeping on wake_cv_ / done_cv_
  std::condition_variable wake_cv_, done_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped once per parallel_for
  std::atomic<int> next_chunk_{0};       // next unclaimed chunk of the current task
  std::atomic<int> active_{0};           // workers inside the current task
  std::atomic<int> sleepers_{0};         // workers waiting on wake_cv_
  std::atomic<bool> closed_{true};       // the current task takes no new workers
  std::atomic<bool> stop_{false};
  Task task_;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

}  // namespace edgellm
