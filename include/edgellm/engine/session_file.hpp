// A session's state on storage (Session::save / restore): the tokens held and the KV cache blocks
// in use, with what they are only valid for — the model (its tensors' layout and the first bytes
// of each tensor's data), the KV storage type and block size, n_ctx — and a format version.
// Another model, KV type or version is refused naming what differs; a truncated or altered file
// (a checksum over everything) is an Error, never a crash (tests/fuzz/fuzz_session_file.cpp).
//
// Layout (little-endian, as the hosts edgellm runs on):
//   "EDGLSESS" | u32 version | fingerprint: u32 n_layer, n_kv_head, head_dim, n_vocab, n_ctx,
//   n_tensors, u64 tensors_hash | u32 kv_type, block_size, n_recent_f32 | u64 block_bytes |
//   u32 n_tokens, n_evicted | i32 tokens[n_tokens] | blocks [ceil(n_tokens / block_size)][block_bytes] |
//   u32 shadow_lo | f32 shadow [n_tokens - shadow_lo][n_layer][2][n_kv_head * head_dim] | u64 checksum
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"

namespace edgellm {

inline constexpr uint32_t kSessionFileVersion = 1;
inline constexpr char kSessionFileMagic[8] = {'E', 'D', 'G', 'L', 'S', 'E', 'S', 'S'};

// What a saved KV cache is valid for.
struct SessionFingerprint {
  uint32_t n_layer = 0, n_kv_head = 0, head_dim = 0, n_vocab = 0, n_ctx = 0, n_tensors = 0;
  uint64_t tensors_hash = 0;  // names, types, shapes, offsets and first bytes of every tensor
};

// A session's state: the fingerprint, the KV storage, the tokens and their K/V.
struct SessionSnapshot {
  SessionFingerprint fp;
  DType kv_type = DType::F32;
  uint32_t block_size = 0;
  uint32_t n_recent_f32 = 0;  // F32 copies of the last positions kept by the cache (0: none)
  uint64_t block_bytes = 0;
  std::vector<int32_t> tokens;
  uint32_t n_evicted = 0;
  std::vector<uint8_t> blocks;  // ceil(tokens / block_size) blocks of block_bytes
  uint32_t shadow_lo = 0;       // F32 copies of positions [shadow_lo, tokens.size())
  std::vector<float> shadow;    // [position][layer][K, V][kv_dim]

  uint64_t kv_dim() const { return static_cast<uint64_t>(fp.n_kv_head) * fp.head_dim; }
};

namespace session_file_detail {

// 64-bit hash of bytes (8 at a time, multiply and rotate; not cryptographic: it finds damage).
inline uint64_t hash_bytes(const uint8_t* p, size_t n, uint64_t h = 0x9E3779B97F4A7C15ull) {
  auto mix = [&h](uint64_t w) {
    h ^= w * 0xC2B2AE3D27D4EB4Full;
    h = (h << 31 | h >> 33) * 0x9E3779B97F4A7C15ull + 0x27D4EB2F165667C5ull;
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    mix(w);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  mix(tail ^ (static_cast<uint64_t>(n) << 56));
  return h ^ (h >> 29);
}

class Writer {
 public:
  std::vector<uint8_t> out;
  void bytes(const void* p, size_t n) { out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
  void u32(uint32_t x) { bytes(&x, 4); }
  void u64(uint64_t x) { bytes(&x, 8); }
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& name) : p_(p), n_(n), name_(name) {}
  size_t left() const { return n_ - at_; }
  const uint8_t* take(uint64_t n, const char* what) {
    if (n > left()) throw_error("session file ", name_, ": truncated (", what, " needs ", n, " bytes, ", left(), " left)");
    const uint8_t* p = p_ + at_;
    at_ += static_cast<size_t>(n);
    return p;
  }
  uint32_t u32(const char* what) {
    uint32_t x;
    std::memcpy(&x, take(4, what), 4);
    return x;
  }
  uint64_t u64(const char* what) {
    uint64_t x;
    std::memcpy(&x, take(8, what), 8);
    return x;
  }
  // n elements of `size` bytes, the count checked against what is left before anything is allocated.
  template <class T>
  void array(std::vector<T>& v, uint64_t n, const char* what) {
    if (n > left() / sizeof(T)) throw_error("session file ", name_, ": truncated (", what, ": ", n, " entries, ", left(), " bytes left)");
    v.resize(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), take(n * sizeof(T), what), static_cast<size_t>(n) * sizeof(T));
  }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
  const std::string& name_;
};

}  // namespace session_file_detail

// The fingerprint of a model file's tensors: names, types, shapes, offsets and the first 64 bytes
// of each tensor's data (two fine-tunes of one architecture share the layout, not the values).
inline uint64_t tensors_fingerprint(const GgufFile& f) {
  using session_file_detail::hash_bytes;
  uint64_t h = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    h = hash_bytes(reinterpret_cast<const uint8_t*>(t.name.data()), t.name.size(), h);
    const uint64_t fields[] = {static_cast<uint64_t>(t.type), t.n_dims, static_cast<uint64_t>(t.ne[0]), static_cast<uint64_t>(t.ne[1]),
                               static_cast<uint64_t>(t.ne[2]), static_cast<uint64_t>(t.ne[3]), t.offset, t.nbytes};
    h = hash_bytes(reinterpret_cast<const uint8_t*>(fields), sizeof fields, h);
    if (t.data) h = hash_bytes(t.data, static_cast<size_t>(t.nbytes < 64 ? t.nbytes : 64), h);
  }
  return h;
}

