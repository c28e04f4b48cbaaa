// NEON dot products of the legacy 32-weight formats (q4_0, q4_1, q5_0, q5_1, q8_0) against Q8_0
// activations: one body per format templated on the int8 dot (neon/vdot.hpp), instantiated as
// *_neon (ARMv8.0) and *_dotprod. Semantics: vec_dot_*_ref in kernels/scalar/dot.hpp.
#pragma once
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/kernels/neon/vdot.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"

#if EDGELLM_HAS_NEON
namespace edgellm {
namespace neon {

// Signed quants of a q4_0 block times 16: low nibble of (q ^ 0x88) sign-extended is q - 8, so
// "<< 4" and "& 0xF0" give 16 * (q - 8) for both halves without a subtract. Caller scales by 1/16.
EDGELLM_NEON_INLINE void unpack_q4_0_x16(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) {
  const int8x16_t v = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qs), vdupq_n_u8(0x88)));
  *lo = vshlq_n_s8(v, 4);
  *hi = vandq_s8(v, vdupq_n_s8(int8_t(0xF0)));
}

// 0xFF in byte j of lo (weights 0..15) / hi (16..31) where bit j / j + 16 of qh is set.
EDGELLM_NEON_INLINE void q5_high_masks(const uint8_t qh_bytes[4], uint8x16_t* lo, uint8x16_t* hi) {
  static const uint8_t kIdx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                   2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8x16_t h = vreinterpretq_u8_u32(vdupq_n_u32(qh));
  const uint8x16_t bit = vld1q_u8(kBit);
  *lo = vtstq_u8(vqtbl1q_u8(h, vld1q_u8(kIdx)), bit);
  *hi = vtstq_u8(vqtbl1q_u8(h, vld1q_u8(kIdx + 16)), bit);
}

// acc += [sum p0, sum p1, sum p2, sum p3] * dx * dy for 4 consecutive blocks: one convert and one
// fma for 4 blocks instead of 4 scalar scale products (the A55 is in-order; this is its hot path).
template <class BX, class BY>
EDGELLM_NEON_INLINE float32x4_t scale_add4(float32x4_t acc, int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3,
                                           const BX* x, const BY* y) {
  uint16x4_t hx = vdup_n_u16(x[0].d), hy = vdup_n_u16(y[0].d);
  hx = vset_lane_u16(x[1].d, hx, 1);
  hy = vset_lane_u16(y[1].d, hy, 1);
  hx = vset_lane_u16(x[2].d, hx, 2);
  hy = vset_lane_u16(y[2].d, hy, 2);
  hx = vset_lane_u16(x[3].d, hx, 3);
  hy = vset_lane_u16(y[3].d, hy, 3);
  const float32x4_t d = vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(hx)), vcvt_f32_f16(vreinterpret_f16_u16(hy)));
  const int32x4_t s = vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
  return vfmaq_f32(acc, vcvtq_f32_s32(s), d);
}

template <class D>
EDGELLM_NEON_INLINE int32x4_t q4_0_block(const block_q4_0& x, const block_q8_0& y) {
  int8x16_t lo, hi;
  unpack_q4_0_x16(x.qs, &lo, &hi);
  const int32x4_t p = D::dot(vdupq_n_s32(0), lo, vld1q_s8(y.qs));
  return D::dot(p, hi, vld1q_s8(y.qs + 16));
}

// w: [n/32] block_q4_0, a: [n/32] block_q8_0. Four blocks per step, then one at a time.
template <class D>
EDGELLM_NEON_INLINE float q4_0_q8_0_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q4_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  const int nb = n / QK4_0;
  float32x4_t acc = vdupq_n_f32(0.0f);
  int b = 0;
  for (; b + 3 < nb; b += 4) {
    const int32x4_t p0 = q4_0_block<D>(x[b], y[b]), p1 = q4_0_block<D>(x[b + 1], y[b + 1]);
    const int32x4_t p2 = q4_0_block<D>(x[b + 2], y[b + 2]), p3 = q4_0_block<D>(x[b + 3], y[b + 3]);
    acc = scale_add4(acc, p0, p1, p2, p3, x + b, y + b);
  }
  for (; b < nb; ++b) {
    const int32x4_t p0 = q4_0_block<D>(x[b], y[b]);
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p0), fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return vaddvq_f32(acc) * (1.0f / 16.0f);
}

// w: [n/32] block_q4_1, a: [n/32] block_q8_0. sum(q8) comes from a dot with ones.
template <class D>
EDGELLM_NEON_INLINE float q4_1_q8_0_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q4_1*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  const int nb = n / QK4_1;
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  const int8x16_t ones = vdupq_n_s8(1);
  float32x4_t acc = vdupq_n_f32(0.0f), accm = vdupq_n_f32(0.0f);
  for (int b = 0; b < nb; ++b) {
    const uint8x16_t q = vld1q_u8(x[b].qs);
    const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
    int32x4_t p = D::dot(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(q, m4)), y0);
    p = D::dot(p, vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), y1);
    const int32x4_t s = D::dot(D::dot(vdupq_n_s32(0), y0, ones), y1, ones);
    const float d8 = fp16_to_fp32(y[b].d);
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), fp16_to_fp32(x[b].d) * d8);
    accm = vmlaq_n_f32(accm, vcvtq_f32_s32(s), fp16_to_fp32(x[b].m) * d8);
  }
  return vaddvq_f32(vaddq_f32(acc, accm));
}

