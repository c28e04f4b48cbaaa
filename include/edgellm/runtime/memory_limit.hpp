// How much memory this process may really use: the smaller of MemAvailable (/proc/meminfo) and the
// memory limit of the cgroup it runs in (v1 memory.limit_in_bytes or v2 memory.max, the smallest
// along the path to the root), for the default weight-residency budget (LoadOptions::mem_budget).
// Plain stdio on /proc and /sys: glibc, musl and OpenHarmony alike; every failure means "unknown".
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/runtime/memory_stats.hpp"

namespace edgellm {

// Kept back from the detected limit for what is not planned: the program's own code and heap,
// thread stacks, page cache of the file's metadata and of the embedding rows read through the
// mapping. max(kMemLimitMarginBytes, limit / kMemLimitMarginDivisor); half of a limit below twice
// that. (Measured: a streamed model peaks 7-11 MiB above its budget as the cgroup counts it.)
inline constexpr uint64_t kMemLimitMarginBytes = uint64_t(24) << 20;
inline constexpr uint64_t kMemLimitMarginDivisor = 20;

// "Key:  123 kB" of a /proc/meminfo text, in bytes; 0 when absent.
inline uint64_t parse_meminfo_field(std::string_view text, std::string_view key) {
  uint64_t out = 0;
  bool found = false;
  for_each_line(text, [&](std::string_view line) {
    if (found || line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != ':') return;
    found = true;
    size_t i = key.size() + 1;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    uint64_t v = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && v < (uint64_t(1) << 50))
      v = v * 10 + uint64_t(line[i++] - '0');
    while (i < line.size() && line[i] == ' ') ++i;
    out = line.compare(i, 2, "kB") == 0 ? v * 1024 : v;
  });
  return out;
}

// A cgroup limit file's value: a byte count, or 0 for "max" / absent / unreadable / no limit
// (cgroup v1 writes a huge page-rounded number for "none": anything >= 2^60 is treated as none).
inline uint64_t parse_cgroup_limit(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\n')) ++i;
  uint64_t v = 0;
  bool any = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (v >= (uint64_t(1) << 60)) return 0;
    v = v * 10 + uint64_t(text[i++] - '0');
    any = true;
  }
  return any && v < (uint64_t(1) << 60) ? v : 0;
}

// The cgroup paths of /proc/self/cgroup: the v1 memory controller's ("4:memory:/a/b") and the v2
// unified one ("0::/a/b"); empty when not listed.
struct CgroupPaths {
  std::string v1_memory, v2;
};
inline CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths p;
  for_each_line(text, [&](std::string_view line) {
    const size_t a = line.find(':');
    const size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) return;
    const std::string_view ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && ctl.empty()) {
      p.v2 = std::string(path);
      return;
    }
    for (size_t s = 0; s <= ctl.size();) {  // "cpu,memory" lists several controllers
      size_t e = ctl.find(',', s);
      if (e == std::string_view::npos) e = ctl.size();
      if (ctl.substr(s, e - s) == "memory") p.v1_memory = std::string(path);
      s = e + 1;
    }
  });
  return p;
}

// Smallest limit in `file` of the directories from root + path up to root (0 = none found).
inline uint64_t smallest_cgroup_limit(const std::string& root, std::string path, const char* file) {
  uint64_t best = 0;
  for (;;) {
    const uint64_t v = parse_cgroup_limit(read_small_file(root + path + (path.empty() || path.back() != '/' ? "/" : "") + file));
    if (v && (!best || v < best)) best = v;
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == std::string::npos || slash == 0 ? std::string("/") : path.substr(0, slash);
  }
  return best;
}

// The memory limit of this process's cgroup, bytes; 0 when there is none or it cannot be read.
inline uint64_t cgroup_memory_limit_bytes() {
  const CgroupPaths p = parse_proc_cgroup(read_small_file("/proc/self/cgroup"));
  uint64_t best = 0;
  auto take = [&](uint64_t v) {
    if (v && (!best || v < best)) best = v;
  };
  if (!p.v1_memory.empty()) take(smallest_cgroup_limit("/sys/fs/cgroup/memory", p.v1_memory, "memory.limit_in_bytes"));
  if (!p.v2.empty()) {
    take(smallest_cgroup_limit("/sys/fs/cgroup", p.v2, "memory.max"));
    take(smallest_cgroup_limit("/sys/fs/cgroup/unified", p.v2, "memory.max"));  // hybrid layout
  }
  return best;
}

struct MemoryLimit {
  uint64_t mem_available = 0;  // MemAvailable of /proc/meminfo (0: unknown)
  uint64_t cgroup_limit = 0;   // the cgroup's limit (0: none)
  uint64_t usable = 0;         // min of the known ones (0: nothing known)
  uint64_t margin = 0;         // kept back from usable
  uint64_t budget = 0;         // usable - margin (0: nothing known)
};

inline MemoryLimit detect_memory_limit() {
  MemoryLimit m;
  m.mem_available = parse_meminfo_field(read_small_file("/proc/meminfo"), "MemAvailable");
  m.cgroup_limit = cgroup_memory_limit_bytes();
  m.usable = m.mem_available;
  if (m.cgroup_limit && (!m.usable || m.cgroup_limit < m.usable)) m.usable = m.cgroup_limit;
  m.margin = std::max(kMemLimitMarginBytes, m.usable / kMemLimitMarginDivisor);
  m.budget = m.usable > 2 * m.margin ? m.usable - m.margin : m.usable / 2;
  return m;
}

}  // namespace edgellm
