// IEEE half (F16) and bfloat16 (BF16) conversions: exact scalar code, plus the hardware
// conversion where the target has it. Standard library only.
#pragma once
#include <cstdint>
#include <cstring>
#if !defined(__aarch64__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace edgellm {

using ggml_half = uint16_t;  // ggml's name for an F16 value stored as bits
using ggml_bf16 = uint16_t;

inline float fp32_from_bits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
inline uint32_t fp32_to_bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// Exact F16 -> F32 (normals, subnormals, inf, NaN), branch-light (same method as FP16 library).
inline float fp16_to_fp32_ref(uint16_t h) {
  const uint32_t w = uint32_t(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = fp32_from_bits(0x7800000u);  // 2^-112
  const float normalized = fp32_from_bits((two_w >> 4) + exp_offset) * exp_scale;
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = fp32_from_bits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign | (two_w < denormalized_cutoff ? fp32_to_bits(denormalized) : fp32_to_bits(normalized));
  return fp32_from_bits(result);
}

// Exact F32 -> F16, round to nearest even; overflow to inf, NaN kept NaN.
inline uint16_t fp32_to_fp16_ref(float f) {
  const float scale_to_inf = fp32_from_bits(0x77800000u);   // 2^112
  const float scale_to_zero = fp32_from_bits(0x08800000u);  // 2^-110
  float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
  const uint32_t w = fp32_to_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = fp32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = fp32_to_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return uint16_t((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

#if defined(__aarch64__)
inline float fp16_to_fp32(uint16_t h) {
  __fp16 x;
  std::memcpy(&x, &h, 2);
  return float(x);
}
inline uint16_t fp32_to_fp16(float f) {
  __fp16 x = __fp16(f);
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}
#elif defined(__F16C__)
inline float fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t fp32_to_fp16(float f) { return uint16_t(_cvtss_sh(f, 0)); }
#else
inline float fp16_to_fp32(uint16_t h) { return fp16_to_fp32_ref(h); }
inline uint16_t fp32_to_fp16(float f) { return fp32_to_fp16_ref(f); }
#endif

// BF16: the top 16 bits of an F32. To BF16 rounds to nearest even; NaN stays a quiet NaN.
inline float bf16_to_fp32(uint16_t h) { return fp32_from_bits(uint32_t(h) << 16); }
inline uint16_t fp32_to_bf16(float f) {
  const uint32_t u = fp32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64);  // quiet NaN
  return uint16_t((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

}  // namespace edgellm