// What a state saved from `kv` at context n_ctx is valid for.
inline SessionFingerprint session_fingerprint(const LlamaModel& model, const PagedKvCache& kv, int n_ctx) {
  SessionFingerprint f;
  f.n_layer = static_cast<uint32_t>(kv.params().n_layer);
  f.n_kv_head = static_cast<uint32_t>(kv.params().n_kv_head);
  f.head_dim = static_cast<uint32_t>(kv.params().head_dim);
  f.n_vocab = static_cast<uint32_t>(model.config().n_vocab);
  f.n_ctx = static_cast<uint32_t>(n_ctx);
  f.n_tensors = static_cast<uint32_t>(model.file().tensors().size());
  f.tensors_hash = tensors_fingerprint(model.file());
  return f;
}

// Sequence `seq` of `kv` holding `tokens`: its KV blocks as stored and its F32 copies.
inline SessionSnapshot snapshot_sequence(const PagedKvCache& kv, int seq, const std::vector<int32_t>& tokens, const SessionFingerprint& fp) {
  EDGELLM_CHECK(static_cast<int>(tokens.size()) == kv.n_tokens(seq), "session: ", tokens.size(), " tokens for a sequence of ", kv.n_tokens(seq));
  SessionSnapshot s;
  s.fp = fp;
  s.kv_type = kv.type();
  s.block_size = static_cast<uint32_t>(kv.block_size());
  s.n_recent_f32 = static_cast<uint32_t>(kv.n_recent_f32());
  s.block_bytes = kv.block_bytes();
  s.tokens = tokens;
  s.n_evicted = static_cast<uint32_t>(kv.n_evicted(seq));
  const size_t n_blocks = kv.block_table(seq).size();
  s.blocks.resize(n_blocks * kv.block_bytes());
  for (size_t i = 0; i < n_blocks; ++i) std::memcpy(s.blocks.data() + i * kv.block_bytes(), kv.block_data(seq, i), kv.block_bytes());
  const int n = kv.n_tokens(seq);
  s.shadow_lo = static_cast<uint32_t>(kv.shadow_begin(seq));
  const size_t kvd = static_cast<size_t>(kv.kv_dim());
  for (int pos = static_cast<int>(s.shadow_lo); pos < n; ++pos)
    for (int l = 0; l < kv.params().n_layer; ++l)
      for (int part = 0; part < 2; ++part) {
        const float* row = kv.shadow_row(seq, l, part, pos);
        s.shadow.insert(s.shadow.end(), row, row + kvd);
      }
  return s;
}

inline std::vector<uint8_t> session_file_bytes(const SessionSnapshot& s) {
  session_file_detail::Writer w;
  w.bytes(kSessionFileMagic, sizeof kSessionFileMagic);
  w.u32(kSessionFileVersion);
  for (uint32_t x : {s.fp.n_layer, s.fp.n_kv_head, s.fp.head_dim, s.fp.n_vocab, s.fp.n_ctx, s.fp.n_tensors}) w.u32(x);
  w.u64(s.fp.tensors_hash);
  w.u32(static_cast<uint32_t>(s.kv_type));
  w.u32(s.block_size);
  w.u32(s.n_recent_f32);
  w.u64(s.block_bytes);
  w.u32(static_cast<uint32_t>(s.tokens.size()));
  w.u32(s.n_evicted);
  w.bytes(s.tokens.data(), s.tokens.size() * sizeof(int32_t));
  w.bytes(s.blocks.data(), s.blocks.size());
  w.u32(s.shadow_lo);
  w.bytes(s.shadow.data(), s.shadow.size() * sizeof(float));
  w.u64(session_file_detail::hash_bytes(w.out.data(), w.out.size()));
  return std::move(w.out);
}

