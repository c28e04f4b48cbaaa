// NEON dot products of the K-quants (q2_K .. q6_K) against Q8_K activations, one body per format
// templated on the int8 dot (neon/vdot.hpp), instantiated as *_neon and *_dotprod.
// Semantics: vec_dot_*_ref in kernels/scalar/dot.hpp; minimums and fixed offsets go through bsums.
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

// Word-wise form of get_scale_min_k4 (quant/scales.hpp) for all 8 sub-blocks; test_neon checks
// it against that function. out[0..1] = 8 scales, out[2..3] = 8 mins, one byte each.
EDGELLM_NEON_INLINE void unpack_scales_mins_k4_words(const uint8_t* q, uint32_t out[4]) {
  uint32_t w[3];
  std::memcpy(w, q, 12);
  out[0] = w[0] & 0x3F3F3F3Fu;                                        // scales 0..3
  out[2] = w[1] & 0x3F3F3F3Fu;                                        // mins 0..3
  out[1] = (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u);        // scales 4..7
  out[3] = ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u);  // mins 4..7
}

// Vector form of unpack_scales_q3_K (quant/scales.hpp), also checked by test_neon: 16 scales - 32.
EDGELLM_NEON_INLINE int8x16_t unpack_scales_q3_K_neon(const uint8_t* q) {
  static const int32_t kShift[4] = {0, -2, -4, -6};
  const uint8x8_t l = vld1_u8(q);
  const uint8x16_t lo = vcombine_u8(vand_u8(l, vdup_n_u8(0x0F)), vshr_n_u8(l, 4));
  uint32_t h;
  std::memcpy(&h, q + 8, 4);
  const uint32x4_t hs = vshlq_u32(vdupq_n_u32(h), vld1q_s32(kShift));
  const uint8x16_t hi = vandq_u8(vreinterpretq_u8_u32(hs), vdupq_n_u8(3));
  return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
}

// 16 int16 scales -> 4 int32x4 (lanes for vmlaq_laneq_s32).
EDGELLM_NEON_INLINE void widen_scales16(int16x8_t lo, int16x8_t hi, int32x4_t s[4]) {
  s[0] = vmovl_s16(vget_low_s16(lo));
  s[1] = vmovl_high_s16(lo);
  s[2] = vmovl_s16(vget_low_s16(hi));
  s[3] = vmovl_high_s16(hi);
}

// sum over 16 groups of c[g] * bsums[g]
EDGELLM_NEON_INLINE int32_t dot_bsums16(const int16_t* bsums, int16x8_t c_lo, int16x8_t c_hi) {
  const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
  int32x4_t s = vmull_s16(vget_low_s16(b0), vget_low_s16(c_lo));
  s = vmlal_high_s16(s, b0, c_lo);
  s = vmlal_s16(s, vget_low_s16(b1), vget_low_s16(c_hi));
  s = vmlal_high_s16(s, b1, c_hi);
  return vaddvq_s32(s);
}

// Shift every byte left by S (S > 0), right by -S (S < 0), or not at all.
template <int S>
EDGELLM_NEON_INLINE uint8x16_t shift_u8(uint8x16_t v) {
  if constexpr (S > 0) return vshlq_n_u8(v, S);
  else if constexpr (S < 0) return vshrq_n_u8(v, -S);
  else return v;
}

// Sub-block g (16 weights, activations aq) with its scale in lane g%4 of sc[g/4].
template <class D, int G>
EDGELLM_NEON_INLINE int32x4_t mla_sub16(int32x4_t acc, uint8x16_t wq, const int8_t* aq, const int32x4_t sc[4]) {
  const int32x4_t p = D::dot(vdupq_n_s32(0), vreinterpretq_s8_u8(wq), vld1q_s8(aq));
  return vmlaq_laneq_s32(acc, p, sc[G / 4], G % 4);
}

// ---- q2_K ----
// The 2-bit field at bits 2j is taken as q & (3 << 2j) for j < 3 (worth 4^j * q) and q >> 6 for
// j = 3, saving the shifts; kQ2Mul scales each sub-block's scale so all of them are worth 16 * q.
alignas(16) inline constexpr uint8_t kQ2Mul[16] = {16, 16, 4, 4, 1, 1, 16, 16, 16, 16, 4, 4, 1, 1, 16, 16};

