// NEON (ARMv8.0) KV-cache kernels for Q8_0 rows read in place by attention: dot of a float query
// with a block_q8_0 row and axpy from a block_q8_0 row (FloatKernels::dot_q8_0_f32 / axpy_q8_0).
#pragma once
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

namespace edgellm {
namespace neon {

// 16 int8 quants widened to four float32x4.
inline void kv_q8x16_to_f32(const int8_t* q, float32x4_t out[4]) {
  const int8x16_t v = vld1q_s8(q);
  const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
  out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  out[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo)));
  out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  out[3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi)));
}

}  // namespace neon

// a: [n / 32] block_q8_0, b: [n] floats, n a multiple of 32. Each block's products are summed in
// floats, then scaled by its d once.
inline float dot_q8_0_f32_neon(const void* a, const float* b, int n) {
  const block_q8_0* x = static_cast<const block_q8_0*>(a);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int i = 0; i < n / QK8_0; ++i, b += QK8_0) {
    float32x4_t q[8];
    neon::kv_q8x16_to_f32(x[i].qs, q);
    neon::kv_q8x16_to_f32(x[i].qs + 16, q + 4);
    float32x4_t s = vmulq_f32(q[0], vld1q_f32(b));
    for (int j = 1; j < 8; ++j) s = vfmaq_f32(s, q[j], vld1q_f32(b + 4 * j));
    acc = vfmaq_n_f32(acc, s, fp16_to_fp32(x[i].d));
  }
  return vaddvq_f32(acc);
}

// y: [n] floats, x: [n / 32] block_q8_0, n a multiple of 32; y += alpha * x.
inline void axpy_q8_0_neon(float* y, float alpha, const void* x, int n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(x);
  for (int i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const float a = alpha * fp16_to_fp32(b[i].d);
    float32x4_t q[8];
    neon::kv_q8x16_to_f32(b[i].qs, q);
    neon::kv_q8x16_to_f32(b[i].qs + 16, q + 4);
    for (int j = 0; j < 8; ++j) vst1q_f32(y + 4 * j, vfmaq_n_f32(vld1q_f32(y + 4 * j), q[j], a));
  }
}

// Rows of the KV cache to floats, as attention reads them (KernelTable::of(F16 / Q8_0).to_float).
// Exact like the refs they replace: fcvtl is the exact widening, q * d one float multiply.
inline void fp16_to_fp32_row_neon(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float16x8_t v = vreinterpretq_f16_u16(vld1q_u16(h + i));
    vst1q_f32(y + i, vcvt_f32_f16(vget_low_f16(v)));
    vst1q_f32(y + i + 4, vcvt_high_f32_f16(v));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(h[i]);
}
// n a multiple of 32 (whole blocks).
inline void dequantize_row_q8_0_neon(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const float d = fp16_to_fp32(b[i].d);
    float32x4_t q[8];
    neon::kv_q8x16_to_f32(b[i].qs, q);
    neon::kv_q8x16_to_f32(b[i].qs + 16, q + 4);
    for (int j = 0; j < 8; ++j) vst1q_f32(y + 4 * j, vmulq_n_f32(q[j], d));
  }
}

// Sets the KV-cache entries of f to the kernels above (called by register_neon_kernels).
inline void register_neon_kv_kernels(FloatKernels& f) {
  f.dot_q8_0_f32 = dot_q8_0_f32_neon;
  f.axpy_q8_0 = axpy_q8_0_neon;
}

}  // namespace edgellm
#endif