// Parses and checks a session file's bytes (`name` for messages): magic, version, checksum, and
// the sizes of every part against each other. Throws Error naming what is wrong.
inline SessionSnapshot parse_session_file(const uint8_t* data, size_t size, const std::string& name) {
  using session_file_detail::Reader;
  Reader r(data, size, name);
  if (size < sizeof kSessionFileMagic || std::memcmp(r.take(sizeof kSessionFileMagic, "magic"), kSessionFileMagic, sizeof kSessionFileMagic) != 0)
    throw_error("session file ", name, ": not an edgellm session file");
  const uint32_t version = r.u32("version");
  if (version != kSessionFileVersion)
    throw_error("session file ", name, ": format version ", version, ", this build of edgellm reads version ", kSessionFileVersion);
  if (size < 8 + 4 + 8) throw_error("session file ", name, ": truncated");
  uint64_t sum;
  std::memcpy(&sum, data + size - 8, 8);
  if (session_file_detail::hash_bytes(data, size - 8) != sum)
    throw_error("session file ", name, ": corrupted or truncated (checksum mismatch)");
  Reader b(data, size - 8, name);
  b.take(12, "header");
  SessionSnapshot s;
  for (uint32_t* x : {&s.fp.n_layer, &s.fp.n_kv_head, &s.fp.head_dim, &s.fp.n_vocab, &s.fp.n_ctx, &s.fp.n_tensors}) *x = b.u32("fingerprint");
  s.fp.tensors_hash = b.u64("fingerprint");
  const uint32_t type = b.u32("KV type");
  s.kv_type = static_cast<DType>(type);
  if (s.kv_type != DType::F32 && s.kv_type != DType::F16 && s.kv_type != DType::Q8_0)
    throw_error("session file ", name, ": KV type ", type, " is not f32, f16 or q8_0");
  s.block_size = b.u32("block size");
  s.n_recent_f32 = b.u32("n_recent_f32");
  s.block_bytes = b.u64("block bytes");
  if (s.fp.n_layer == 0 || s.fp.n_kv_head == 0 || s.fp.head_dim == 0 || s.block_size == 0 || s.fp.head_dim > (1u << 16) ||
      s.fp.n_kv_head > (1u << 16) || s.fp.n_layer > (1u << 16) || s.block_size > 4096)
    throw_error("session file ", name, ": implausible shape (", s.fp.n_layer, " layers, ", s.fp.n_kv_head, " KV heads, head dim ",
                s.fp.head_dim, ", blocks of ", s.block_size, ")");
  if (s.kv_type == DType::Q8_0 && s.fp.head_dim % 32 != 0) throw_error("session file ", name, ": q8_0 KV with head dim ", s.fp.head_dim);
  const uint64_t expect_block = static_cast<uint64_t>(s.fp.n_layer) * 2 * s.fp.n_kv_head * s.block_size * dtype_row_bytes(s.kv_type, s.fp.head_dim);
  if (s.block_bytes != expect_block)
    throw_error("session file ", name, ": blocks of ", s.block_bytes, " bytes, the shape says ", expect_block);
  const uint32_t n_tokens = b.u32("token count");
  s.n_evicted = b.u32("evicted count");
  if (n_tokens > s.fp.n_ctx) throw_error("session file ", name, ": ", n_tokens, " tokens in a context of ", s.fp.n_ctx);
  b.array(s.tokens, n_tokens, "tokens");
  for (int32_t t : s.tokens)
    if (t < 0 || static_cast<uint32_t>(t) >= s.fp.n_vocab) throw_error("session file ", name, ": token id ", t, " not in the vocabulary of ", s.fp.n_vocab);
  const uint64_t n_blocks = (n_tokens + static_cast<uint64_t>(s.block_size) - 1) / s.block_size;
  if (n_blocks > 0 && s.block_bytes > b.left() / n_blocks) throw_error("session file ", name, ": truncated (KV blocks)");
  b.array(s.blocks, n_blocks * s.block_bytes, "KV blocks");
  s.shadow_lo = b.u32("shadow start");
  if (s.shadow_lo > n_tokens || (s.n_recent_f32 == 0 && s.shadow_lo != n_tokens) || n_tokens - s.shadow_lo > s.n_recent_f32)
    throw_error("session file ", name, ": F32 copies from position ", s.shadow_lo, " of ", n_tokens, " (", s.n_recent_f32, " kept)");
  const uint64_t per_pos = static_cast<uint64_t>(s.fp.n_layer) * 2 * s.kv_dim();
  if ((n_tokens - s.shadow_lo) > 0 && per_pos > b.left() / sizeof(float) / (n_tokens - s.shadow_lo))
    throw_error("session file ", name, ": truncated (F32 copies)");
  b.array(s.shadow, (n_tokens - s.shadow_lo) * per_pos, "F32 copies");
  if (b.left() != 0) throw_error("session file ", name, ": ", b.left(), " bytes after the end");
  return s;
}

