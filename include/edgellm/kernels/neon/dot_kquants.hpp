// NEON dot products of the K-quants (q2_K .. q6_K) against Q8_K activations, one body per format
// templated on the int8 dot (neon/vdot.hpp) and on the number of weight rows R that share each
// activation load (R = 1: VecDotFn, R > 1: VecDotRowsFn), instantiated as *_neon and *_dotprod.
// Semantics: vec_dot_*_ref in kernels/scalar/dot.hpp; minimums and fixed offsets go through bsums.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// 8 int16 scales (one half block of 16-weight sub-blocks) -> 2 int32x4 (lanes for vmlaq_laneq_s32).
// Widened per half, not per block, so two rows' scales stay in registers.
EDGELLM_NEON_INLINE void widen_scales8(int16x8_t s, int32x4_t sc[2]) {
  sc[0] = vmovl_s16(vget_low_s16(s));
  sc[1] = vmovl_high_s16(s);
}

// Sub-block g (0..7 within a half; 16 weights against activations y), scale in lane g%4 of sc[g/4].
template <class D, int G>
EDGELLM_NEON_INLINE int32x4_t mla_sub16(int32x4_t acc, uint8x16_t wq, int8x16_t y, const int32x4_t sc[2]) {
  const int32x4_t p = D::dot0(vreinterpretq_s8_u8(wq), y);
  return vmlaq_laneq_s32(acc, p, sc[G / 4], G % 4);
}

// Sub-block s (32 weights: two vectors) with its scale in lane s%4 of sc[s/4].
template <class D, int S>
EDGELLM_NEON_INLINE int32x4_t mla_sub32(int32x4_t acc, uint8x16_t w0, uint8x16_t w1, int8x16_t y0, int8x16_t y1,
                                        const int32x4_t sc[2]) {
  const int32x4_t p = D::dot(D::dot0(vreinterpretq_s8_u8(w0), y0), vreinterpretq_s8_u8(w1), y1);
  return vmlaq_laneq_s32(acc, p, sc[S / 4], S % 4);
}

// R weight rows starting at w, w_stride bytes apart, as block pointers.
template <class B, int R>
struct RowPtrs {
  const B* p[R];
  EDGELLM_NEON_INLINE RowPtrs(const void* w, size_t w_stride) {
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r)
      p[r] = reinterpret_cast<const B*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride);
  }
};

// ---- q2_K ----
// The 2-bit field at bits 2j is taken as q & (3 << 2j) for j < 3 (worth 4^j * q) and q >> 6 for
// j = 3, saving the shifts; kQ2Mul scales each sub-block's scale so all of them are worth 16 * q.
alignas(16) inline constexpr uint8_t kQ2Mul[16] = {16, 16, 4, 4, 1, 1, 16, 16, 16, 16, 4, 4, 1, 1, 16, 16};

template <int J>
EDGELLM_NEON_INLINE uint8x16_t q2_field(uint8x16_t q) {
  if constexpr (J == 3) return vshrq_n_u8(q, 6);
  else return vandq_u8(q, vdupq_n_u8(uint8_t(3 << (2 * J))));
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

// q2_K / q3_K field J of half N (sub-blocks 8N + 2J, 8N + 2J + 1) for every row: one activation
// load, R uses. h0 / h1: q3_K's high bits (hmask), unused for q2_K.
template <class D, int N, int J, int R, class B>
EDGELLM_NEON_INLINE void k23_step(const uint8x16_t q0[R], const uint8x16_t q1[R], const uint8x16_t h0[R],
                                  const uint8x16_t h1[R], const int8_t* aq, const int32x4_t sc[R][2],
                                  int32x4_t acc[R][2]) {
  const int8x16_t y0 = vld1q_s8(aq + 128 * N + 32 * J), y1 = vld1q_s8(aq + 128 * N + 32 * J + 16);
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) {
    if constexpr (std::is_same_v<B, block_q3_K>) {
      acc[r][0] = mla_sub16<D, 2 * J>(acc[r][0], q3_field<N, J>(q0[r], h0[r]), y0, sc[r]);
      acc[r][1] = mla_sub16<D, 2 * J + 1>(acc[r][1], q3_field<N, J>(q1[r], h1[r]), y1, sc[r]);
    } else {
      acc[r][0] = mla_sub16<D, 2 * J>(acc[r][0], q2_field<J>(q0[r]), y0, sc[r]);
      acc[r][1] = mla_sub16<D, 2 * J + 1>(acc[r][1], q2_field<J>(q1[r]), y1, sc[r]);
    }
  }
}

