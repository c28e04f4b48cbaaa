// Tests for runtime/timer.hpp and runtime/memory_stats.hpp: monotonic timing, /proc parsing,
// and RSS figures that follow a real allocation.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/timer.hpp"

#include "test_util.hpp"

namespace {
constexpr double kSleepMs = 30.0;
constexpr double kMaxSleepOvershootMs = 2000.0;  // loaded CI machines (2 shared cores, qemu)
constexpr uint64_t kTouchBytes = 64ull << 20;
constexpr uint64_t kMinRssGrowth = kTouchBytes / 2;  // pages may be reclaimed or shared
}  // namespace

TEST_CASE("timer: monotonic and measures a sleep") {
  const double t0 = edgellm::now_ms();
  edgellm::Timer timer;
  double last = timer.ms();
  CHECK(last >= 0.0);
  for (int i = 0; i < 1000; ++i) {
    const double t = timer.ms();
    CHECK(t >= last);
    last = t;
  }
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kSleepMs));
  const double ms = timer.ms();
  CHECK(ms >= kSleepMs);
  CHECK(ms < kSleepMs + kMaxSleepOvershootMs);
  CHECK(timer.seconds() * 1e3 >= ms);
  CHECK(edgellm::now_ms() - t0 >= kSleepMs);
  timer.reset();
  CHECK(timer.ms() < kSleepMs);
}

TEST_CASE("memory stats: parses /proc/self/status text") {
  const char* text =
      "Name:\tedgellm\nVmPeak:\t    3060 kB\nVmHWM:\t    1752 kB\nVmRSS:\t    1700 kB\n"
      "RssAnon:\t     112 kB\nRssFile:\t    1588 kB\nRssShmem:\t       0 kB\nVmSwap:\t0 kB";
  const edgellm::MemoryStats st = edgellm::parse_proc_status(text);
  CHECK(st.peak_rss_bytes == 1752u * 1024u);
  CHECK(st.rss_bytes == 1700u * 1024u);
  CHECK(st.rss_anon_bytes == 112u * 1024u);
  CHECK(st.rss_file_bytes == 1588u * 1024u);
  CHECK(st.rss_shmem_bytes == 0u);
  // Older kernels (no Rss* lines), garbage and empty input: zeros, no error.
  const edgellm::MemoryStats old = edgellm::parse_proc_status("VmRSS:\t 8 kB\nVmHWM: x kB\nRssAnon:\n");
  CHECK(old.rss_bytes == 8u * 1024u);
  CHECK(old.peak_rss_bytes == 0u);
  CHECK(old.rss_anon_bytes == 0u);
  CHECK(edgellm::parse_proc_status("").rss_bytes == 0u);
}

TEST_CASE("memory stats: follow an allocation of this process") {
  const edgellm::MemoryStats before = edgellm::memory_stats();
  if (before.rss_bytes == 0) EDGELLM_SKIP("/proc/self/status not available");
  CHECK(before.peak_rss_bytes >= before.rss_bytes);
  CHECK(before.rss_anon_bytes + before.rss_file_bytes + before.rss_shmem_bytes <= before.rss_bytes + 64 * 1024);
  std::vector<char> block(kTouchBytes);
  std::memset(block.data(), 1, block.size());  // make the pages resident
  const edgellm::MemoryStats after = edgellm::memory_stats();
  CHECK(after.rss_bytes >= before.rss_bytes + kMinRssGrowth);
  CHECK(after.rss_anon_bytes >= before.rss_anon_bytes + kMinRssGrowth);
  CHECK(after.peak_rss_bytes >= after.rss_bytes);
  CHECK(edgellm::peak_rss_bytes() >= before.rss_bytes + kMinRssGrowth);
  CHECK(edgellm::current_rss_bytes() > 0u);
  CHECK(block[kTouchBytes - 1] == 1);
}
