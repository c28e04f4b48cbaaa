// GGUF v2/v3 reader: the file is memory-mapped and tensors are zero-copy views into it. Every
// count, length, offset, alignment and shape is validated against the file size with overflow-safe
// arithmetic before use; a bad file throws Error naming the file and what is wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/memory.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/metadata.hpp"

namespace edgellm {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  uint32_t n_dims = 0;
  int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ne[0] = row length; unused dims are 1
  uint64_t offset = 0;                      // from the start of the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;            // into the mapping

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  Shape shape() const {
    Shape s;
    s.n_dims = n_dims == 0 ? 1 : static_cast<int>(n_dims);
    for (uint32_t i = 0; i < kGgufMaxDims; ++i) s.ne[i] = ne[i];
    return s;
  }
  TensorView view() const { return TensorView(type, data, shape()); }
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  // Opens and validates a file (memory-mapped; plain read when mmap is not possible).
  static GgufFile open(const std::string& path, MappedFile::Mode mode = MappedFile::Mode::Auto) {
    return GgufFile(MappedFile(path, mode));
  }
  // Parses bytes in memory (tests, in-memory synthetic models); `name` is used in messages.
  static GgufFile from_bytes(const std::vector<uint8_t>& bytes, const std::string& name = "<memory>") {
    return GgufFile(MappedFile::from_bytes(bytes, name));
  }

  explicit GgufFile(MappedFile file) : file_(std::move(file)) { parse(); }
  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

  const std::string& path() const { return file_.path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return file_.size(); }
  bool mapped() const { return file_.mapped(); }
  // First byte of the file in memory (tensor data pointers minus this = their file offsets).
  const uint8_t* base() const { return file_.data(); }

  // ---- metadata ----
  const std::vector<GgufKV>& metadata() const { return kv_; }
  const GgufValue* find(const std::string& key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  std::string get_string(const std::string& key) const { return need(key, GgufType::STRING, "string").str; }
  int64_t get_int(const std::string& key) const {
    const GgufValue& v = need_any(key);
    if (!v.is_int()) type_error(key, "integer", v);
    bool ok = true;
    const int64_t r = gguf_read_int(v.type, v.raw, &ok);
    if (!ok) throw_error(where(), "key '", key, "': value does not fit int64");
    return r;
  }
  double get_float(const std::string& key) const {
    const GgufValue& v = need_any(key);
    if (!v.is_float()) type_error(key, "float32 or float64", v);
    return gguf_read_float(v.type, v.raw);
  }
  bool get_bool(const std::string& key) const { return need(key, GgufType::BOOL, "bool").raw[0] != 0; }

  std::string get_string_or(const std::string& key, const std::string& def) const {
    return has(key) ? get_string(key) : def;
  }
  int64_t get_int_or(const std::string& key, int64_t def) const { return has(key) ? get_int(key) : def; }
  double get_float_or(const std::string& key, double def) const { return has(key) ? get_float(key) : def; }
  bool get_bool_or(const std::string& key, bool def) const { return has(key) ? get_bool(key) : def; }

  uint64_t array_size(const std::string& key) const { return need(key, GgufType::ARRAY, "array").arr_n; }
  const std::vector<std::string>& get_string_array(const std::string& key) const {
    const GgufValue& v = need(key, GgufType::ARRAY, "array[string]");
    if (v.arr_type != GgufType::STRING) type_error(key, "array[string]", v);
    return v.arr_str;
  }
  std::vector<int64_t> get_int_array(const std::string& key) const {
    const GgufValue& v = need(key, GgufType::ARRAY, "array[integer]");
    if (!gguf_type_is_int(v.arr_type)) type_error(key, "array[integer]", v);
    std::vector<int64_t> out(static_cast<size_t>(v.arr_n));
    const size_t es = gguf_type_size(v.arr_type);
    for (size_t i = 0; i < out.size(); ++i) {
      bool ok = true;
      out[i] = gguf_read_int(v.arr_type, v.arr_data + i * es, &ok);
      if (!ok) throw_error(where(), "key '", key, "': element ", i, " does not fit int64");
    }
    return out;
  }
  std::vector<float> get_float_array(const std::string& key) const {
    const GgufValue& v = need(key, GgufType::ARRAY, "array[float]");
    if (!gguf_type_is_float(v.arr_type)) type_error(key, "array[float32]", v);
    std::vector<float> out(static_cast<size_t>(v.arr_n));
    const size_t es = gguf_type_size(v.arr_type);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(gguf_read_float(v.arr_type, v.arr_data + i * es));
    return out;
  }

  // ---- tensors ----
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
  }
  const GgufTensorInfo& tensor(const std::string& name) const {
    const GgufTensorInfo* t = find_tensor(name);
    if (!t) throw_error(where(), "tensor '", name, "' not found");
    return *t;
  }