// Half N's 8 scales as int16: q2_K passes all 16 as bytes, q3_K this half's 8.
template <int N>
EDGELLM_NEON_INLINE int16x8_t half_scales(uint8x16_t s8) {
  return vreinterpretq_s16_u16(N == 0 ? vmovl_u8(vget_low_u8(s8)) : vmovl_high_u8(s8));
}
template <int N>
EDGELLM_NEON_INLINE int16x8_t half_scales(int16x8_t s16) {
  return s16;
}

// Half N of a q2_K / q3_K block for every row; s[r]: row r's scales (times the kQ2Mul multipliers),
// see half_scales.
template <class D, int N, int R, class B, class S>
EDGELLM_NEON_INLINE void k23_half(const B* const x[R], int b, const uint8x16_t h0[R], const uint8x16_t h1[R],
                                  const int8_t* aq, const S s[R], int32x4_t acc[R][2]) {
  uint8x16_t q0[R], q1[R];
  int32x4_t sc[R][2];
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) {
    q0[r] = vld1q_u8(x[r][b].qs + 32 * N);
    q1[r] = vld1q_u8(x[r][b].qs + 32 * N + 16);
    widen_scales8(half_scales<N>(s[r]), sc[r]);
  }
  k23_step<D, N, 0, R, B>(q0, q1, h0, h1, aq, sc, acc);
  k23_step<D, N, 1, R, B>(q0, q1, h0, h1, aq, sc, acc);
  k23_step<D, N, 2, R, B>(q0, q1, h0, h1, aq, sc, acc);
  k23_step<D, N, 3, R, B>(q0, q1, h0, h1, aq, sc, acc);
}

// R rows of w: [n/256] block_q2_K each, a: [n/256] block_q8_K; out[r] = row r . a
template <class D, int R>
EDGELLM_NEON_INLINE void q2_K_q8_K_rows(int n, float* out, const void* w, size_t w_stride, const void* a) {
  const RowPtrs<block_q2_K, R> x(w, w_stride);
  const auto* y = static_cast<const block_q8_K*>(a);
  const uint8x16_t mul = vld1q_u8(kQ2Mul);
  float sum[R] = {};
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t msum[R];
    uint8x16_t s8[R];
    int32x4_t acc[R][2];
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const uint8x16_t packed = vld1q_u8(x.p[r][b].scales);
      const uint8x16_t mins = vshrq_n_u8(packed, 4);
      msum[r] = dot_bsums16(y[b].bsums, vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins))),
                            vreinterpretq_s16_u16(vmovl_high_u8(mins)));
      s8[r] = vmulq_u8(vandq_u8(packed, vdupq_n_u8(0x0F)), mul);  // <= 240
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    k23_half<D, 0, R>(x.p, b, nullptr, nullptr, y[b].qs, s8, acc);
    k23_half<D, 1, R>(x.p, b, nullptr, nullptr, y[b].qs, s8, acc);
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const float isum = float(vaddvq_s32(vaddq_s32(acc[r][0], acc[r][1]))) * (1.0f / 16.0f);
      sum[r] += y[b].d * (fp16_to_fp32(x.p[r][b].d) * isum - fp16_to_fp32(x.p[r][b].dmin) * float(msum[r]));
    }
  }
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) out[r] = sum[r];
}

