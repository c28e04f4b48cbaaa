// NEON dot products of the legacy 32-weight formats (q4_0, q4_1, q5_0, q5_1, q8_0) against Q8_0
// activations (q4_1 / q5_1: Q8_1, as ggml): one body per shape (one row / four rows) templated on
// the format and on the int8 dot (neon/vdot.hpp), instantiated as *_neon (ARMv8.0) and *_dotprod.
// Semantics: kernels/scalar/dot.hpp.
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

// Signed quants of a q4_0 block times 16: low nibble of (q ^ 0x88) sign-extended is q - 8, so
// "<< 4" and "& 0xF0" give 16 * (q - 8) for both halves without a subtract. Caller scales by 1/16.
EDGELLM_NEON_INLINE void unpack_q4_0_x16(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) {
  const int8x16_t v = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(qs), vdupq_n_u8(0x88)));
  *lo = vshlq_n_s8(v, 4);
  *hi = vandq_s8(v, vdupq_n_s8(int8_t(0xF0)));
}

// 0xFF in byte j of lo (weights 0..15) / hi (16..31) where bit j / j + 16 of qh is set.
EDGELLM_NEON_INLINE void q5_high_masks(const uint8_t qh_bytes[4], uint8x16_t* lo, uint8x16_t* hi) {
  alignas(16) static const uint8_t kIdx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                               2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  alignas(16) static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8x16_t h = vreinterpretq_u8_u32(vdupq_n_u32(qh));
  const uint8x16_t bit = vld1q_u8(kBit);
  *lo = vtstq_u8(vqtbl1q_u8(h, vld1q_u8(kIdx)), bit);
  *hi = vtstq_u8(vqtbl1q_u8(h, vld1q_u8(kIdx + 16)), bit);
}

// Four F16 values as floats. Packed in a general register (scalar ops dual-issue on the A55)
// instead of four lane inserts into a vector register (one NEON slot each).
EDGELLM_NEON_INLINE float32x4_t half4_to_f32(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
  const uint64_t h = uint64_t(a) | uint64_t(b) << 16 | uint64_t(c) << 32 | uint64_t(d) << 48;
  return vcvt_f32_f16(vreinterpret_f16_u64(vcreate_u64(h)));
}

// [sum p0, sum p1, sum p2, sum p3]
EDGELLM_NEON_INLINE int32x4_t hsum4(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
  return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

// Per-format policies: dot<D>(x, y0, y1) = integer dot of block x with the activation halves
// y0 (weights 0..15) and y1 (16..31), spread over 4 lanes; kPost multiplies the final result
// (q4_0 works on 16 * q). Formats with a min (kMin) take Q8_1 activations (Act) and add m_w * s_a
// per block, s_a the activation block's scaled sum. kGroups:
// the cheap formats run eight blocks per step (llvm-mca: fewer stalls), the others four.
template <class B, class A, int kGroupsV>
struct LegacyFormat {
  using Block = B;
  using Act = A;
  static constexpr bool kMin = std::is_same_v<A, block_q8_1>;
  static constexpr float kPost = 1.0f;
  static constexpr int kGroups = kGroupsV;  // groups of four blocks per step in legacy_row
};

// The integer dot of a block's two halves of weights with the activation halves y0, y1.
template <class D>
EDGELLM_NEON_INLINE int32x4_t dot_halves(uint8x16_t lo, uint8x16_t hi, int8x16_t y0, int8x16_t y1) {
  return D::dot(D::dot0(vreinterpretq_s8_u8(lo), y0), vreinterpretq_s8_u8(hi), y1);
}

struct FmtQ4_0 : LegacyFormat<block_q4_0, block_q8_0, 2> {
  static constexpr float kPost = 1.0f / 16.0f;
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t dot(const Block& x, int8x16_t y0, int8x16_t y1) {
    int8x16_t lo, hi;
    unpack_q4_0_x16(x.qs, &lo, &hi);
    return D::dot(D::dot0(lo, y0), hi, y1);
  }
};

struct FmtQ4_1 : LegacyFormat<block_q4_1, block_q8_1, 1> {
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t dot(const Block& x, int8x16_t y0, int8x16_t y1) {
    const uint8x16_t q = vld1q_u8(x.qs);
    return dot_halves<D>(vandq_u8(q, vdupq_n_u8(0x0F)), vshrq_n_u8(q, 4), y0, y1);
  }
};

// q5_0: quants minus 16: low nibble | bit 4, i.e. nibble - 16 where the bit is clear; q5_1:
// nibble | bit 4.
template <class B, class A>
struct FmtQ5 : LegacyFormat<B, A, 1> {
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t dot(const B& x, int8x16_t y0, int8x16_t y1) {
    uint8x16_t mlo, mhi;
    q5_high_masks(x.qh, &mlo, &mhi);
    const uint8x16_t q = vld1q_u8(x.qs), b16 = vdupq_n_u8(0x10);
    if constexpr (FmtQ5::kMin) {
      return dot_halves<D>(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vandq_u8(b16, mlo)),
                           vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(b16, mhi)), y0, y1);
    } else {
      return dot_halves<D>(vsubq_u8(vandq_u8(q, vdupq_n_u8(0x0F)), vbicq_u8(b16, mlo)),
                           vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(b16, mhi)), y0, y1);
    }
  }
};
using FmtQ5_0 = FmtQ5<block_q5_0, block_q8_0>;
using FmtQ5_1 = FmtQ5<block_q5_1, block_q8_1>;