template <int J>
EDGELLM_NEON_INLINE uint8x16_t q2_field(uint8x16_t q) {
  if constexpr (J == 3) return vshrq_n_u8(q, 6);
  else return vandq_u8(q, vdupq_n_u8(uint8_t(3 << (2 * J))));
}

// Half n (128 weights) of a q2_K block: 4 fields x 2 vectors of 16.
template <class D, int N>
EDGELLM_NEON_INLINE void q2_K_half(const uint8_t* qs, const int8_t* aq, const int32x4_t sc[4], int32x4_t* acc0,
                                   int32x4_t* acc1) {
  const uint8x16_t q0 = vld1q_u8(qs + 32 * N), q1 = vld1q_u8(qs + 32 * N + 16);
  const int8_t* a = aq + 128 * N;
  *acc0 = mla_sub16<D, 8 * N + 0>(*acc0, q2_field<0>(q0), a + 0, sc);
  *acc1 = mla_sub16<D, 8 * N + 1>(*acc1, q2_field<0>(q1), a + 16, sc);
  *acc0 = mla_sub16<D, 8 * N + 2>(*acc0, q2_field<1>(q0), a + 32, sc);
  *acc1 = mla_sub16<D, 8 * N + 3>(*acc1, q2_field<1>(q1), a + 48, sc);
  *acc0 = mla_sub16<D, 8 * N + 4>(*acc0, q2_field<2>(q0), a + 64, sc);
  *acc1 = mla_sub16<D, 8 * N + 5>(*acc1, q2_field<2>(q1), a + 80, sc);
  *acc0 = mla_sub16<D, 8 * N + 6>(*acc0, q2_field<3>(q0), a + 96, sc);
  *acc1 = mla_sub16<D, 8 * N + 7>(*acc1, q2_field<3>(q1), a + 112, sc);
}

// w: [n/256] block_q2_K, a: [n/256] block_q8_K
template <class D>
EDGELLM_NEON_INLINE float q2_K_q8_K_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q2_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  const uint8x16_t mul = vld1q_u8(kQ2Mul);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    const uint8x16_t packed = vld1q_u8(x[b].scales);
    const uint8x16_t mins = vshrq_n_u8(packed, 4);
    const int32_t msum = dot_bsums16(y[b].bsums, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins))),
                                     vreinterpretq_s16_u16(vmovl_high_u8(mins)));
    const uint8x16_t s8 = vmulq_u8(vandq_u8(packed, vdupq_n_u8(0x0F)), mul);  // <= 240
    int32x4_t sc[4];
    widen_scales16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(s8))), vreinterpretq_s16_u16(vmovl_high_u8(s8)), sc);
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
    q2_K_half<D, 0>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    q2_K_half<D, 1>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    const int32_t isum16 = vaddvq_s32(vaddq_s32(acc0, acc1));
    sum += y[b].d * (fp16_to_fp32(x[b].d) * (float(isum16) * (1.0f / 16.0f)) - fp16_to_fp32(x[b].dmin) * float(msum));
  }
  return sum;
}

// ---- q3_K ----
// Each weight is built as the unsigned 3-bit value lo + 4 * hi (= q + 4; the 4 goes through
// bsums) at bit 2j for j < 3 (worth 4^j) and at bit 0 for j = 3, with the q2_K scale multipliers.
// The high bit of sub-block (N, J) is bit 4N + J of hmask.
template <int N, int J>
EDGELLM_NEON_INLINE uint8x16_t q3_field(uint8x16_t q, uint8x16_t h) {
  if constexpr (J == 3) {
    // sri keeps bits 2..7 of the first operand: only bit 2 (the high bit) may be set there.
    const uint8x16_t hb = N == 0 ? vshrq_n_u8(vshlq_n_u8(h, 4), 5) : vshrq_n_u8(h, 5);
    return vsriq_n_u8(hb, q, 6);
  } else {
    const uint8x16_t hb = shift_u8<J + 2 - 4 * N>(h);  // high bit moved to bit 2j + 2
    const uint8x16_t v = vbslq_u8(vdupq_n_u8(uint8_t(4 << (2 * J))), hb, q);
    return vandq_u8(v, vdupq_n_u8(uint8_t(7 << (2 * J))));
  }
}

