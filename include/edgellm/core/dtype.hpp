// DType: every GGUF/ggml tensor type id, with block size and bytes per block, so that any file can
// be inspected even where we do not compute its type. Standard library only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "edgellm/core/error.hpp"

namespace edgellm {

// Values are ggml's `enum ggml_type` ids as stored in GGUF tensor infos. Ids 4, 5 (Q4_2/Q4_3)
// and 31..33, 36..38 (old repacked types) were removed from ggml; files carrying them are rejected.
enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct DTypeTraits {
  const char* name;       // ggml's name ("q4_K")
  uint32_t block_size;    // elements per block (1 for plain types); 0 = unknown id
  uint32_t block_bytes;   // bytes per block
  bool quantized;
};

// Index = type id. An entry with block_size 0 is not a valid id.
inline constexpr DTypeTraits kDTypeTable[] = {
    {"f32", 1, 4, false},      {"f16", 1, 2, false},      {"q4_0", 32, 18, true},
    {"q4_1", 32, 20, true},    {"", 0, 0, false},         {"", 0, 0, false},
    {"q5_0", 32, 22, true},    {"q5_1", 32, 24, true},    {"q8_0", 32, 34, true},
    {"q8_1", 32, 36, true},    {"q2_K", 256, 84, true},   {"q3_K", 256, 110, true},
    {"q4_K", 256, 144, true},  {"q5_K", 256, 176, true},  {"q6_K", 256, 210, true},
    {"q8_K", 256, 292, true},  {"iq2_xxs", 256, 66, true}, {"iq2_xs", 256, 74, true},
    {"iq3_xxs", 256, 98, true}, {"iq1_s", 256, 50, true}, {"iq4_nl", 32, 18, true},
    {"iq3_s", 256, 110, true}, {"iq2_s", 256, 82, true},  {"iq4_xs", 256, 136, true},
    {"i8", 1, 1, false},       {"i16", 1, 2, false},      {"i32", 1, 4, false},
    {"i64", 1, 8, false},      {"f64", 1, 8, false},      {"iq1_m", 256, 56, true},
    {"bf16", 1, 2, false},     {"", 0, 0, false},         {"", 0, 0, false},
    {"", 0, 0, false},         {"tq1_0", 256, 54, true},  {"tq2_0", 256, 66, true},
    {"", 0, 0, false},         {"", 0, 0, false},         {"", 0, 0, false},
    {"mxfp4", 32, 17, true},
};
inline constexpr uint32_t kDTypeCount = sizeof(kDTypeTable) / sizeof(kDTypeTable[0]);

constexpr bool dtype_valid(uint32_t id) { return id < kDTypeCount && kDTypeTable[id].block_size != 0; }
constexpr const DTypeTraits& dtype_traits(DType t) { return kDTypeTable[static_cast<uint32_t>(t)]; }
constexpr uint32_t dtype_block_size(DType t) { return dtype_traits(t).block_size; }
constexpr uint32_t dtype_block_bytes(DType t) { return dtype_traits(t).block_bytes; }
constexpr bool dtype_is_quantized(DType t) { return dtype_traits(t).quantized; }
inline const char* dtype_name(DType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  return dtype_valid(id) ? kDTypeTable[id].name : "invalid";
}

// Upper-case display name as llama.cpp prints it ("Q4_K", "F16", "IQ2_XXS").
inline std::string dtype_upper_name(DType t) {
  std::string s = dtype_name(t);
  for (auto& c : s)
    if (c >= 'a' && c <= 'z') c = char(c - 'a' + 'A');
  return s;
}

// Parses "q4_K", "Q4_K", "f16", "BF16" (case-insensitive).
inline bool dtype_from_name(std::string_view name, DType* out) {
  for (uint32_t id = 0; id < kDTypeCount; ++id) {
    if (!dtype_valid(id)) continue;
    std::string_view n = kDTypeTable[id].name;
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i) {
      char a = n[i], b = name[i];
      if (a >= 'A' && a <= 'Z') a = char(a - 'A' + 'a');
      if (b >= 'A' && b <= 'Z') b = char(b - 'A' + 'a');
      eq = a == b;
    }
    if (eq) {
      *out = static_cast<DType>(id);
      return true;
    }
  }
  return false;
}

// Bytes of a row of n elements. Throws when n is not a multiple of the block size.
inline size_t dtype_row_bytes(DType t, int64_t n) {
  const auto& tr = dtype_traits(t);
  EDGELLM_CHECK(n >= 0 && tr.block_size != 0 && n % tr.block_size == 0, "row of ", n,
                " elements is not a whole number of ", tr.name, " blocks (", tr.block_size, ")");
  return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

}  // namespace edgellm
