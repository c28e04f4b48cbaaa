// bench_stream_read FILE [MODE] [--mib N] [--window-mib W]: reads N MiB of FILE front to back the
// ways a weight stream could (model/weight_stream.hpp), reading every byte as compute would, and
// prints MB/s. Run it under ../shared/tools/boardsim to see the rate and the peak memory each way
// gets under a memory cgroup and a throttled disk (docs/PERF.md "Larger than memory").
//   pread-direct    WeightReader: 4 MiB pread with O_DIRECT into a buffer, copied to a ring slot
//   pread-buffered  4 MiB pread through the page cache, POSIX_FADV_DONTNEED behind
//   mmap-window     the file mapped; MADV_WILLNEED on the next window ahead, the current one read
//                   in place, MADV_DONTNEED + POSIX_FADV_DONTNEED behind it
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <edgellm/core/error.hpp>
#include <edgellm/core/memory.hpp>
#include <edgellm/model/weight_stream.hpp>

namespace {

uint64_t sum_words(const uint8_t* p, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s += v;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::fprintf(stderr, "usage: bench_stream_read FILE [pread-direct|pread-buffered|mmap-window] [--mib N] [--window-mib W]\n");
      return 1;
    }
    const std::string path = argv[1];
    std::string mode = "pread-direct";
    size_t mib = 512, window_mib = 32;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--mib" && i + 1 < argc) mib = std::strtoull(argv[++i], nullptr, 10);
      else if (a == "--window-mib" && i + 1 < argc) window_mib = std::strtoull(argv[++i], nullptr, 10);
      else if (a[0] != '-') mode = a;
      else edgellm::throw_error("unknown option ", a);
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) edgellm::throw_error("file ", path, ": cannot stat");
    const size_t total = std::min(size_t(st.st_size), mib << 20);
    const size_t chunk = edgellm::kStreamReadBytes;
    uint64_t check = 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == "pread-direct" || mode == "pread-buffered") {
      edgellm::AnonymousMemory slot(chunk);
      if (mode == "pread-buffered") {
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        edgellm::AnonymousMemory buf(chunk);
        for (size_t off = 0; off < total; off += chunk) {
          const size_t n = std::min(chunk, total - off);
          size_t got = 0;
          while (got < n) {
            const ssize_t r = ::pread(fd, buf.data() + got, n - got, off_t(off + got));
            if (r <= 0) edgellm::throw_error("read failed");
            got += size_t(r);
          }
          ::posix_fadvise(fd, off_t(off), off_t(n), POSIX_FADV_DONTNEED);
          std::memcpy(slot.data(), buf.data(), n);
          check += sum_words(slot.data(), n);
        }
        ::close(fd);
      } else {
        edgellm::WeightReader rd(path, nullptr, chunk);
        if (!rd.direct()) std::fprintf(stderr, "note: O_DIRECT refused here; buffered reads\n");
        for (size_t off = 0; off < total; off += chunk) {
          const size_t n = std::min(chunk, total - off);
          std::memcpy(slot.data(), rd.read(off, n), n);
          check += sum_words(slot.data(), n);
        }
      }
    } else if (mode == "mmap-window") {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) edgellm::throw_error("file ", path, ": cannot open");
      void* m = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
      if (m == MAP_FAILED) edgellm::throw_error("mmap failed");
      const auto* base = static_cast<const uint8_t*>(m);
      const size_t w = window_mib << 20;
      ::madvise(m, std::min(w, total), MADV_WILLNEED);
      for (size_t off = 0; off < total; off += w) {
        const size_t n = std::min(w, total - off);
        if (off + n < total) ::madvise(const_cast<uint8_t*>(base) + off + n, std::min(w, total - off - n), MADV_WILLNEED);
        check += sum_words(base + off, n);
        ::madvise(const_cast<uint8_t*>(base) + off, n, MADV_DONTNEED);
        ::posix_fadvise(fd, off_t(off), off_t(n), POSIX_FADV_DONTNEED);
      }
      ::munmap(m, size_t(st.st_size));
      ::close(fd);
    } else {
      edgellm::throw_error("unknown mode ", mode);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu MiB in %.2f s = %.1f MB/s (checksum %llx)\n", mode.c_str(), total >> 20, s, double(total) / s / 1e6,
                static_cast<unsigned long long>(check));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