template <class D, int N>
EDGELLM_NEON_INLINE void q3_K_half(const uint8_t* qs, uint8x16_t h0, uint8x16_t h1, const int8_t* aq,
                                   const int32x4_t sc[4], int32x4_t* acc0, int32x4_t* acc1) {
  const uint8x16_t q0 = vld1q_u8(qs + 32 * N), q1 = vld1q_u8(qs + 32 * N + 16);
  const int8_t* a = aq + 128 * N;
  *acc0 = mla_sub16<D, 8 * N + 0>(*acc0, q3_field<N, 0>(q0, h0), a + 0, sc);
  *acc1 = mla_sub16<D, 8 * N + 1>(*acc1, q3_field<N, 0>(q1, h1), a + 16, sc);
  *acc0 = mla_sub16<D, 8 * N + 2>(*acc0, q3_field<N, 1>(q0, h0), a + 32, sc);
  *acc1 = mla_sub16<D, 8 * N + 3>(*acc1, q3_field<N, 1>(q1, h1), a + 48, sc);
  *acc0 = mla_sub16<D, 8 * N + 4>(*acc0, q3_field<N, 2>(q0, h0), a + 64, sc);
  *acc1 = mla_sub16<D, 8 * N + 5>(*acc1, q3_field<N, 2>(q1, h1), a + 80, sc);
  *acc0 = mla_sub16<D, 8 * N + 6>(*acc0, q3_field<N, 3>(q0, h0), a + 96, sc);
  *acc1 = mla_sub16<D, 8 * N + 7>(*acc1, q3_field<N, 3>(q1, h1), a + 112, sc);
}

// w: [n/256] block_q3_K, a: [n/256] block_q8_K
template <class D>
EDGELLM_NEON_INLINE float q3_K_q8_K_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q3_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  const int16x8_t mul = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(kQ2Mul)));  // same 8 multipliers twice
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    const int8x16_t s8 = unpack_scales_q3_K_neon(x[b].scales);
    const int16x8_t s_lo = vmovl_s8(vget_low_s8(s8)), s_hi = vmovl_high_s8(s8);
    const int32_t corr = dot_bsums16(y[b].bsums, s_lo, s_hi);  // sum sc * bsum, times 4 below
    int32x4_t sc[4];
    widen_scales16(vmulq_s16(s_lo, mul), vmulq_s16(s_hi, mul), sc);
    const uint8x16_t h0 = vld1q_u8(x[b].hmask), h1 = vld1q_u8(x[b].hmask + 16);
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
    q3_K_half<D, 0>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    q3_K_half<D, 1>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    const int32_t isum16 = vaddvq_s32(vaddq_s32(acc0, acc1)) - 64 * corr;
    sum += fp16_to_fp32(x[b].d) * y[b].d * (float(isum16) * (1.0f / 16.0f));
  }
  return sum;
}

// ---- q4_K / q5_K ----

// Mins term and scales of a q4_K / q5_K block: returns sum of mins[s] * (bsums[2s] + bsums[2s+1]).
EDGELLM_NEON_INLINE int32_t k4_scales(const uint8_t* packed, const int16_t* bsums, int32x4_t sc[2]) {
  uint32_t u[4];
  unpack_scales_mins_k4_words(packed, u);
  const uint8x8_t s8 = vcreate_u8(uint64_t(u[0]) | uint64_t(u[1]) << 32);
  const uint8x8_t m8 = vcreate_u8(uint64_t(u[2]) | uint64_t(u[3]) << 32);
  const int16x8_t s16 = vreinterpretq_s16_u16(vmovl_u8(s8));
  sc[0] = vmovl_s16(vget_low_s16(s16));
  sc[1] = vmovl_high_s16(s16);
  const int16x8_t bs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));  // 8 sums of 32
  const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(m8));
  int32x4_t m = vmull_s16(vget_low_s16(bs), vget_low_s16(m16));
  m = vmlal_high_s16(m, bs, m16);
  return vaddvq_s32(m);
}

// Sub-block s (32 weights: two vectors) with its scale in lane s%4 of sc[s/4].
template <class D, int S>
EDGELLM_NEON_INLINE int32x4_t mla_sub32(int32x4_t acc, uint8x16_t w0, uint8x16_t w1, const int8_t* aq,
                                        const int32x4_t sc[2]) {
  int32x4_t p = D::dot(vdupq_n_s32(0), vreinterpretq_s8_u8(w0), vld1q_s8(aq));
  p = D::dot(p, vreinterpretq_s8_u8(w1), vld1q_s8(aq + 16));
  return vmlaq_laneq_s32(acc, p, sc[S / 4], S % 4);
}