// R rows of w: [n/256] block_q3_K each, a: [n/256] block_q8_K; out[r] = row r . a
template <class D, int R>
EDGELLM_NEON_INLINE void q3_K_q8_K_rows(int n, float* out, const void* w, size_t w_stride, const void* a) {
  const RowPtrs<block_q3_K, R> x(w, w_stride);
  const auto* y = static_cast<const block_q8_K*>(a);
  const int16x8_t mul = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(kQ2Mul)));  // same 8 multipliers twice
  float sum[R] = {};
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t corr[R];
    int16x8_t s_lo[R], s_hi[R];
    int32x4_t acc[R][2];
    uint8x16_t h0[R], h1[R];
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const int8x16_t s8 = unpack_scales_q3_K_neon(x.p[r][b].scales);
      s_lo[r] = vmovl_s8(vget_low_s8(s8));
      s_hi[r] = vmovl_high_s8(s8);
      corr[r] = dot_bsums16(y[b].bsums, s_lo[r], s_hi[r]);  // sum sc * bsum, times 4 below
      s_lo[r] = vmulq_s16(s_lo[r], mul);
      s_hi[r] = vmulq_s16(s_hi[r], mul);
      h0[r] = vld1q_u8(x.p[r][b].hmask);
      h1[r] = vld1q_u8(x.p[r][b].hmask + 16);
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    k23_half<D, 0, R>(x.p, b, h0, h1, y[b].qs, s_lo, acc);
    k23_half<D, 1, R>(x.p, b, h0, h1, y[b].qs, s_hi, acc);
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const int32_t isum16 = vaddvq_s32(vaddq_s32(acc[r][0], acc[r][1])) - 64 * corr[r];
      sum[r] += fp16_to_fp32(x.p[r][b].d) * y[b].d * (float(isum16) * (1.0f / 16.0f));
    }
  }
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) out[r] = sum[r];
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

// Chunk C (64 weights: sub-blocks 2C, 2C + 1) of every row; the 4 activation vectors are loaded
// once. q4_K: the low nibbles are sub-block 2C, the high ones 2C + 1. q5_K (kHigh) adds bit 2C of
// qh (h0 / h1) as bit 4 of the low nibble and bit 2C + 1 for the high one; sli/sri insert the
// nibble next to a prepared high bit.
template <class D, int C, int R, class B>
EDGELLM_NEON_INLINE void k4_chunk(const B* const x[R], int b, const uint8x16_t h0[R], const uint8x16_t h1[R],
                                  const int8_t* aq, const int32x4_t sc[R][2], int32x4_t acc[R][2]) {
  constexpr bool kHigh = std::is_same_v<B, block_q5_K>;
  const int8_t* a = aq + 64 * C;
  const int8x16_t y0 = vld1q_s8(a), y1 = vld1q_s8(a + 16), y2 = vld1q_s8(a + 32), y3 = vld1q_s8(a + 48);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1), b4 = vdupq_n_u8(0x10);
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) {
    const uint8x16_t q0 = vld1q_u8(x[r][b].qs + 32 * C), q1 = vld1q_u8(x[r][b].qs + 32 * C + 16);
    if constexpr (kHigh) {
      // low: (h bit at bit 0, nothing else in bits 0..3) << 4 | nibble
      const uint8x16_t l0 = vsliq_n_u8(q0, vandq_u8(shift_u8<-2 * C>(h0[r]), one), 4);
      const uint8x16_t l1 = vsliq_n_u8(q1, vandq_u8(shift_u8<-2 * C>(h1[r]), one), 4);
      // high: nibble >> 4 inserted below a byte holding only bit 4
      const uint8x16_t u0 = vsriq_n_u8(vandq_u8(shift_u8<3 - 2 * C>(h0[r]), b4), q0, 4);
      const uint8x16_t u1 = vsriq_n_u8(vandq_u8(shift_u8<3 - 2 * C>(h1[r]), b4), q1, 4);
      acc[r][0] = mla_sub32<D, 2 * C>(acc[r][0], l0, l1, y0, y1, sc[r]);
      acc[r][1] = mla_sub32<D, 2 * C + 1>(acc[r][1], u0, u1, y2, y3, sc[r]);
    } else {
      acc[r][0] = mla_sub32<D, 2 * C>(acc[r][0], vandq_u8(q0, m4), vandq_u8(q1, m4), y0, y1, sc[r]);
      acc[r][1] = mla_sub32<D, 2 * C + 1>(acc[r][1], vshrq_n_u8(q0, 4), vshrq_n_u8(q1, 4), y2, y3, sc[r]);
    }
  }
}