 private:
  std::string where() const { return "file " + file_.path() + ": "; }

  [[noreturn]] void type_error(const std::string& key, const char* expected, const GgufValue& v) const {
    throw_error(where(), "key '", key, "': expected ", expected, ", got ", v.type_string());
  }
  const GgufValue& need_any(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) throw_error(where(), "key '", key, "' not found");
    return *v;
  }
  const GgufValue& need(const std::string& key, GgufType t, const char* expected) const {
    const GgufValue& v = need_any(key);
    if (v.type != t) type_error(key, expected, v);
    return v;
  }

  // ---- parsing: a bounds-checked cursor over the file ----
  struct Cursor {
    const uint8_t* base;
    size_t size;
    size_t pos;
    const std::string* path;

    size_t remaining() const { return size - pos; }
    [[noreturn]] void fail(const std::string& what) const {
      throw_error("file ", *path, ": ", what, " (at byte ", pos, " of ", size, ")");
    }
    void need(size_t n, const char* what) const {
      if (n > remaining()) fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes");
    }
    template <class T>
    T read(const char* what) {
      need(sizeof(T), what);
      T v;
      std::memcpy(&v, base + pos, sizeof(T));
      pos += sizeof(T);
      return v;
    }
    std::string read_string(const char* what) {
      const uint64_t n = read<uint64_t>(what);
      if (n > remaining()) fail(std::string(what) + ": string length " + std::to_string(n) + " exceeds the file");
      std::string s(reinterpret_cast<const char*>(base + pos), static_cast<size_t>(n));
      pos += static_cast<size_t>(n);
      return s;
    }
  };

  void read_value(Cursor& c, GgufType type, GgufValue& v, const std::string& key) {
    v.type = type;
    if (type == GgufType::STRING) {
      v.str = c.read_string("string value");
      return;
    }
    if (type == GgufType::ARRAY) {
      const uint32_t et = c.read<uint32_t>("array type");
      if (et >= kGgufTypeCount) c.fail("key '" + key + "': invalid array element type " + std::to_string(et));
      v.arr_type = static_cast<GgufType>(et);
      if (v.arr_type == GgufType::ARRAY) c.fail("key '" + key + "': nested arrays are not supported");
      v.arr_n = c.read<uint64_t>("array length");
      if (v.arr_type == GgufType::STRING) {
        // Each string takes at least its 8-byte length: bound the count before allocating.
        if (v.arr_n > c.remaining() / 8)
          c.fail("key '" + key + "': array of " + std::to_string(v.arr_n) + " strings exceeds the file");
        v.arr_str.reserve(static_cast<size_t>(v.arr_n));
        for (uint64_t i = 0; i < v.arr_n; ++i) v.arr_str.push_back(c.read_string("array string"));
      } else {
        const size_t es = gguf_type_size(v.arr_type);
        if (v.arr_n > c.remaining() / es)
          c.fail("key '" + key + "': array of " + std::to_string(v.arr_n) + " " + gguf_type_name(v.arr_type) +
                 " exceeds the file");
        v.arr_data = c.base + c.pos;
        c.pos += static_cast<size_t>(v.arr_n) * es;
      }
      return;
    }
    const size_t es = gguf_type_size(type);
    c.need(es, "scalar value");
    std::memcpy(v.raw, c.base + c.pos, es);
    c.pos += es;
  }

  void parse() {
    Cursor c{file_.data(), file_.size(), 0, &file_.path()};
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kGgufMagic) c.fail("not a GGUF file (bad magic)");
    version_ = c.read<uint32_t>("version");
    if (version_ == 1) c.fail("GGUF version 1 is not supported (only 2 and 3)");
    if ((version_ & 0xFFFFu) == 0 && version_ != 0) c.fail("big-endian GGUF files are not supported");
    if (version_ != 2 && version_ != 3) c.fail("unsupported GGUF version " + std::to_string(version_));
    const uint64_t n_tensors = c.read<uint64_t>("tensor count");
    const uint64_t n_kv = c.read<uint64_t>("metadata count");
    // A KV takes >= 13 bytes (key length, type, 1-byte value); a tensor info >= 28 bytes.
    if (n_kv > c.remaining() / 13) c.fail("metadata count " + std::to_string(n_kv) + " exceeds the file");
    if (n_tensors > c.remaining() / 28) c.fail("tensor count " + std::to_string(n_tensors) + " exceeds the file");

    kv_.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
      GgufKV kv;
      kv.key = c.read_string("metadata key");
      if (kv.key.empty()) c.fail("metadata key " + std::to_string(i) + " is empty");
      const uint32_t t = c.read<uint32_t>("value type");
      if (t >= kGgufTypeCount) c.fail("key '" + kv.key + "': invalid value type " + std::to_string(t));
      read_value(c, static_cast<GgufType>(t), kv.value, kv.key);
      if (!kv_index_.emplace(kv.key, kv_.size()).second) c.fail("duplicate metadata key '" + kv.key + "'");
      kv_.push_back(std::move(kv));
    }

    alignment_ = kGgufDefaultAlignment;
    if (const GgufValue* a = find("general.alignment")) {
      if (a->type != GgufType::UINT32) type_error("general.alignment", "uint32", *a);
      uint32_t al;
      std::memcpy(&al, a->raw, 4);
      if (al == 0 || (al & (al - 1)) != 0)
        c.fail("general.alignment " + std::to_string(al) + " is not a power of two");
      alignment_ = al;
    }

    tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) tensors_.push_back(read_tensor_info(c));

    // The data section starts at the next multiple of the alignment.
    const uint64_t pad = (alignment_ - c.pos % alignment_) % alignment_;
    data_offset_ = c.pos + pad;
    if (n_tensors > 0 && data_offset_ > file_.size()) c.fail("data section starts past the end of the file");
    for (auto& t : tensors_) {
      if (t.offset % alignment_ != 0)
        throw_error(where(), "tensor '", t.name, "': offset ", t.offset, " is not a multiple of the alignment ",
                    alignment_);
      const uint64_t avail = file_.size() - data_offset_;
      if (t.offset > avail || t.nbytes > avail - t.offset)
        throw_error(where(), "tensor '", t.name, "': data [", t.offset, ", +", t.nbytes,
                    ") lies outside the file's data section of ", avail, " bytes");
      t.data = file_.data() + data_offset_ + t.offset;
    }
  }

  GgufTensorInfo read_tensor_info(Cursor& c) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor name");
    const std::string tn = "tensor '" + t.name + "': ";
    if (t.name.empty()) c.fail("tensor with an empty name");
    t.n_dims = c.read<uint32_t>("tensor n_dims");
    if (t.n_dims == 0 || t.n_dims > kGgufMaxDims)
      c.fail(tn + "n_dims " + std::to_string(t.n_dims) + " not in 1..4");
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>("tensor dim");
      if (n > static_cast<uint64_t>(INT64_MAX)) c.fail(tn + "dim " + std::to_string(d) + " is negative or too large");
      t.ne[d] = static_cast<int64_t>(n);
    }
    const uint32_t type = c.read<uint32_t>("tensor type");
    if (!dtype_valid(type)) c.fail(tn + "unknown tensor type id " + std::to_string(type));
    t.type = static_cast<DType>(type);
    t.offset = c.read<uint64_t>("tensor offset");
    // Element count and byte size, overflow-safe: every partial product must stay < 2^63.
    uint64_t n = 1;
    for (uint32_t d = 0; d < kGgufMaxDims; ++d) {
      const uint64_t k = static_cast<uint64_t>(t.ne[d]);
      if (k != 0 && n > static_cast<uint64_t>(INT64_MAX) / k) c.fail(tn + "element count overflows");
      n *= k;
    }
    const uint32_t bs = dtype_block_size(t.type);
    if (t.ne[0] % bs != 0)
      c.fail(tn + "row length " + std::to_string(t.ne[0]) + " is not a multiple of the " + dtype_name(t.type) +
             " block size " + std::to_string(bs));
    const uint64_t blocks = n / bs, bb = dtype_block_bytes(t.type);
    if (blocks != 0 && bb > static_cast<uint64_t>(INT64_MAX) / blocks) c.fail(tn + "byte size overflows");
    t.nbytes = blocks * bb;
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) c.fail("duplicate tensor name '" + t.name + "'");
    return t;
  }

  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace edgellm
