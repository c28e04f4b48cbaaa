// NEON (ARMv8.0) KV-cache row conversions: F16 and Q8_0 rows to floats, as attention reads them
// (KernelTable::of(F16 / Q8_0).to_float).
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

}  // namespace edgellm
#endif