// R rows of w: [n/256] B (block_q4_K or block_q5_K) each, a: [n/256] block_q8_K; out[r] = row r . a
template <class B, class D, int R>
EDGELLM_NEON_INLINE void k4_q8_K_rows(int n, float* out, const void* w, size_t w_stride, const void* a) {
  constexpr bool kHigh = std::is_same_v<B, block_q5_K>;
  const RowPtrs<B, R> x(w, w_stride);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum[R] = {};
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t msum[R];
    int32x4_t sc[R][2], acc[R][2];
    uint8x16_t h0[R], h1[R];  // q5_K's fifth bits
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      msum[r] = k4_scales(x.p[r][b].scales, y[b].bsums, sc[r]);
      if constexpr (kHigh) {
        h0[r] = vld1q_u8(x.p[r][b].qh);
        h1[r] = vld1q_u8(x.p[r][b].qh + 16);
      }
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    k4_chunk<D, 0, R>(x.p, b, h0, h1, y[b].qs, sc, acc);
    k4_chunk<D, 1, R>(x.p, b, h0, h1, y[b].qs, sc, acc);
    k4_chunk<D, 2, R>(x.p, b, h0, h1, y[b].qs, sc, acc);
    k4_chunk<D, 3, R>(x.p, b, h0, h1, y[b].qs, sc, acc);
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const int32_t isum = vaddvq_s32(vaddq_s32(acc[r][0], acc[r][1]));
      sum[r] += y[b].d * (fp16_to_fp32(x.p[r][b].d) * float(isum) - fp16_to_fp32(x.p[r][b].dmin) * float(msum[r]));
    }
  }
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) out[r] = sum[r];
}

// ---- q6_K ----
// Unsigned 6-bit q (the -32 goes through bsums): sli puts qh's 2 bits above a low nibble, sri
// puts a high nibble below them; "& 0x3F" drops the neighbours' bits. Sub-blocks 8N + {0, 1, 4, 5}
// use ql[0..31] with qh as loaded, 8N + {2, 3, 6, 7} use ql[32..63] with qh >> 2 (Q = 0 / 1).
template <class D, int N, int Q, int R>
EDGELLM_NEON_INLINE void q6_K_quarter(const block_q6_K* const x[R], int b, const int8_t* aq, const int32x4_t sc[R][2],
                                      int32x4_t acc[R][2]) {
  const int8_t* a = aq + 128 * N + 32 * Q;
  const int8x16_t y0 = vld1q_s8(a), y1 = vld1q_s8(a + 16), y4 = vld1q_s8(a + 64), y5 = vld1q_s8(a + 80);
  const uint8x16_t m = vdupq_n_u8(0x3F);
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) {
    const uint8x16_t l0 = vld1q_u8(x[r][b].ql + 64 * N + 32 * Q), l1 = vld1q_u8(x[r][b].ql + 64 * N + 32 * Q + 16);
    uint8x16_t h0 = vld1q_u8(x[r][b].qh + 32 * N), h1 = vld1q_u8(x[r][b].qh + 32 * N + 16);
    if constexpr (Q == 1) {
      h0 = vshrq_n_u8(h0, 2);
      h1 = vshrq_n_u8(h1, 2);
    }
    acc[r][0] = mla_sub16<D, 2 * Q + 0>(acc[r][0], vandq_u8(vsliq_n_u8(l0, h0, 4), m), y0, sc[r]);
    acc[r][1] = mla_sub16<D, 2 * Q + 1>(acc[r][1], vandq_u8(vsliq_n_u8(l1, h1, 4), m), y1, sc[r]);
    acc[r][0] = mla_sub16<D, 2 * Q + 4>(acc[r][0], vandq_u8(vsriq_n_u8(h0, l0, 4), m), y4, sc[r]);
    acc[r][1] = mla_sub16<D, 2 * Q + 5>(acc[r][1], vandq_u8(vsriq_n_u8(h1, l1, 4), m), y5, sc[r]);
  }
}