struct FmtQ8_0 : LegacyFormat<block_q8_0, block_q8_0, 2> {
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t dot(const Block& x, int8x16_t y0, int8x16_t y1) {
    return D::dot(D::dot0(vld1q_s8(x.qs), y0), vld1q_s8(x.qs + 16), y1);
  }
};

// The two F16 values that open each of four blocks (q4_1 / q5_1: d, m; Q8_1: d, s) as floats,
// first = [block 0 .. 3's first], second = [... second]: one 32-bit load per block, two widenings
// and two unzips, instead of eight 16-bit loads and their assembly (llvm-mca: q4_1 one row 176 ->
// 160 cycles per 256 weights).
static_assert(offsetof(block_q4_1, m) == 2 && offsetof(block_q5_1, m) == 2 && offsetof(block_q8_1, s) == 2,
              "half_pairs4 reads d and m / s as one 32-bit word");
template <class B>
EDGELLM_NEON_INLINE void half_pairs4(const B& b0, const B& b1, const B& b2, const B& b3, float32x4_t* first,
                                     float32x4_t* second) {
  uint32_t w0, w1, w2, w3;
  std::memcpy(&w0, &b0, 4);
  std::memcpy(&w1, &b1, 4);
  std::memcpy(&w2, &b2, 4);
  std::memcpy(&w3, &b3, 4);
  const uint64x2_t v = vcombine_u64(vcreate_u64(uint64_t(w0) | uint64_t(w1) << 32),
                                    vcreate_u64(uint64_t(w2) | uint64_t(w3) << 32));
  const float16x8_t h = vreinterpretq_f16_u64(v);  // d0 m0 d1 m1 | d2 m2 d3 m3
  const float32x4_t lo = vcvt_f32_f16(vget_low_f16(h)), hi = vcvt_high_f32_f16(h);
  *first = vuzp1q_f32(lo, hi);
  *second = vuzp2q_f32(lo, hi);
}

// acc (+ accm) += four blocks x[0..3] . y[0..3], scales applied as one vector (one convert, one
// fma for four blocks: the A55 is in-order and single-issues 128-bit NEON ops).
template <class F, class D>
EDGELLM_NEON_INLINE void legacy_group4(const typename F::Block* x, const typename F::Act* y, float32x4_t* acc,
                                       float32x4_t* accm) {
  int32x4_t p[4];
  for (int i = 0; i < 4; ++i) p[i] = F::template dot<D>(x[i], vld1q_s8(y[i].qs), vld1q_s8(y[i].qs + 16));
  float32x4_t dx, dy;
  if constexpr (F::kMin) {
    float32x4_t mx, sy;
    half_pairs4(x[0], x[1], x[2], x[3], &dx, &mx);
    half_pairs4(y[0], y[1], y[2], y[3], &dy, &sy);
    *accm = vfmaq_f32(*accm, mx, sy);
  } else {
    dy = half4_to_f32(y[0].d, y[1].d, y[2].d, y[3].d);
    dx = half4_to_f32(x[0].d, x[1].d, x[2].d, x[3].d);
  }
  *acc = vfmaq_f32(*acc, vcvtq_f32_s32(hsum4(p[0], p[1], p[2], p[3])), vmulq_f32(dx, dy));
}

