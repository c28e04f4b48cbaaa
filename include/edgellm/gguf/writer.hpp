// GGUF v3 writer: metadata + tensor infos + aligned tensor data, the layout llama.cpp expects
// (data section and every tensor aligned to general.alignment, tensors padded with zeros).
// Tensor data can be given up front or produced one tensor at a time (large models never need
// to be in memory at once).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/metadata.hpp"
#include "edgellm/gguf/reader.hpp"

namespace edgellm {

class GgufWriter {
 public:
  // Produces the bytes of tensor `index` (exactly its byte size) when the file is written.
  using DataProvider = std::function<void(size_t index, std::vector<uint8_t>& out)>;

  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment) : alignment_(alignment) {
    EDGELLM_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0, "GGUF alignment ", alignment,
                  " is not a power of two");
    if (alignment != kGgufDefaultAlignment) set_u32("general.alignment", alignment);
  }

  // ---- metadata (a key set twice keeps its first position and takes the new value) ----
  void set_u8(const std::string& k, uint8_t v) { set_scalar(k, GgufType::UINT8, &v, 1); }
  void set_i8(const std::string& k, int8_t v) { set_scalar(k, GgufType::INT8, &v, 1); }
  void set_u16(const std::string& k, uint16_t v) { set_scalar(k, GgufType::UINT16, &v, 2); }
  void set_i16(const std::string& k, int16_t v) { set_scalar(k, GgufType::INT16, &v, 2); }
  void set_u32(const std::string& k, uint32_t v) { set_scalar(k, GgufType::UINT32, &v, 4); }
  void set_i32(const std::string& k, int32_t v) { set_scalar(k, GgufType::INT32, &v, 4); }
  void set_u64(const std::string& k, uint64_t v) { set_scalar(k, GgufType::UINT64, &v, 8); }
  void set_i64(const std::string& k, int64_t v) { set_scalar(k, GgufType::INT64, &v, 8); }
  void set_f32(const std::string& k, float v) { set_scalar(k, GgufType::FLOAT32, &v, 4); }
  void set_f64(const std::string& k, double v) { set_scalar(k, GgufType::FLOAT64, &v, 8); }
  void set_bool(const std::string& k, bool v) {
    const uint8_t b = v ? 1 : 0;
    set_scalar(k, GgufType::BOOL, &b, 1);
  }
  void set_string(const std::string& k, const std::string& v) {
    std::vector<uint8_t> p;
    put_string(p, v);
    set_raw(k, GgufType::STRING, std::move(p));
  }
  // Array of fixed-size elements of type `et` (n elements at `data`, little-endian).
  void set_array(const std::string& k, GgufType et, const void* data, uint64_t n) {
    EDGELLM_CHECK(gguf_type_size(et) != 0, "key '", k, "': array element type ", gguf_type_name(et),
                  " is not a fixed-size type");
    std::vector<uint8_t> p;
    put<uint32_t>(p, static_cast<uint32_t>(et));
    put<uint64_t>(p, n);
    const auto* b = static_cast<const uint8_t*>(data);
    p.insert(p.end(), b, b + n * gguf_type_size(et));
    set_raw(k, GgufType::ARRAY, std::move(p));
  }
  void set_array_f32(const std::string& k, const std::vector<float>& v) { set_array(k, GgufType::FLOAT32, v.data(), v.size()); }
  void set_array_i32(const std::string& k, const std::vector<int32_t>& v) { set_array(k, GgufType::INT32, v.data(), v.size()); }
  void set_array_string(const std::string& k, const std::vector<std::string>& v) {
    std::vector<uint8_t> p;
    put<uint32_t>(p, static_cast<uint32_t>(GgufType::STRING));
    put<uint64_t>(p, v.size());
    for (const auto& s : v) put_string(p, s);
    set_raw(k, GgufType::ARRAY, std::move(p));
  }
  // Copies one value read from another file (quantizer, tools).
  void set_value(const std::string& k, const GgufValue& v) {
    if (v.type == GgufType::STRING) return set_string(k, v.str);
    if (v.type == GgufType::ARRAY) {
      if (v.arr_type == GgufType::STRING) return set_array_string(k, v.arr_str);
      return set_array(k, v.arr_type, v.arr_data, v.arr_n);
    }
    set_scalar(k, v.type, v.raw, gguf_type_size(v.type));
  }
  // Copies all metadata of `src` (keys for which skip(key) is true are left out). The alignment
  // stays this writer's own.
  void copy_metadata(const GgufFile& src, const std::function<bool(const std::string&)>& skip = {}) {
    for (const auto& kv : src.metadata())
      if (kv.key != "general.alignment" && (!skip || !skip(kv.key))) set_value(kv.key, kv.value);
  }
  bool has(const std::string& k) const { return kv_index_.count(k) != 0; }

  // ---- tensors ----
  // `data` (nbytes of the type and shape) must stay valid until write(); nullptr = from the provider.
  size_t add_tensor(const std::string& name, DType type, const Shape& shape, const void* data = nullptr) {
    EDGELLM_CHECK(!name.empty(), "GGUF tensor with an empty name");
    EDGELLM_CHECK(tensor_index_.emplace(name, tensors_.size()).second, "duplicate GGUF tensor '", name, "'");
    T t;
    t.name = name;
    t.type = type;
    t.shape = shape;
    t.nbytes = dtype_row_bytes(type, shape.ne[0]) * static_cast<size_t>(shape.n_rows());
    t.data = static_cast<const uint8_t*>(data);
    t.offset = next_offset_;
    next_offset_ += pad_to(t.nbytes);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
  }
  size_t n_tensors() const { return tensors_.size(); }

  // The header: magic, version, counts, metadata, tensor infos, padding to the data section.
  std::vector<uint8_t> header_bytes() const {
    std::vector<uint8_t> h;
    put<uint32_t>(h, kGgufMagic);
    put<uint32_t>(h, 3);
    put<uint64_t>(h, tensors_.size());
    put<uint64_t>(h, kv_.size());
    for (const auto& kv : kv_) {
      put_string(h, kv.key);
      put<uint32_t>(h, static_cast<uint32_t>(kv.type));
      h.insert(h.end(), kv.payload.begin(), kv.payload.end());
    }
    for (const auto& t : tensors_) {
      put_string(h, t.name);
      put<uint32_t>(h, static_cast<uint32_t>(t.shape.n_dims));
      for (int d = 0; d < t.shape.n_dims; ++d) put<uint64_t>(h, static_cast<uint64_t>(t.shape.ne[d]));
      put<uint32_t>(h, static_cast<uint32_t>(t.type));
      put<uint64_t>(h, t.offset);
    }
    h.resize(pad_to(h.size()), 0);
    return h;
  }

  // The whole file in memory.
  std::vector<uint8_t> to_bytes(const DataProvider& provide = {}) const {
    std::vector<uint8_t> out = header_bytes();
    std::vector<uint8_t> buf;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const uint8_t* d = tensor_data(i, provide, buf);
      out.insert(out.end(), d, d + tensors_[i].nbytes);
      out.resize(pad_to(out.size()), 0);
    }
    return out;
  }

  // Writes the file (to path + ".tmp", renamed on success so a failure never leaves half a file).
  void write(const std::string& path, const DataProvider& provide = {}) const {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw_error("file ", path, ": cannot create");
    try {
      const std::vector<uint8_t> h = header_bytes();
      write_all(f, h.data(), h.size(), path);
      std::vector<uint8_t> buf;
      static const uint8_t zeros[64] = {0};
      for (size_t i = 0; i < tensors_.size(); ++i) {
        const uint8_t* d = tensor_data(i, provide, buf);
        write_all(f, d, tensors_[i].nbytes, path);
        size_t pad = pad_to(tensors_[i].nbytes) - tensors_[i].nbytes;
        while (pad > 0) {
          const size_t k = pad < sizeof(zeros) ? pad : sizeof(zeros);
          write_all(f, zeros, k, path);
          pad -= k;
        }
      }
      if (std::fclose(f) != 0) {
        f = nullptr;
        throw_error("file ", path, ": write failed");
      }
      f = nullptr;
      if (std::rename(tmp.c_str(), path.c_str()) != 0) throw_error("file ", path, ": cannot rename from ", tmp);
    } catch (...) {
      if (f) std::fclose(f);
      std::remove(tmp.c_str());
      throw;
    }
  }

 private:
  struct KV {
    std::string key;
    GgufType type;
    std::vector<uint8_t> payload;  // encoded value, without the type
  };
  struct T {
    std::string name;
    DType type;
    Shape shape;
    size_t nbytes = 0;
    uint64_t offset = 0;
    const uint8_t* data = nullptr;
  };

  template <class V>
  static void put(std::vector<uint8_t>& out, V v) {
    uint8_t b[sizeof(V)];
    std::memcpy(b, &v, sizeof(V));
    out.insert(out.end(), b, b + sizeof(V));
  }
  static void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  size_t pad_to(size_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  void set_scalar(const std::string& k, GgufType t, const void* v, size_t n) {
    const auto* b = static_cast<const uint8_t*>(v);
    set_raw(k, t, std::vector<uint8_t>(b, b + n));
  }
  void set_raw(const std::string& k, GgufType t, std::vector<uint8_t> payload) {
    EDGELLM_CHECK(!k.empty(), "GGUF metadata key is empty");
    auto it = kv_index_.find(k);
    if (it != kv_index_.end()) {
      kv_[it->second].type = t;
      kv_[it->second].payload = std::move(payload);
      return;
    }
    kv_index_.emplace(k, kv_.size());
    kv_.push_back(KV{k, t, std::move(payload)});
  }

  const uint8_t* tensor_data(size_t i, const DataProvider& provide, std::vector<uint8_t>& buf) const {
    const T& t = tensors_[i];
    if (t.data) return t.data;
    EDGELLM_CHECK(static_cast<bool>(provide), "GGUF tensor '", t.name, "' has no data and no provider was given");
    buf.clear();
    provide(i, buf);
    EDGELLM_CHECK(buf.size() == t.nbytes, "GGUF tensor '", t.name, "': provider gave ", buf.size(),
                  " bytes, expected ", t.nbytes);
    return buf.data();
  }
  static void write_all(std::FILE* f, const uint8_t* p, size_t n, const std::string& path) {
    if (n && std::fwrite(p, 1, n, f) != n) throw_error("file ", path, ": write failed (disk full?)");
  }

  uint32_t alignment_;
  std::vector<KV> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<T> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  uint64_t next_offset_ = 0;
};

}  // namespace edgellm