// q5_0 quants minus 16 for both halves: low nibble | bit 4, i.e. nibble - 16 where the bit is clear.
EDGELLM_NEON_INLINE void unpack_q5_0(const block_q5_0& x, int8x16_t* lo, int8x16_t* hi) {
  uint8x16_t mlo, mhi;
  q5_high_masks(x.qh, &mlo, &mhi);
  const uint8x16_t q = vld1q_u8(x.qs), b16 = vdupq_n_u8(0x10);
  *lo = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vbicq_u8(b16, mlo)));
  *hi = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(b16, mhi)));
}

// w: [n/32] block_q5_0, a: [n/32] block_q8_0
template <class D>
EDGELLM_NEON_INLINE float q5_0_q8_0_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q5_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  const int nb = n / QK5_0;
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int b = 0; b < nb; ++b) {
    int8x16_t lo, hi;
    unpack_q5_0(x[b], &lo, &hi);
    int32x4_t p = D::dot(vdupq_n_s32(0), lo, vld1q_s8(y[b].qs));
    p = D::dot(p, hi, vld1q_s8(y[b].qs + 16));
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return vaddvq_f32(acc);
}

// w: [n/32] block_q5_1, a: [n/32] block_q8_0 (min term as q4_1)
template <class D>
EDGELLM_NEON_INLINE float q5_1_q8_0_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q5_1*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  const int nb = n / QK5_1;
  const int8x16_t ones = vdupq_n_s8(1);
  const uint8x16_t b16 = vdupq_n_u8(0x10);
  float32x4_t acc = vdupq_n_f32(0.0f), accm = vdupq_n_f32(0.0f);
  for (int b = 0; b < nb; ++b) {
    uint8x16_t mlo, mhi;
    q5_high_masks(x[b].qh, &mlo, &mhi);
    const uint8x16_t q = vld1q_u8(x[b].qs);
    const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vandq_u8(b16, mlo)));
    const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(b16, mhi)));
    const int8x16_t y0 = vld1q_s8(y[b].qs), y1 = vld1q_s8(y[b].qs + 16);
    const int32x4_t p = D::dot(D::dot(vdupq_n_s32(0), lo, y0), hi, y1);
    const int32x4_t s = D::dot(D::dot(vdupq_n_s32(0), y0, ones), y1, ones);
    const float d8 = fp16_to_fp32(y[b].d);
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p), fp16_to_fp32(x[b].d) * d8);
    accm = vmlaq_n_f32(accm, vcvtq_f32_s32(s), fp16_to_fp32(x[b].m) * d8);
  }
  return vaddvq_f32(vaddq_f32(acc, accm));
}

template <class D>
EDGELLM_NEON_INLINE int32x4_t q8_0_block(const block_q8_0& x, const block_q8_0& y) {
  const int32x4_t p = D::dot(vdupq_n_s32(0), vld1q_s8(x.qs), vld1q_s8(y.qs));
  return D::dot(p, vld1q_s8(x.qs + 16), vld1q_s8(y.qs + 16));
}

// w: [n/32] block_q8_0, a: [n/32] block_q8_0. Four blocks per step, then one at a time.
template <class D>
EDGELLM_NEON_INLINE float q8_0_q8_0_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q8_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  const int nb = n / QK8_0;
  float32x4_t acc = vdupq_n_f32(0.0f);
  int b = 0;
  for (; b + 3 < nb; b += 4) {
    const int32x4_t p0 = q8_0_block<D>(x[b], y[b]), p1 = q8_0_block<D>(x[b + 1], y[b + 1]);
    const int32x4_t p2 = q8_0_block<D>(x[b + 2], y[b + 2]), p3 = q8_0_block<D>(x[b + 3], y[b + 3]);
    acc = scale_add4(acc, p0, p1, p2, p3, x + b, y + b);
  }
  for (; b < nb; ++b) {
    const int32x4_t p0 = q8_0_block<D>(x[b], y[b]);
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(p0), fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return vaddvq_f32(acc);
}

}  // namespace neon

// ---- the public kernels: one per (format, ISA), VecDotFn signature ----

inline float vec_dot_q4_0_q8_0_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q4_0_q8_0_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q4_0_q8_0_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q4_0_q8_0_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q4_1_q8_0_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q4_1_q8_0_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q4_1_q8_0_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q4_1_q8_0_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q5_0_q8_0_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q5_0_q8_0_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q5_0_q8_0_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q5_0_q8_0_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q5_1_q8_0_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q5_1_q8_0_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q5_1_q8_0_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q5_1_q8_0_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q8_0_q8_0_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q8_0_q8_0_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q8_0_q8_0_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q8_0_q8_0_body<neon::DotSdot>(n, w, a);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