// One weight row: w [n/32] F::Block, a [n/32] F::Act. G groups of four blocks per step
// (more independent work for the in-order schedule), then groups of four, then single blocks.
template <class F, class D, int G = F::kGroups>
EDGELLM_NEON_INLINE float legacy_row(int n, const void* w, const void* a) {
  const auto* x = static_cast<const typename F::Block*>(w);
  const auto* y = static_cast<const typename F::Act*>(a);
  const int nb = n / QK8_0;
  float32x4_t acc[G], accm[G];
  for (int g = 0; g < G; ++g) acc[g] = accm[g] = vdupq_n_f32(0.0f);
  int b = 0;
  for (; b + 4 * G <= nb; b += 4 * G)
    for (int g = 0; g < G; ++g) legacy_group4<F, D>(x + b + 4 * g, y + b + 4 * g, &acc[g], &accm[g]);
  for (; b + 4 <= nb; b += 4) legacy_group4<F, D>(x + b, y + b, &acc[0], &accm[0]);
  float sum = 0.0f, summ = 0.0f;
  for (; b < nb; ++b) {
    const int32x4_t p = F::template dot<D>(x[b], vld1q_s8(y[b].qs), vld1q_s8(y[b].qs + 16));
    sum += float(vaddvq_s32(p)) * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
    if constexpr (F::kMin) summ += fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  for (int g = 1; g < G; ++g) {
    acc[0] = vaddq_f32(acc[0], acc[g]);
    accm[0] = vaddq_f32(accm[0], accm[g]);
  }
  return (vaddvq_f32(acc[0]) + sum) * F::kPost + (vaddvq_f32(accm[0]) + summ);
}

// Four weight rows (w, w + w_stride, ...) against one activation row, out[0..3]: each activation
// load serves four rows, and the four rows' block sums share one scale vector (lane r = row r).
// Two blocks per step give the in-order core independent work between a load and its use.
template <class F, class D>
EDGELLM_NEON_INLINE void legacy_rows4_block(const typename F::Block* const x[4], const typename F::Act& y, int b,
                                            float32x4_t* acc, float32x4_t* accm) {
  const int8x16_t y0 = vld1q_s8(y.qs), y1 = vld1q_s8(y.qs + 16);
  const int32x4_t p0 = F::template dot<D>(x[0][b], y0, y1), p1 = F::template dot<D>(x[1][b], y0, y1);
  const int32x4_t p2 = F::template dot<D>(x[2][b], y0, y1), p3 = F::template dot<D>(x[3][b], y0, y1);
  const float dy = fp16_to_fp32(y.d);
  float32x4_t dx;
  if constexpr (F::kMin) {
    float32x4_t mx;
    half_pairs4(x[0][b], x[1][b], x[2][b], x[3][b], &dx, &mx);
    *accm = vfmaq_n_f32(*accm, mx, fp16_to_fp32(y.s));
  } else {
    dx = half4_to_f32(x[0][b].d, x[1][b].d, x[2][b].d, x[3][b].d);
  }
  *acc = vfmaq_f32(*acc, vcvtq_f32_s32(hsum4(p0, p1, p2, p3)), vmulq_n_f32(dx, dy));
}

template <class F, class D>
EDGELLM_NEON_INLINE void legacy_rows4(int n, float* out, const void* w, size_t w_stride, const void* a) {
  using B = typename F::Block;
  const auto* base = static_cast<const uint8_t*>(w);
  const B* const x[4] = {reinterpret_cast<const B*>(base), reinterpret_cast<const B*>(base + w_stride),
                         reinterpret_cast<const B*>(base + 2 * w_stride),
                         reinterpret_cast<const B*>(base + 3 * w_stride)};
  const auto* y = static_cast<const typename F::Act*>(a);
  const int nb = n / QK8_0;
  float32x4_t acc0 = vdupq_n_f32(0.0f), accm0 = acc0, acc1 = acc0, accm1 = acc0;
  int b = 0;
  for (; b + 2 <= nb; b += 2) {
    legacy_rows4_block<F, D>(x, y[b], b, &acc0, &accm0);
    legacy_rows4_block<F, D>(x, y[b + 1], b + 1, &acc1, &accm1);
  }
  if (b < nb) legacy_rows4_block<F, D>(x, y[b], b, &acc0, &accm0);
  vst1q_f32(out, vfmaq_n_f32(vaddq_f32(accm0, accm1), vaddq_f32(acc0, acc1), F::kPost));
}

// Rows per VecDotRowsFn group (legacy_rows4).
inline constexpr int kRowsLegacyNeon = 4;

// VecDotRowsFn body: groups of four rows, then the rows left over one at a time.
template <class F, class D>
EDGELLM_NEON_INLINE void legacy_rows(int n, float* out, int nrows, const void* w, size_t w_stride, const void* a) {
  rows_by_groups<kRowsLegacyNeon>(
      nrows, out, w, w_stride,
      [&](float* o, const uint8_t* rw) EDGELLM_NEON_LAMBDA { legacy_rows4<F, D>(n, o, rw, w_stride, a); },
      [&](float* o, const uint8_t* rw) EDGELLM_NEON_LAMBDA { *o = legacy_row<F, D>(n, rw, a); });
}
}  // namespace neon
}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