template <class D, int C>
EDGELLM_NEON_INLINE void q4_K_chunk(const uint8_t* qs, const int8_t* aq, const int32x4_t sc[2], int32x4_t* acc0,
                                    int32x4_t* acc1) {
  const uint8x16_t q0 = vld1q_u8(qs + 32 * C), q1 = vld1q_u8(qs + 32 * C + 16);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  *acc0 = mla_sub32<D, 2 * C>(*acc0, vandq_u8(q0, m4), vandq_u8(q1, m4), aq + 64 * C, sc);
  *acc1 = mla_sub32<D, 2 * C + 1>(*acc1, vshrq_n_u8(q0, 4), vshrq_n_u8(q1, 4), aq + 64 * C + 32, sc);
}

// w: [n/256] block_q4_K, a: [n/256] block_q8_K
template <class D>
EDGELLM_NEON_INLINE float q4_K_q8_K_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q4_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    int32x4_t sc[2];
    const int32_t msum = k4_scales(x[b].scales, y[b].bsums, sc);
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
    q4_K_chunk<D, 0>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    q4_K_chunk<D, 1>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    q4_K_chunk<D, 2>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    q4_K_chunk<D, 3>(x[b].qs, y[b].qs, sc, &acc0, &acc1);
    const int32_t isum = vaddvq_s32(vaddq_s32(acc0, acc1));
    sum += y[b].d * (fp16_to_fp32(x[b].d) * float(isum) - fp16_to_fp32(x[b].dmin) * float(msum));
  }
  return sum;
}

// q5_K chunk C: sub-block 2C takes bit 2C of qh as bit 4 of the low nibble, 2C + 1 bit 2C + 1
// for the high nibble. sli/sri insert the nibble next to a prepared high bit.
template <class D, int C>
EDGELLM_NEON_INLINE void q5_K_chunk(const uint8_t* qs, uint8x16_t h0, uint8x16_t h1, const int8_t* aq,
                                    const int32x4_t sc[2], int32x4_t* acc0, int32x4_t* acc1) {
  const uint8x16_t q0 = vld1q_u8(qs + 32 * C), q1 = vld1q_u8(qs + 32 * C + 16);
  const uint8x16_t one = vdupq_n_u8(1), b4 = vdupq_n_u8(0x10);
  // low: (h bit at bit 0, nothing else in bits 0..3) << 4 | nibble
  const uint8x16_t l0 = vsliq_n_u8(q0, vandq_u8(shift_u8<-2 * C>(h0), one), 4);
  const uint8x16_t l1 = vsliq_n_u8(q1, vandq_u8(shift_u8<-2 * C>(h1), one), 4);
  // high: nibble >> 4 inserted below a byte holding only bit 4
  const uint8x16_t u0 = vsriq_n_u8(vandq_u8(shift_u8<3 - 2 * C>(h0), b4), q0, 4);
  const uint8x16_t u1 = vsriq_n_u8(vandq_u8(shift_u8<3 - 2 * C>(h1), b4), q1, 4);
  *acc0 = mla_sub32<D, 2 * C>(*acc0, l0, l1, aq + 64 * C, sc);
  *acc1 = mla_sub32<D, 2 * C + 1>(*acc1, u0, u1, aq + 64 * C + 32, sc);
}

// w: [n/256] block_q5_K, a: [n/256] block_q8_K
template <class D>
EDGELLM_NEON_INLINE float q5_K_q8_K_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q5_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    int32x4_t sc[2];
    const int32_t msum = k4_scales(x[b].scales, y[b].bsums, sc);
    const uint8x16_t h0 = vld1q_u8(x[b].qh), h1 = vld1q_u8(x[b].qh + 16);
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
    q5_K_chunk<D, 0>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    q5_K_chunk<D, 1>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    q5_K_chunk<D, 2>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    q5_K_chunk<D, 3>(x[b].qs, h0, h1, y[b].qs, sc, &acc0, &acc1);
    const int32_t isum = vaddvq_s32(vaddq_s32(acc0, acc1));
    sum += y[b].d * (fp16_to_fp32(x[b].d) * float(isum) - fp16_to_fp32(x[b].dmin) * float(msum));
  }
  return sum;
}

