// Reading byte ranges of a large file (a model's weights) without filling the page cache:
// FileReader (pread with O_DIRECT where the file system allows it, else buffered pread and
// POSIX_FADV_DONTNEED of what was read), and drop_cached_range() for ranges read through a
// mapping. The model layer's weight stream (model/weight_stream.hpp) and its resident-matrix load
// read through these; the read-ahead threads are runtime/read_ahead.hpp.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"

namespace edgellm {

// O_DIRECT: offset, length and buffer aligned to this.
inline constexpr size_t kDirectIoAlign = 4096;

// Reads byte ranges of a file into memory: pread with O_DIRECT when the file system allows it (the
// page cache is not filled, so reads count only once against a memory limit), else plain pread
// followed by POSIX_FADV_DONTNEED of the range. A file that is already in memory (a GGUF made in
// memory, or read because it could not be mapped) is copied from.
class FileReader {
 public:
  FileReader() = default;
  // mem_base: the file's bytes when it is in memory (then nothing is opened). chunk: most bytes
  // per read (a whole number of O_DIRECT blocks is added around it).
  FileReader(std::string path, const uint8_t* mem_base, size_t chunk) : path_(std::move(path)), mem_(mem_base), chunk_(chunk) {
    if (mem_) return;
#ifdef O_DIRECT
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    direct_ = fd_ >= 0;
#endif
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_error("file ", path_, ": cannot open for streaming: ", std::strerror(errno));
  }
  FileReader(FileReader&& o) noexcept { *this = std::move(o); }
  FileReader& operator=(FileReader&& o) noexcept {
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
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  ~FileReader() { close_fd(); }

  // Bytes of the read buffer a reader of `chunk`-byte reads holds.
  static size_t staging_for(size_t chunk) {
    return (chunk + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign + 2 * kDirectIoAlign;
  }

  // Bytes [off, off + n) of the file, n <= chunk(); valid until the next call.
  const uint8_t* read(uint64_t off, size_t n) {
    if (!mem_ && staging_.size() == 0) staging_ = AnonymousMemory(staging_for(chunk_));  // on first use
    return read_into(off, n, staging_.data());
  }

  // The same into buf (staging_for(chunk()) bytes, kDirectIoAlign-aligned); returns where the bytes
  // start in it (or in the in-memory file).
  const uint8_t* read_into(uint64_t off, size_t n, uint8_t* buf) {
    EDGELLM_CHECK(n <= chunk_, "FileReader: read of ", n, " bytes exceeds the ", chunk_, "-byte read buffer");
    bytes_read_ += n;
    if (mem_) return mem_ + off;
    const uint64_t a0 = off / kDirectIoAlign * kDirectIoAlign;
    const size_t skip = size_t(off - a0), len = (skip + n + kDirectIoAlign - 1) / kDirectIoAlign * kDirectIoAlign;
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
  const std::string& path() const { return path_; }

 private:
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
  size_t chunk_ = 0;
  int fd_ = -1;
  bool direct_ = false;
  AnonymousMemory staging_;
  uint64_t bytes_read_ = 0;
};

// Drops the page cache behind byte ranges of a file (after their contents were copied elsewhere:
// a memory cgroup counts cached pages until reclaim). Advice only: a file that cannot be opened
// or a refusal changes nothing.
class PageCacheDropper {
 public:
  explicit PageCacheDropper(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  PageCacheDropper(const PageCacheDropper&) = delete;
  PageCacheDropper& operator=(const PageCacheDropper&) = delete;
  ~PageCacheDropper() {
    if (fd_ >= 0) ::close(fd_);
  }
  void drop(uint64_t off, size_t n) const {
#ifdef POSIX_FADV_DONTNEED
    if (fd_ >= 0) ::posix_fadvise(fd_, off_t(off), off_t(n), POSIX_FADV_DONTNEED);
#else
    (void)off;
    (void)n;
#endif
  }

 private:
  int fd_ = -1;
};

}  // namespace edgellm
