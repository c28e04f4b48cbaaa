// ThreadPool: chunks cover [0, n) exactly once, the caller takes part, exceptions reach the caller,
// repeated and nested calls work, destruction is clean.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "edgellm/runtime/thread_pool.hpp"

using namespace edgellm;

TEST_CASE("default_thread_count is at least 1") { CHECK(default_thread_count() >= 1); }

TEST_CASE("constructor rejects a bad thread count") {
  CHECK_THROWS_AS(ThreadPool(0), Error);
  CHECK_THROWS_AS(ThreadPool(-3), Error);
}

TEST_CASE("parallel_for covers every index exactly once with contiguous chunks") {
  for (int nt : {1, 2, 3, 4}) {
    ThreadPool pool(nt);
    CHECK(pool.n_threads() == nt);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_t(5), int64_t(1000), int64_t(4097)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> bad_thread{false};
      std::atomic<bool> caller_ran{false};
      const auto caller = std::this_thread::get_id();
      std::vector<int64_t> begins(static_cast<size_t>(nt), -1), ends(static_cast<size_t>(nt), -1);
      pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
        if (t < 0 || t >= nt || b >= e) bad_thread = true;
        else begins[size_t(t)] = b, ends[size_t(t)] = e;
        if (t == 0) caller_ran = (std::this_thread::get_id() == caller);
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) CHECK(hits[size_t(i)].load() == 1);
      CHECK_FALSE(bad_thread.load());
      if (n > 0) CHECK(caller_ran.load());
      int64_t next = 0;  // chunks are in thread order and contiguous
      for (int t = 0; t < nt; ++t) {
        if (begins[size_t(t)] < 0) continue;
        CHECK(begins[size_t(t)] == next);
        next = ends[size_t(t)];
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("many short tasks in a row") {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep)
    pool.parallel_for(8, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  CHECK(sum.load() == 2000 * 28);
}

TEST_CASE("an exception in a task reaches the caller and the pool stays usable") {
  ThreadPool pool(3);
  CHECK_THROWS_AS(pool.parallel_for(30,
                                    [&](int64_t b, int64_t, int) {
                                      if (b >= 10) throw std::runtime_error("boom");
                                    }),
                  std::runtime_error);
  CHECK_THROWS_AS(pool.parallel_for(30, [&](int64_t, int64_t, int t) {
                    if (t == 0) throw Error("caller chunk");
                  }),
                  Error);
  std::atomic<int> count{0};
  pool.parallel_for(30, [&](int64_t b, int64_t e, int) { count += int(e - b); });
  CHECK(count.load() == 30);
}

TEST_CASE("a parallel_for inside a task runs inline") {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) pool.parallel_for(10, [&](int64_t b2, int64_t e2, int) { inner += int(e2 - b2); });
  });
  CHECK(inner.load() == 40);
}

TEST_CASE("calls from two threads are serialised") {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 500; ++rep)
      pool.parallel_for(16, [&](int64_t b, int64_t e, int) { total += e - b; });
  };
  std::thread other(work);
  work();
  other.join();
  CHECK(total.load() == 2 * 500 * 16);
}

TEST_CASE("pools can be created and destroyed repeatedly, idle or busy") {
  std::atomic<int> done{0};
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    if (i % 2) pool.parallel_for(100, [&](int64_t b, int64_t e, int) { done += int(e - b); });
  }
  CHECK(done.load() == 25 * 100);
}
