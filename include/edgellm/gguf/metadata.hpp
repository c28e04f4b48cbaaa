// GGUF metadata values (the 13 GGUF value types, arrays included) and their names. Used by the
// reader (gguf/reader.hpp) and writer (gguf/writer.hpp). Standard library + core only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"

namespace edgellm {

// GGUF value type ids (gguf_type in the spec).
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;

inline const char* gguf_type_name(GgufType t) {
  static const char* const names[kGgufTypeCount] = {"uint8", "int8",   "uint16", "int16", "uint32",
                                                    "int32", "float32", "bool",  "string", "array",
                                                    "uint64", "int64", "float64"};
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? names[i] : "invalid";
}

// Bytes of one element of a fixed-size type; 0 for STRING / ARRAY / invalid.
inline size_t gguf_type_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}
inline bool gguf_type_is_int(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64: return true;
    default: return false;
  }
}
inline bool gguf_type_is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

// Reads element i of a little-endian numeric buffer of type t as int64 / double.
// (An out-of-range UINT64 is reported through `ok`.)
inline int64_t gguf_read_int(GgufType t, const uint8_t* p, bool* ok = nullptr) {
  if (ok) *ok = true;
  switch (t) {
    case GgufType::UINT8: return *p;
    case GgufType::INT8: return static_cast<int8_t>(*p);
    case GgufType::BOOL: return *p != 0;
    case GgufType::UINT16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::INT16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::UINT32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::INT32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::INT64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case GgufType::UINT64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      if (v > static_cast<uint64_t>(INT64_MAX) && ok) *ok = false;
      return static_cast<int64_t>(v);
    }
    default: if (ok) *ok = false; return 0;
  }
}
inline double gguf_read_float(GgufType t, const uint8_t* p) {
  if (t == GgufType::FLOAT32) { float v; std::memcpy(&v, p, 4); return v; }
  if (t == GgufType::FLOAT64) { double v; std::memcpy(&v, p, 8); return v; }
  return 0.0;
}

// One metadata value. Scalars keep their raw little-endian bytes; numeric arrays point into the
// file (zero copy) or into `owned`; string arrays are decoded.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint8_t raw[8] = {0};           // scalar numeric/bool payload
  std::string str;                // STRING
  GgufType arr_type = GgufType::UINT8;
  uint64_t arr_n = 0;             // ARRAY: element count
  const uint8_t* arr_data = nullptr;  // ARRAY of numbers: arr_n * gguf_type_size(arr_type) bytes
  std::vector<std::string> arr_str;   // ARRAY of strings

  bool is_int() const { return gguf_type_is_int(type); }
  bool is_float() const { return gguf_type_is_float(type); }
  bool is_array() const { return type == GgufType::ARRAY; }
  // "uint32", "string", "array[float32]"...
  std::string type_string() const {
    if (type != GgufType::ARRAY) return gguf_type_name(type);
    return std::string("array[") + gguf_type_name(arr_type) + "]";
  }
  // Short human-readable form (arrays abbreviated to their first items).
  std::string to_display(size_t max_items = 8) const {
    auto quote = [](const std::string& s) {
      std::string o = "\"";
      for (char c : s) {
        if (c == '\n') o += "\\n";
        else if (c == '"') o += "\\\"";
        else if (c == '\\') o += "\\\\";
        else if (static_cast<unsigned char>(c) < 0x20) o += '?';
        else o += c;
      }
      return o + "\"";
    };
    auto scalar = [](GgufType t, const uint8_t* p) -> std::string {
      if (t == GgufType::BOOL) return *p ? "true" : "false";
      if (gguf_type_is_float(t)) {
        std::string s = std::to_string(gguf_read_float(t, p));
        return s;
      }
      if (t == GgufType::UINT64) { uint64_t v; std::memcpy(&v, p, 8); return std::to_string(v); }
      return std::to_string(gguf_read_int(t, p));
    };
    if (type == GgufType::STRING) return quote(str.size() > 200 ? str.substr(0, 200) + "..." : str);
    if (type != GgufType::ARRAY) return scalar(type, raw);
    std::string s = "[";
    const size_t shown = arr_n < max_items ? static_cast<size_t>(arr_n) : max_items;
    for (size_t i = 0; i < shown; ++i) {
      if (i) s += ", ";
      s += arr_type == GgufType::STRING ? quote(arr_str[i]) : scalar(arr_type, arr_data + i * gguf_type_size(arr_type));
    }
    if (arr_n > shown) s += ", ... (" + std::to_string(arr_n) + " items)";
    return s + "]";
  }
};

}  // namespace edgellm