// Throws unless a snapshot fits a session with fingerprint `fp`, KV type, block size and F32
// copies `n_recent_f32`; the message names what differs.
inline void check_session_compatible(const SessionSnapshot& s, const SessionFingerprint& fp, DType kv_type, uint32_t block_size,
                                     uint32_t n_recent_f32, const std::string& name) {
  const SessionFingerprint& f = s.fp;
  if (f.n_layer != fp.n_layer || f.n_kv_head != fp.n_kv_head || f.head_dim != fp.head_dim || f.n_vocab != fp.n_vocab ||
      f.n_tensors != fp.n_tensors || f.tensors_hash != fp.tensors_hash)
    throw_error("session file ", name, " was saved with another model (", f.n_layer, " layers, ", f.n_kv_head, "x", f.head_dim,
                " KV heads, vocab ", f.n_vocab, ", ", f.n_tensors, " tensors, fingerprint ", f.tensors_hash, "; this one: ",
                fp.n_layer, " layers, ", fp.n_kv_head, "x", fp.head_dim, ", vocab ", fp.n_vocab, ", ", fp.n_tensors,
                " tensors, fingerprint ", fp.tensors_hash, ")");
  if (s.kv_type != kv_type)
    throw_error("session file ", name, " holds a ", dtype_name(s.kv_type), " KV cache, this session's is ", dtype_name(kv_type),
                " (--kv-type)");
  if (f.n_ctx != fp.n_ctx) throw_error("session file ", name, " was saved with a context of ", f.n_ctx, ", this session's is ", fp.n_ctx, " (-c)");
  if (s.block_size != block_size)
    throw_error("session file ", name, " has KV blocks of ", s.block_size, " tokens, this session's are ", block_size);
  if (s.n_recent_f32 != n_recent_f32)
    throw_error("session file ", name, " keeps F32 copies of the last ", s.n_recent_f32, " positions, this session ", n_recent_f32,
                " (--kv-recent-f32)");
}

// Checks a snapshot against `kv` at context n_ctx of `model` (Error naming what differs) and loads
// it into sequence `seq`.
inline void restore_sequence(PagedKvCache& kv, int seq, const SessionSnapshot& s, const SessionFingerprint& fp, const std::string& name) {
  check_session_compatible(s, fp, kv.type(), static_cast<uint32_t>(kv.block_size()), static_cast<uint32_t>(kv.n_recent_f32()), name);
  kv.load_sequence(seq, static_cast<int>(s.tokens.size()), static_cast<int>(s.n_evicted), s.blocks.data(), static_cast<int>(s.shadow_lo),
                   s.shadow.data());
}

// Writes bytes so that `path` is either its old contents or the new ones, whatever happens:
// a temporary file next to it, flushed to storage (fsync), renamed over it, the folder synced.
inline void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_error("file ", path, ": cannot create ", tmp, " (", std::strerror(errno), ")");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t k = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw_error("file ", path, ": write failed (", std::strerror(e), ")");
    }
    done += static_cast<size_t>(k);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw_error("file ", path, ": write failed (", std::strerror(errno), ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_error("file ", path, ": cannot rename from ", tmp, " (", std::strerror(e), ")");
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {  // the rename itself on storage (best effort: some file systems refuse)
    ::fsync(dfd);
    ::close(dfd);
  }
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw_error("session file ", path, ": cannot open (", std::strerror(errno), ")");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  for (size_t k; (k = std::fread(buf, 1, sizeof buf, f)) > 0;) out.insert(out.end(), buf, buf + k);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw_error("session file ", path, ": read failed");
  return out;
}

}  // namespace edgellm