// ---- q6_K ----
// Unsigned 6-bit q (the -32 goes through bsums): sli puts qh's 2 bits above a low nibble, sri
// puts a high nibble below them; "& 0x3F" drops the neighbours' bits.
template <class D, int N>
EDGELLM_NEON_INLINE void q6_K_half(const uint8_t* ql, const uint8_t* qh, const int8_t* aq, const int32x4_t sc[4],
                                   int32x4_t* acc0, int32x4_t* acc1) {
  const uint8x16_t l0 = vld1q_u8(ql + 64 * N), l1 = vld1q_u8(ql + 64 * N + 16);
  const uint8x16_t l2 = vld1q_u8(ql + 64 * N + 32), l3 = vld1q_u8(ql + 64 * N + 48);
  const uint8x16_t h0 = vld1q_u8(qh + 32 * N), h1 = vld1q_u8(qh + 32 * N + 16);
  const uint8x16_t g0 = vshrq_n_u8(h0, 2), g1 = vshrq_n_u8(h1, 2);
  const uint8x16_t m = vdupq_n_u8(0x3F);
  const int8_t* a = aq + 128 * N;
  *acc0 = mla_sub16<D, 8 * N + 0>(*acc0, vandq_u8(vsliq_n_u8(l0, h0, 4), m), a + 0, sc);
  *acc1 = mla_sub16<D, 8 * N + 1>(*acc1, vandq_u8(vsliq_n_u8(l1, h1, 4), m), a + 16, sc);
  *acc0 = mla_sub16<D, 8 * N + 2>(*acc0, vandq_u8(vsliq_n_u8(l2, g0, 4), m), a + 32, sc);
  *acc1 = mla_sub16<D, 8 * N + 3>(*acc1, vandq_u8(vsliq_n_u8(l3, g1, 4), m), a + 48, sc);
  *acc0 = mla_sub16<D, 8 * N + 4>(*acc0, vandq_u8(vsriq_n_u8(h0, l0, 4), m), a + 64, sc);
  *acc1 = mla_sub16<D, 8 * N + 5>(*acc1, vandq_u8(vsriq_n_u8(h1, l1, 4), m), a + 80, sc);
  *acc0 = mla_sub16<D, 8 * N + 6>(*acc0, vandq_u8(vsriq_n_u8(g0, l2, 4), m), a + 96, sc);
  *acc1 = mla_sub16<D, 8 * N + 7>(*acc1, vandq_u8(vsriq_n_u8(g1, l3, 4), m), a + 112, sc);
}

// w: [n/256] block_q6_K, a: [n/256] block_q8_K
template <class D>
EDGELLM_NEON_INLINE float q6_K_q8_K_body(int n, const void* w, const void* a) {
  const auto* x = static_cast<const block_q6_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    const int8x16_t s8 = vld1q_s8(x[b].scales);
    const int16x8_t s_lo = vmovl_s8(vget_low_s8(s8)), s_hi = vmovl_high_s8(s8);
    const int32_t corr = dot_bsums16(y[b].bsums, s_lo, s_hi);  // times 32 below
    int32x4_t sc[4];
    widen_scales16(s_lo, s_hi, sc);
    int32x4_t acc0 = vdupq_n_s32(0), acc1 = vdupq_n_s32(0);
    q6_K_half<D, 0>(x[b].ql, x[b].qh, y[b].qs, sc, &acc0, &acc1);
    q6_K_half<D, 1>(x[b].ql, x[b].qh, y[b].qs, sc, &acc0, &acc1);
    const int32_t isum = vaddvq_s32(vaddq_s32(acc0, acc1)) - 32 * corr;
    sum += fp16_to_fp32(x[b].d) * y[b].d * float(isum);
  }
  return sum;
}

}  // namespace neon

// ---- the public kernels: one per (format, ISA), VecDotFn signature ----

inline float vec_dot_q2_K_q8_K_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q2_K_q8_K_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q2_K_q8_K_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q2_K_q8_K_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q3_K_q8_K_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q3_K_q8_K_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q3_K_q8_K_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q3_K_q8_K_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q4_K_q8_K_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q4_K_q8_K_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q4_K_q8_K_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q4_K_q8_K_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q5_K_q8_K_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q5_K_q8_K_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q5_K_q8_K_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q5_K_q8_K_body<neon::DotSdot>(n, w, a);
}
inline float vec_dot_q6_K_q8_K_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return neon::q6_K_q8_K_body<neon::DotV80>(n, w, a);
}
EDGELLM_TARGET_DOTPROD inline float vec_dot_q6_K_q8_K_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                              const void* EDGELLM_RESTRICT a) {
  return neon::q6_K_q8_K_body<neon::DotSdot>(n, w, a);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