// R rows of w: [n/256] block_q6_K each, a: [n/256] block_q8_K; out[r] = row r . a
template <class D, int R>
EDGELLM_NEON_INLINE void q6_K_q8_K_rows(int n, float* out, const void* w, size_t w_stride, const void* a) {
  const RowPtrs<block_q6_K, R> x(w, w_stride);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum[R] = {};
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t corr[R];
    int16x8_t s_hi[R];
    int32x4_t sc[R][2], acc[R][2];
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const int8x16_t s8 = vld1q_s8(x.p[r][b].scales);
      const int16x8_t s_lo = vmovl_s8(vget_low_s8(s8));
      s_hi[r] = vmovl_high_s8(s8);
      corr[r] = dot_bsums16(y[b].bsums, s_lo, s_hi[r]);  // times 32 below
      widen_scales8(s_lo, sc[r]);
      acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    }
    q6_K_quarter<D, 0, 0, R>(x.p, b, y[b].qs, sc, acc);
    q6_K_quarter<D, 0, 1, R>(x.p, b, y[b].qs, sc, acc);
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) widen_scales8(s_hi[r], sc[r]);
    q6_K_quarter<D, 1, 0, R>(x.p, b, y[b].qs, sc, acc);
    q6_K_quarter<D, 1, 1, R>(x.p, b, y[b].qs, sc, acc);
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r) {
      const int32_t isum = vaddvq_s32(vaddq_s32(acc[r][0], acc[r][1])) - 32 * corr[r];
      sum[r] += fp16_to_fp32(x.p[r][b].d) * y[b].d * float(isum);
    }
  }
  EDGELLM_NEON_UNROLL
  for (int r = 0; r < R; ++r) out[r] = sum[r];
}

// The row bodies above as one type per format, so one driver can handle any of them: KQ<B>::run<D, R>
// points at the R-row body of block type B (always inline, called directly).
template <class B, class D, int R>
constexpr auto kquant_rows_body() {
  if constexpr (std::is_same_v<B, block_q2_K>) return &q2_K_q8_K_rows<D, R>;
  else if constexpr (std::is_same_v<B, block_q3_K>) return &q3_K_q8_K_rows<D, R>;
  else if constexpr (std::is_same_v<B, block_q6_K>) return &q6_K_q8_K_rows<D, R>;
  else return &k4_q8_K_rows<B, D, R>;  // q4_K, q5_K
}
template <class B>
struct KQ {
  template <class D, int R>
  static constexpr auto run = kquant_rows_body<B, D, R>();
};
using KQ2 = KQ<block_q2_K>;
using KQ3 = KQ<block_q3_K>;
using KQ4 = KQ<block_q4_K>;
using KQ5 = KQ<block_q5_K>;
using KQ6 = KQ<block_q6_K>;

// Rows that share each activation load in the VecDotRowsFn kernels (register budget: R = 2 keeps
// scales, accumulators and activations of both rows in the 32 vector registers).
inline constexpr int kRowsKQuantNeon = 2;

// One row (VecDotFn body).
template <class K, class D>
EDGELLM_NEON_INLINE float kquant_row(int n, const void* w, const void* a) {
  float out;
  K::template run<D, 1>(n, &out, w, 0, a);
  return out;
}

// VecDotRowsFn body: groups of kRowsKQuantNeon rows, then the rows left over one at a time.
template <class K, class D>
EDGELLM_NEON_INLINE void kquant_rows(int n, float* out, int nrows, const void* w, size_t w_stride, const void* a) {
  constexpr int R = kRowsKQuantNeon;
  rows_by_groups<R>(
      nrows, out, w, w_stride,
      [&](float* o, const uint8_t* rw) EDGELLM_NEON_LAMBDA { K::template run<D, R>(n, o, rw, w_stride, a); },
      [&](float* o, const uint8_t* rw) EDGELLM_NEON_LAMBDA { K::template run<D, 1>(n, o, rw, w_stride, a); });
}
}  // namespace neon
}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
