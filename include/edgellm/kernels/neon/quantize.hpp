// NEON activation quantizers: quantize_row_q8_0_neon / _q8_1_neon / _q8_K_neon (FromFloatFn),
// bit-identical to quantize_row_q8_0_ref / _q8_1_ref / _q8_K_ref (quant/ref_legacy.hpp, ref_kquants.hpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

namespace edgellm {

namespace neon {
// One 32-float block as the legacy ref quantizes it: returns d = amax / 127, the quants
// roundf(x * (1 / d)) (ties away from zero = fcvtas) as four int16x8 (weights 8j .. 8j + 7).
inline float quantize_block32(const float* x, int16x8_t (&h)[4]) {
  float32x4_t v[8];
  float32x4_t am = vdupq_n_f32(0.0f);
  for (int j = 0; j < 8; ++j) {
    v[j] = vld1q_f32(x + 4 * j);
    am = vmaxq_f32(am, vabsq_f32(v[j]));
  }
  const float d = vmaxvq_f32(am) / 127.0f;
  const float id = d ? 1.0f / d : 0.0f;
  for (int j = 0; j < 4; ++j) {
    const int32x4_t i0 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * j], id));
    const int32x4_t i1 = vcvtaq_s32_f32(vmulq_n_f32(v[2 * j + 1], id));
    h[j] = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
  }
  return d;
}

inline void store_quants32(int8_t* qs, const int16x8_t (&h)[4]) {
  vst1q_s8(qs, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
  vst1q_s8(qs + 16, vcombine_s8(vmovn_s16(h[2]), vmovn_s16(h[3])));
}

// The value of largest |x| in a q8_K block, the first one on ties (sign matters: it sets the sign
// of the scale). Vector max/min decide unless +m and -m both occur; then scan for the first.
inline float q8_K_signed_max(const float* x) {
  float32x4_t mx = vld1q_f32(x), mn = mx;
  for (int j = 4; j < QK_K; j += 4) {
    const float32x4_t v = vld1q_f32(x + j);
    mx = vmaxq_f32(mx, v);
    mn = vminq_f32(mn, v);
  }
  const float hi = vmaxvq_f32(mx), lo = vminvq_f32(mn);
  if (hi > -lo) return hi;
  if (-lo > hi) return lo;
  for (int j = 0; j < QK_K; ++j)
    if (std::fabs(x[j]) == hi) return x[j];
  return hi;
}
}  // namespace neon

// x: [n] floats, y: [n/32] block_q8_0.
inline void quantize_row_q8_0_neon(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t n) {
  auto* y = static_cast<block_q8_0*>(vy);
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    int16x8_t h[4];
    y[b].d = fp32_to_fp16(neon::quantize_block32(x, h));
    neon::store_quants32(y[b].qs, h);
  }
}

// x: [n] floats, y: [n/32] block_q8_1: as q8_0, plus s = fp16(sum(q) * d) with the unrounded d
// (|sum| <= 32 * 127 fits the int16 lanes).
inline void quantize_row_q8_1_neon(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t n) {
  auto* y = static_cast<block_q8_1*>(vy);
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    int16x8_t h[4];
    const float d = neon::quantize_block32(x, h);
    y[b].d = fp32_to_fp16(d);
    neon::store_quants32(y[b].qs, h);
    const int sum = vaddvq_s16(vaddq_s16(vaddq_s16(h[0], h[1]), vaddq_s16(h[2], h[3])));
    y[b].s = fp32_to_fp16(float(sum) * d);
  }
}

// x: [n] floats, y: [n/256] block_q8_K. Nearest-even rounding (fcvtns) as the ref's nearest_int.
inline void quantize_row_q8_K_neon(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t n) {
  auto* y = static_cast<block_q8_K*>(vy);
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    const float max = neon::q8_K_signed_max(x);
    if (max == 0.0f) {
      std::memset(&y[b], 0, sizeof(block_q8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int g = 0; g < QK_K / 16; ++g) {
      int16x8_t h[2];
      for (int j = 0; j < 2; ++j) {
        const float* p = x + 16 * g + 8 * j;
        const int32x4_t i0 = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(p), iscale)), vdupq_n_s32(127));
        const int32x4_t i1 = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(p + 4), iscale)), vdupq_n_s32(127));
        h[j] = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
      }
      vst1q_s8(y[b].qs + 16 * g, vcombine_s8(vmovn_s16(h[0]), vmovn_s16(h[1])));
      y[b].bsums[g] = int16_t(vaddvq_s16(vaddq_s16(h[0], h[1])));
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
