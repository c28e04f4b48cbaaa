// Memory: aligned heap buffers and a read-only memory-mapped file (with a plain-read fallback).
// POSIX only (Linux, musl, Android/OpenHarmony); no glibc-only calls.
#pragma once
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "edgellm/core/error.hpp"

namespace edgellm {

inline constexpr size_t kDefaultAlignment = 64;  // cache line; also enough for any SIMD load
inline constexpr size_t kPageAlignment = 4096;   // in-memory files: aligned as a mapping would be

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

// Zero-initialised, `align`-aligned block of bytes. Throws Error (not bad_alloc) when it cannot allocate.
inline std::unique_ptr<uint8_t, AlignedFree> aligned_bytes(size_t n, size_t align = kDefaultAlignment) {
  if (n > SIZE_MAX - align) throw_error("cannot allocate ", n, " bytes");
  const size_t rounded = (n + align - 1) / align * align;
  void* p = nullptr;
  if (posix_memalign(&p, align, rounded == 0 ? align : rounded) != 0 || p == nullptr)
    throw_error("out of memory allocating ", n, " bytes");
  std::memset(p, 0, rounded == 0 ? align : rounded);
  return std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(p));
}

// A read-only view of a whole file: mmap when possible, else read into memory. Movable, not copyable.
class MappedFile {
 public:
  enum class Mode { Auto, Mmap, Read };

  MappedFile() = default;
  explicit MappedFile(const std::string& path, Mode mode = Mode::Auto) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_error("file ", path, ": cannot open: ", std::strerror(errno));
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) throw_error("file ", path, ": cannot stat: ", std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw_error("file ", path, ": not a regular file");
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;
    if (mode != Mode::Read) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        mapped_ = true;
        return;
      }
      if (mode == Mode::Mmap) throw_error("file ", path, ": mmap failed: ", std::strerror(errno));
    }
    owned_ = aligned_bytes(size_, kPageAlignment);
    size_t got = 0;
    while (got < size_) {
      const ssize_t r = ::read(fd, owned_.get() + got, size_ - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) throw_error("file ", path, ": read failed after ", got, " of ", size_, " bytes");
      got += static_cast<size_t>(r);
    }
    data_ = owned_.get();
  }

  // Copies bytes already in memory (tests, in-memory models) into an aligned buffer it owns.
  static MappedFile from_bytes(const std::vector<uint8_t>& bytes, std::string name) {
    MappedFile f;
    f.path_ = std::move(name);
    f.size_ = bytes.size();
    f.owned_ = aligned_bytes(f.size_, kPageAlignment);
    if (f.size_) std::memcpy(f.owned_.get(), bytes.data(), f.size_);
    f.data_ = f.owned_.get();
    return f;
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      release();
      path_ = std::move(o.path_);
      owned_ = std::move(o.owned_);
      size_ = o.size_;
      mapped_ = o.mapped_;
      data_ = o.data_;
      o.data_ = nullptr;
      o.size_ = 0;
      o.mapped_ = false;
    }
    return *this;
  }
  ~MappedFile() { release(); }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool mapped() const { return mapped_; }
  const std::string& path() const { return path_; }

 private:
  void release() noexcept {
    if (mapped_ && data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    mapped_ = false;
  }

  std::string path_;
  std::unique_ptr<uint8_t, AlignedFree> owned_;  // the bytes when not mapped
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
};

// Anonymous read-write memory from mmap, page-aligned, zero-filled, for large long-lived buffers
// (load-time repacked weights). Asks for transparent huge pages where the kernel offers them
// (MADV_HUGEPAGE: fewer TLB misses when decode streams hundreds of MB per token) before any page
// is touched. Movable, not copyable. Throws Error when the mapping fails.
class AnonymousMemory {
 public:
  AnonymousMemory() = default;
  explicit AnonymousMemory(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw_error("out of memory mapping ", bytes, " bytes: ", std::strerror(errno));
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: ignoring a refusal is right
#endif
    data_ = static_cast<uint8_t*>(p);
  }
  AnonymousMemory(AnonymousMemory&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  AnonymousMemory& operator=(AnonymousMemory&& o) noexcept {
    if (this != &o) {
      release();
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;
  ~AnonymousMemory() { release(); }

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (data_) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The kernel's page size: 4 KiB on x86; 4, 16 or 64 KiB on arm64 kernels.
inline uintptr_t system_page_size() noexcept {
  const long ps = ::sysconf(_SC_PAGESIZE);
  return ps > 0 ? uintptr_t(ps) : uintptr_t(kPageAlignment);
}

// Drops the resident pages of [p, p + n) of a read-only file mapping (whole pages inside the range
// only). The data stays valid: a later read faults it back in from the file. Only for mappings.
inline void release_mapped_pages(const void* p, size_t n) noexcept {
  const uintptr_t page = system_page_size();
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

// Tells the kernel that [p, p + n) of a file mapping is read at random (one embedding row per
// token): no read-ahead. Advisory; errors are ignored. A fault may still map a whole page-cache
// folio, not just one page (docs/PERF.md, "Kernel constants").
inline void advise_random_access(const void* p, size_t n) noexcept {
  const uintptr_t page = system_page_size();
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_RANDOM);
}

}  // namespace edgellm
