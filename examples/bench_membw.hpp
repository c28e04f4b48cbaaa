// edgellm-bench --membw: the machine's read bandwidth (the roofline every row is compared with),
// peak-RSS reset between rows, and the main thread's CPU clock.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <time.h>
#include <vector>

#include <edgellm/core/memory.hpp>
#include <edgellm/runtime/thread_pool.hpp>
#include <edgellm/runtime/timer.hpp>

namespace bench {


// Resets VmHWM so each row's peak RSS is its own (Linux >= 4.0; ignored where unsupported).
void reset_peak_rss() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// Sum of the n words at p read as kStreams interleaved sequential streams, with or without software
// prefetch. The plain single stream is one flat loop (the one --membw used before the other
// patterns were added).
template <int kStreams, bool kPrefetch>
uint64_t read_words(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  auto add4 = [&](const uint64_t* q) {
    s0 += q[0];
    s1 += q[1];
    s2 += q[2];
    s3 += q[3];
  };
  if constexpr (kStreams == 1 && !kPrefetch) {
    for (size_t i = 0; i + 4 <= n; i += 4) add4(p + i);
  } else {
    constexpr size_t kLine = 64 / sizeof(uint64_t);  // words per cache line
    const size_t per = n / size_t(kStreams) / kLine * kLine;
    for (size_t i = 0; i < per; i += kLine)
      for (int k = 0; k < kStreams; ++k) {
        const uint64_t* q = p + size_t(k) * per + i;
        if constexpr (kPrefetch) {
          __builtin_prefetch(q + 4096 / sizeof(uint64_t), 0, 3);
          __builtin_prefetch(q + 16384 / sizeof(uint64_t), 0, 2);
        }
        for (size_t j = 0; j < kLine; j += 4) add4(q + j);
      }
  }
  return s0 + s1 + s2 + s3;
}

// The same plain single stream read a cache line per load where the target has wide vectors (one
// 64-byte load with AVX-512, four q-register loads on NEON): GCC/clang vector extension, so one
// source serves every target. On the x86 dev VM this is the fastest reader (2 threads: ~28.5 GB/s
// against ~26 for the 8-byte loads and the prefetched pattern), so --membw without it understated
// the roofline by ~8 %.
uint64_t read_lines(const uint64_t* p, size_t n) {
  typedef uint64_t Line __attribute__((vector_size(64)));
  Line a = {}, b = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Line x, y;
    std::memcpy(&x, p + i, sizeof x);  // p is line-aligned; memcpy keeps the aliasing rules
    std::memcpy(&y, p + i + 8, sizeof y);
    a += x;
    b += y;
  }
  a += b;
  uint64_t s = 0;
  for (int k = 0; k < 8; ++k) s += a[k];
  for (; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth in GB/s with the pool's threads, over a buffer far larger than the caches: the
// best pass of four read patterns, so that the roofline is what this machine can deliver to a
// reader and not what one loop shape gets from it. Each thread sums its own contiguous part as
// (plain) one sequential stream, (prefetched) the same with software prefetch 4 KiB ahead into L1
// and 16 KiB ahead into L2, as the packed GEMV kernels do, and (2 streams) the two halves of its
// part interleaved, prefetched likewise, and (line loads) one stream read a whole cache line per
// load (read_lines). On the dev VM the four read 25.2 / 25.4 / 26.1 / ~28.5 GB/s. The buffer is
// anonymous memory with huge pages where the kernel offers them (as the repacked weights are), so
// TLB misses do not understate what DRAM delivers.
struct MembwResult {
  double best = 0;
  double pattern[4] = {0, 0, 0, 0};  // plain, prefetched, 2 streams, line loads
};

MembwResult measure_membw(edgellm::ThreadPool& pool) {
  constexpr size_t kBytes = size_t(1) << 30;
  edgellm::AnonymousMemory mem(kBytes);
  auto* const buf = reinterpret_cast<uint64_t*>(mem.data());
  const size_t n_all = kBytes / sizeof(uint64_t);
  for (size_t i = 0; i < n_all; ++i) buf[i] = 1;
  std::vector<uint64_t> sink(static_cast<size_t>(pool.n_threads()) * 8, 0);
  MembwResult r;
  for (int round = 0; round < 3; ++round)
    for (int pattern = 0; pattern < 4; ++pattern) {
      const edgellm::Timer t;
      const int64_t n_chunks = pool.n_threads();
      pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1, int thread) {
        const size_t per = n_all / size_t(n_chunks);
        const uint64_t* p = buf + size_t(c0) * per;
        const size_t n = per * size_t(c1 - c0);
        sink[size_t(thread) * 8] += pattern == 0   ? read_words<1, false>(p, n)
                                    : pattern == 1 ? read_words<1, true>(p, n)
                                    : pattern == 2 ? read_words<2, true>(p, n)
                                                   : read_lines(p, n);
      });
      r.pattern[pattern] = std::max(r.pattern[pattern], double(kBytes) / t.seconds() / 1e9);
      r.best = std::max(r.best, r.pattern[pattern]);
    }
  uint64_t total = 0;
  for (uint64_t s : sink) total += s;
  if (total == 0) edgellm::throw_error("--membw: read nothing");  // keeps the sums alive
  return r;
}

// CPU time of the calling (main) thread. On a shared machine the wall-clock rate depends on what
// else runs; the main thread computes its share and spins while waiting for workers (up to the
// pool's spin budget), so tokens per main-thread CPU-second estimates the rate had the main thread
// never been preempted (worker preemption still counts; memory-bandwidth contention is not removed).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace bench
