// Resident memory of this process from /proc/self/status (VmRSS, VmHWM, RssFile, RssAnon):
// plain stdio parsing, so it works the same on glibc and musl. Zeros where /proc is missing.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace edgellm {

// The whole text of a small file of /proc or /sys (at most ~1 MiB); "" when it cannot be read.
inline std::string read_small_file(const std::string& path) {
  std::string text;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (size_t(1) << 20)) text.append(buf, n);
  std::fclose(f);
  return text;
}

// Calls f(line) for each '\n'-separated line of text (without the newline).
template <class F>
inline void for_each_line(std::string_view text, F&& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    f(text.substr(pos, end - pos));
    pos = end + 1;
  }
}

struct MemoryStats {
  uint64_t rss_bytes = 0;        // VmRSS: resident now
  uint64_t peak_rss_bytes = 0;   // VmHWM: highest resident so far
  uint64_t rss_file_bytes = 0;   // RssFile: file-backed pages, e.g. the mmap'd model
  uint64_t rss_anon_bytes = 0;   // RssAnon: heap, stacks, KV cache
  uint64_t rss_shmem_bytes = 0;  // RssShmem
};

// Parses the text of a /proc/<pid>/status file; fields it lacks stay 0 (RssFile/RssAnon appeared
// in Linux 4.5).
inline MemoryStats parse_proc_status(std::string_view text) {
  MemoryStats st;
  struct Field {
    std::string_view key;
    uint64_t* dst;
  };
  const Field fields[] = {{"VmRSS:", &st.rss_bytes},
                          {"VmHWM:", &st.peak_rss_bytes},
                          {"RssFile:", &st.rss_file_bytes},
                          {"RssAnon:", &st.rss_anon_bytes},
                          {"RssShmem:", &st.rss_shmem_bytes}};
  for_each_line(text, [&](std::string_view line) {
    for (const Field& f : fields) {
      if (line.compare(0, f.key.size(), f.key) != 0) continue;
      // "VmRSS:\t   1752 kB": digits, then the unit (the kernel always writes kB).
      size_t i = f.key.size();
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      uint64_t v = 0;
      bool any = false;
      while (i < line.size() && line[i] >= '0' && line[i] <= '9' && v < (uint64_t(1) << 50)) {
        v = v * 10 + uint64_t(line[i++] - '0');
        any = true;
      }
      while (i < line.size() && line[i] == ' ') ++i;
      const std::string_view unit = line.substr(i);
      const uint64_t scale = unit.compare(0, 2, "kB") == 0 ? 1024 : 1;
      if (any) *f.dst = v * scale;
    }
  });
  return st;
}

// Current figures for this process; all zeros (not an error) where /proc/self/status cannot be read.
inline MemoryStats memory_stats() { return parse_proc_status(read_small_file("/proc/self/status")); }

// Bytes this process caused to be read from storage (read_bytes of /proc/self/io; 0 where the
// kernel does not account I/O). Reads served from the page cache are not counted.
inline uint64_t process_read_bytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (!f) return 0;
  char line[128];
  uint64_t v = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "read_bytes:", 11) == 0) v = std::strtoull(line + 11, nullptr, 10);
  std::fclose(f);
  return v;
}

inline uint64_t current_rss_bytes() { return memory_stats().rss_bytes; }
inline uint64_t peak_rss_bytes() { return memory_stats().peak_rss_bytes; }

}  // namespace edgellm
