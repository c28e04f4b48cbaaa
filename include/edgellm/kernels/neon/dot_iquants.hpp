// NEON dot products of the i-quants and ternary types against Q8_K activations (IQ4_NL: Q8_0), one
// body per format templated on the int8 dot (neon/vdot.hpp), instantiated as *_neon (ARMv8.0) and
// *_dotprod. Semantics: vec_dot_*_ref in kernels/scalar/dot_iquants.hpp (ggml's generic order).
// Every kernel sums a super-block's integer products exactly (int32, scales applied) and then does
// the reference's float steps on that sum; only IQ4_XS / IQ4_NL combine sub-blocks in another float
// order than the reference (tolerance in the tests).
//
// Codebook indexes are taken apart in general registers (the A55 pairs integer ops with the
// loads); 8-byte points are loaded as two 64-bit halves, 4-byte points by lane loads; signs are
// applied as a multiply by a +-1 byte pattern looked up per 8 weights (kSignsPm1 / kEvenSignsPm1,
// built at compile time from the 8-bit sign masks). Sub-blocks go four at a time (acc_sub32 /
// acc_sub16). llvm-mca cycles against llama.cpp's kernels: docs/PERF.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "edgellm/config.hpp"
#include "edgellm/kernels/neon/dot_legacy.hpp"
#include "edgellm/kernels/neon/vdot.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/iq_tables.hpp"

#if EDGELLM_HAS_NEON
namespace edgellm {
namespace neon {

// Byte j of kSignsPm1[s] is -1 where bit j of s is set, else +1 (as uint64,
// little-endian).
inline constexpr IqGrid<uint64_t, 256> kSignsPm1 = [] {
  IqGrid<uint64_t, 256> g{};
  for (uint32_t s = 0; s < 256; ++s)
    for (int j = 0; j < 8; ++j) g.v[s] |= uint64_t((s >> j) & 1 ? 0xFF : 0x01) << (8 * j);
  return g;
}();
// The same for the 128 even-parity masks of ksigns_iq2xs (index: the 7 stored
// sign bits).
inline constexpr IqGrid<uint64_t, 128> kEvenSignsPm1 = [] {
  IqGrid<uint64_t, 128> g{};
  for (uint32_t i = 0; i < 128; ++i) g.v[i] = kSignsPm1.v[ksigns_iq2xs.v[i]];
  return g;
}();

// Two 8-byte table entries as one vector.
EDGELLM_NEON_INLINE int8x16_t load_pair_u64(const uint64_t* a, const uint64_t* b) {
  return vreinterpretq_s8_u64(vcombine_u64(vld1_u64(a), vld1_u64(b)));
}
// Four 4-byte table entries as one vector, assembled in general registers.
EDGELLM_NEON_INLINE int8x16_t load_quad_u32(const uint32_t* g, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
  uint32x4_t v = vld1q_dup_u32(g + i0);  // lane loads: no general-register assembly, no vector inserts
  v = vld1q_lane_u32(g + i1, v, 1);
  v = vld1q_lane_u32(g + i2, v, 2);
  v = vld1q_lane_u32(g + i3, v, 3);
  return vreinterpretq_s8_u32(v);
}
// Codebook vector times the +-1 sign vector.
EDGELLM_NEON_INLINE int8x16_t apply_signs(int8x16_t grid, int8x16_t pm1) { return vmulq_s8(grid, pm1); }
// The +-1 vector of 16 weights from two 7-bit even-parity sign fields (bits 14 H .. 14 H + 13 of sg).
template <int H>
EDGELLM_NEON_INLINE int8x16_t even_signs16(uint32_t sg) {
  const uint64_t* s = kEvenSignsPm1.v;
  return load_pair_u64(s + ((sg >> (14 * H)) & 127), s + ((sg >> (14 * H + 7)) & 127));
}
// The same from two sign bytes (bytes 2 H and 2 H + 1 of sg).
template <int H>
EDGELLM_NEON_INLINE int8x16_t byte_signs16(uint32_t sg) {
  const uint64_t* s = kSignsPm1.v;
  return load_pair_u64(s + ((sg >> (16 * H)) & 0xFF), s + ((sg >> (16 * H + 8)) & 0xFF));
}

// Four independent int8 dot chains: p[k] = a[k] . b[k] (fresh) or p[k] += a[k] . b[k] (add), k < 4.
// With sdot under g++ one asm statement issues them round-robin (fresh zeroes its own outputs, so no
// register copies): g++ 12's A55 model has no sdot latency and otherwise puts each chain's sdots
// back to back (4-cycle stalls; see sdot_4chains). llvm-mca: IQ4_XS 157 -> 127 cycles per 256 weights.
template <class D>
struct Dot4 {
  static EDGELLM_NEON_INLINE void fresh(int32x4_t p[4], const int8x16_t a[4], const int8x16_t b[4]) {
    for (int k = 0; k < 4; ++k) p[k] = D::dot0(a[k], b[k]);
  }
  static EDGELLM_NEON_INLINE void add(int32x4_t p[4], const int8x16_t a[4], const int8x16_t b[4]) {
    for (int k = 0; k < 4; ++k) p[k] = D::dot(p[k], a[k], b[k]);
  }
};
#if !defined(__clang__)
// The asm text and inputs of Dot4<DotSdot>: p[k] (operand k) += a[k] (4 + k) . b[k] (8 + k).
#define EDGELLM_DOT4_SDOTS                \
  "sdot %0.4s, %4.16b, %8.16b\n\t"         \
  "sdot %1.4s, %5.16b, %9.16b\n\t"         \
  "sdot %2.4s, %6.16b, %10.16b\n\t"        \
  "sdot %3.4s, %7.16b, %11.16b"
#define EDGELLM_DOT4_INPUTS "w"(a[0]), "w"(a[1]), "w"(a[2]), "w"(a[3]), "w"(b[0]), "w"(b[1]), "w"(b[2]), "w"(b[3])
template <>
struct Dot4<DotSdot> {
  static EDGELLM_NEON_INLINE void add(int32x4_t p[4], const int8x16_t a[4], const int8x16_t b[4]) {
    __asm__(EDGELLM_DOT4_SDOTS : "+w"(p[0]), "+w"(p[1]), "+w"(p[2]), "+w"(p[3]) : EDGELLM_DOT4_INPUTS);
  }
  static EDGELLM_NEON_INLINE void fresh(int32x4_t p[4], const int8x16_t a[4], const int8x16_t b[4]) {
    __asm__("movi %0.4s, #0\n\tmovi %1.4s, #0\n\tmovi %2.4s, #0\n\tmovi %3.4s, #0\n\t" EDGELLM_DOT4_SDOTS
            : "=&w"(p[0]), "=&w"(p[1]), "=&w"(p[2]), "=&w"(p[3])
            : EDGELLM_DOT4_INPUTS);
  }
};
#undef EDGELLM_DOT4_INPUTS
#undef EDGELLM_DOT4_SDOTS
#endif

template <int... I, class F>
EDGELLM_NEON_INLINE void for_each_sub(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// Sum over the 8 sub-blocks of 32 weights of scale * (w0 . y0 + w1 . y1), left in the lanes of
// one vector: weights(IB, w0, w1) gives sub-block IB's two weight vectors, its scale is lane
// IB % 4 of sc[IB / 4]. Four sub-blocks per step: their sums in one vector (addp tree), one
// multiply-add by the scale vector.
template <class D, class W>
EDGELLM_NEON_INLINE int32x4_t acc_sub32(const int8_t* q8, const int32x4_t sc[2], W&& weights) {
  int32x4_t acc = vdupq_n_s32(0);
  for_each_sub(std::make_integer_sequence<int, 2>{}, [&](auto h) EDGELLM_NEON_LAMBDA {
    constexpr int H = decltype(h)::value;
    int8x16_t w0[4], w1[4], y0[4], y1[4];
    for_each_sub(std::make_integer_sequence<int, 4>{}, [&](auto k) EDGELLM_NEON_LAMBDA {
      constexpr int IB = 4 * H + decltype(k)::value;
      weights(std::integral_constant<int, IB>{}, w0[IB % 4], w1[IB % 4]);
      y0[IB % 4] = vld1q_s8(q8 + 32 * IB);
      y1[IB % 4] = vld1q_s8(q8 + 32 * IB + 16);
    });
    int32x4_t p[4];
    Dot4<D>::fresh(p, w0, y0);
    Dot4<D>::add(p, w1, y1);
    acc = vmlaq_s32(acc, hsum4(p[0], p[1], p[2], p[3]), sc[H]);
  });
  return acc;
}
// The same with a scale per 16 weights: scale of (IB, half j) in lane (2 IB +
// j) % 4 of sc[IB / 2].
template <class D, class W>
EDGELLM_NEON_INLINE int32x4_t acc_sub16(const int8_t* q8, const int32x4_t sc[4], W&& weights) {
  int32x4_t acc = vdupq_n_s32(0);
  for_each_sub(std::make_integer_sequence<int, 4>{}, [&](auto q) EDGELLM_NEON_LAMBDA {
    constexpr int Q = decltype(q)::value;
    int8x16_t w[4], y[4];
    weights(std::integral_constant<int, 2 * Q>{}, w[0], w[1]);
    weights(std::integral_constant<int, 2 * Q + 1>{}, w[2], w[3]);
    for (int k = 0; k < 4; ++k) y[k] = vld1q_s8(q8 + 64 * Q + 16 * k);
    int32x4_t p[4];
    Dot4<D>::fresh(p, w, y);
    acc = vmlaq_s32(acc, hsum4(p[0], p[1], p[2], p[3]), sc[Q]);
  });
  return acc;
}

// 8 bytes (one per 32-weight sub-block) -> two int32x4 (lanes for
// vmlaq_laneq_s32).
EDGELLM_NEON_INLINE void widen_u8x8(uint8x8_t s, int32x4_t sc[2]) {
  const uint16x8_t s16 = vmovl_u8(s);
  sc[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s16)));
  sc[1] = vreinterpretq_s32_u32(vmovl_high_u16(s16));
}
// 4 bytes of two 4-bit scales s each (sub-block order: low nibble of byte 0, high nibble of byte 0,
// low of byte 1, ...) -> the 8 scales 2 s + 1 as two int32x4 (IQ3_S and the transcoded forms).
EDGELLM_NEON_INLINE void odd_nibble_scales8(const uint8_t* scales, int32x4_t sc[2]) {
  uint32_t sw;
  std::memcpy(&sw, scales, 4);
  const uint8x8_t b = vcreate_u8(uint64_t(sw) * 0x100000001ull);
  const uint8x8_t nib = vzip1_u8(vand_u8(b, vdup_n_u8(0x0F)), vshr_n_u8(b, 4));
  widen_u8x8(vsli_n_u8(vdup_n_u8(1), nib, 1), sc);
}
// 8 bytes of two 4-bit scales each (low nibble first) -> 16 scales 2 s + 1 as
// four int32x4.
EDGELLM_NEON_INLINE void nibble_scales16(const uint8_t* p, int32x4_t sc[4]) {
  const uint8x8_t b = vld1_u8(p);
  const uint8x16_t s = vcombine_u8(vzip1_u8(vand_u8(b, vdup_n_u8(0x0F)), vshr_n_u8(b, 4)),
                                   vzip2_u8(vand_u8(b, vdup_n_u8(0x0F)), vshr_n_u8(b, 4)));
  const uint8x16_t ls = vsliq_n_u8(vdupq_n_u8(1), s, 1);  // 2 s + 1
  const uint16x8_t lo = vmovl_u8(vget_low_u8(ls)), hi = vmovl_high_u8(ls);
  sc[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo)));
  sc[1] = vreinterpretq_s32_u32(vmovl_high_u16(lo));
  sc[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi)));
  sc[3] = vreinterpretq_s32_u32(vmovl_high_u16(hi));
}

// One row of super-block format T (kScaledSum: T::block_acc leaves the block's integer sum in the
// lanes of a vector) against Q8_K: the sum over blocks of d_w * d_a * that sum, times T::kPost
// (ggml's final 0.125 / 0.25).
template <class T, class D>
EDGELLM_NEON_INLINE float iq_row(int n, const void* w, const void* a) {
  const auto* x = static_cast<const typename T::Block*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sumf = 0.0f;
  for (int i = 0; i < n / QK_K; ++i)
    sumf += fp16_to_fp32(x[i].d) * y[i].d * float(vaddvq_s32(T::template block_acc<D>(x[i], y[i].qs)));
  return T::kPost * sumf;
}
// The same for any format, each block reduced, scaled and added (the reference's float steps, in
// its order) while the next one is decoded: its integer sums are left in vectors (T::block_acc's
// lanes, or for the formats without kScaledSum T::block's T::Part<D>, reduced by T::finish to the
// exact int32 sum or to the reference's float term before d_w * d_a). On the in-order A55 the
// reduction's dependent chain (adds, addv, convert, multiply-add) stalls the loop when it ends
// each block (llvm-mca cycles per block: docs/PERF.md; TQ1_0 116 -> 98 with dotprod, 156 -> 144
// on ARMv8.0).
template <class T, class D>
EDGELLM_NEON_INLINE auto deferred_part(const typename T::Block& x, const block_q8_K& y) {
  if constexpr (T::kScaledSum)
    return T::template block_acc<D>(x, y.qs);
  else
    return T::template block<D>(x, y);
}
template <class T, class D, class P>
EDGELLM_NEON_INLINE auto deferred_finish(const P& p) {
  if constexpr (T::kScaledSum)
    return vaddvq_s32(p);
  else
    return T::template finish<D>(p);
}
// d_w * d_a: T::scale where the format has one (IQ1_M's d is in its scales), else d * y.d.
template <class T, class = void>
struct HasScale : std::false_type {};
template <class T>
struct HasScale<T, std::void_t<decltype(&T::scale)>> : std::true_type {};
template <class T>
EDGELLM_NEON_INLINE float deferred_scale(const typename T::Block& x, const block_q8_K& y) {
  if constexpr (HasScale<T>::value)
    return T::scale(x, y);
  else
    return fp16_to_fp32(x.d) * y.d;
}
template <class T, class D>
EDGELLM_NEON_INLINE float deferred_row(int n, const void* w, const void* a) {
  const auto* x = static_cast<const typename T::Block*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  decltype(deferred_part<T, D>(x[0], y[0])) part{};  // all zero: the first step adds 0 * 0
  float sumf = 0.0f, scale = 0.0f;
  for (int i = 0; i < n / QK_K; ++i) {
    const auto next = deferred_part<T, D>(x[i], y[i]);
    sumf += float(deferred_finish<T, D>(part)) * scale;
    scale = deferred_scale<T>(x[i], y[i]);
    part = next;
  }
  return T::kPost * (sumf + float(deferred_finish<T, D>(part)) * scale);
}
// iq_row or deferred_row, as T::kDeferred<D> says: whichever the llvm-mca A55 model runs faster for
// that format and variant (deferring costs registers and moves; in some gathering loops that
// outweighs the stall it removes).
template <class T, class D>
EDGELLM_NEON_INLINE float picked_row(int n, const void* w, const void* a) {
  if constexpr (T::template kDeferred<D>)
    return deferred_row<T, D>(n, w, a);
  else
    return iq_row<T, D>(n, w, a);
}

// What iq_row / deferred_row read of a format: kScaledSum (T::block_acc leaves the block's integer
// sum in a vector's lanes, d_w * d_a times their sum; else T::block leaves a T::Part for
// T::finish), the block type, and kPost = 1 / PostDiv (ggml's final 0.125 / 0.25) on the row's sum.
// kDeferred<D> (picked_row, kScaledSum formats): which int8 dots run deferred_row, from Deferred:
// none, both, only DotSdot or only DotV80.
enum class Deferred { kNone, kBoth, kSdot, kV80 };
template <class B, bool ScaledSum, int PostDiv = 1, Deferred Def = Deferred::kNone>
struct IqFormat {
  static constexpr bool kScaledSum = ScaledSum;
  static constexpr float kPost = 1.0f / PostDiv;
  using Block = B;
  template <class D>
  static constexpr bool kDeferred = Def == Deferred::kBoth || (Def == Deferred::kSdot && std::is_same_v<D, DotSdot>) ||
                                    (Def == Deferred::kV80 && std::is_same_v<D, DotV80>);
};

// ---- IQ2_XXS: per 32 weights a 64-bit word: 4 grid indexes (bytes 0..3), 4 x
// 7 sign bits, 4-bit scale.
struct IQ2XXS : IqFormat<block_iq2_xxs, true, 8, Deferred::kBoth> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 200 -> 194, ARMv8.0 228 -> 220
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    // Scales 2 s + 1 from the top nibble of each odd 32-bit word: (w >> 27)
    // | 1.
    const uint32x4_t a0 = vreinterpretq_u32_u16(vld1q_u16(x.qs)), a1 = vreinterpretq_u32_u16(vld1q_u16(x.qs + 8));
    const uint32x4_t a2 = vreinterpretq_u32_u16(vld1q_u16(x.qs + 16)), a3 = vreinterpretq_u32_u16(vld1q_u16(x.qs + 24));
    const int32x4_t sc[2] = {vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(vuzp2q_u32(a0, a1), 27), vdupq_n_u32(1))),
                             vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(vuzp2q_u32(a2, a3), 27), vdupq_n_u32(1)))};
    const uint64_t* g = iq2xxs_grid.v;
    return acc_sub32<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint64_t q;
      std::memcpy(&q, x.qs + 4 * IB, 8);
      const uint32_t sg = uint32_t(q >> 32);
      w0 = apply_signs(load_pair_u64(g + (q & 0xFF), g + ((q >> 8) & 0xFF)), even_signs16<0>(sg));
      w1 = apply_signs(load_pair_u64(g + ((q >> 16) & 0xFF), g + ((q >> 24) & 0xFF)), even_signs16<1>(sg));
    });
  }
};

// ---- IQ2_XS: per 8 weights a uint16 (9-bit grid index, 7 sign bits); a 4-bit
// scale per 16.
struct IQ2XS : IqFormat<block_iq2_xs, true, 8, Deferred::kSdot> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 228 -> 212, ARMv8.0 237 -> 242
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    int32x4_t sc[4];
    nibble_scales16(x.scales, sc);
    const uint64_t* g = iq2xs_grid.v;
    const uint64_t* s = kEvenSignsPm1.v;
    return acc_sub16<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint64_t q;
      std::memcpy(&q, x.qs + 4 * IB, 8);
      const uint32_t q0 = uint32_t(q) & 0xFFFF, q1 = uint32_t(q >> 16) & 0xFFFF, q2 = uint32_t(q >> 32) & 0xFFFF,
                     q3 = uint32_t(q >> 48);
      w0 = apply_signs(load_pair_u64(g + (q0 & 511), g + (q1 & 511)), load_pair_u64(s + (q0 >> 9), s + (q1 >> 9)));
      w1 = apply_signs(load_pair_u64(g + (q2 & 511), g + (q3 & 511)), load_pair_u64(s + (q2 >> 9), s + (q3 >> 9)));
    });
  }
};

// ---- IQ2_S: 10-bit grid indexes (low byte in qs, 2 high bits per 8 weights in
// qh), sign bytes (second half of qs), a 4-bit scale per 16.
struct IQ2S : IqFormat<block_iq2_s, true, 8, Deferred::kV80> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 268 -> 270, ARMv8.0 290 -> 287
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    int32x4_t sc[4];
    nibble_scales16(x.scales, sc);
    const uint64_t* g = iq2s_grid.v;
    const uint8_t* signs = x.qs + QK_K / 8;
    return acc_sub16<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint32_t qs, sg;
      std::memcpy(&qs, x.qs + 4 * IB, 4);
      std::memcpy(&sg, signs + 4 * IB, 4);
      const uint32_t h = x.qh[IB];
      const uint32_t i0 = (qs & 0xFF) | ((h << 8) & 0x300), i1 = ((qs >> 8) & 0xFF) | ((h << 6) & 0x300);
      const uint32_t i2 = ((qs >> 16) & 0xFF) | ((h << 4) & 0x300), i3 = (qs >> 24) | ((h << 2) & 0x300);
      w0 = apply_signs(load_pair_u64(g + i0, g + i1), byte_signs16<0>(sg));
      w1 = apply_signs(load_pair_u64(g + i2, g + i3), byte_signs16<1>(sg));
    });
  }
};

// ---- IQ3_XXS: 8-bit indexes of 4-weight points (64 bytes), then per 32
// weights a 32-bit word of 4 x 7 sign bits and a 4-bit scale.
struct IQ3XXS : IqFormat<block_iq3_xxs, true, 4, Deferred::kNone> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 263 -> 273, ARMv8.0 296 -> 302
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    const uint8_t* gas = x.qs + QK_K / 4;
    const uint32x4_t a0 = vreinterpretq_u32_u8(vld1q_u8(gas)), a1 = vreinterpretq_u32_u8(vld1q_u8(gas + 16));
    const int32x4_t sc[2] = {vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(a0, 27), vdupq_n_u32(1))),
                             vreinterpretq_s32_u32(vorrq_u32(vshrq_n_u32(a1, 27), vdupq_n_u32(1)))};
    const uint32_t* g = iq3xxs_grid.v;
    return acc_sub32<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint64_t q;  // the sub-block's 8 indexes (one 64-bit load, bytes taken in general registers)
      std::memcpy(&q, x.qs + 8 * IB, 8);
      uint32_t sg;
      std::memcpy(&sg, gas + 4 * IB, 4);
      w0 = apply_signs(load_quad_u32(g, q & 0xFF, (q >> 8) & 0xFF, (q >> 16) & 0xFF, (q >> 24) & 0xFF),
                       even_signs16<0>(sg));
      w1 = apply_signs(load_quad_u32(g, (q >> 32) & 0xFF, (q >> 40) & 0xFF, (q >> 48) & 0xFF, q >> 56),
                       even_signs16<1>(sg));
    });
  }
};

// ---- IQ3_S: 9-bit indexes of 4-weight points (low byte in qs, high bit per
// point in qh), sign bytes, a 4-bit scale per 32.
struct IQ3S : IqFormat<block_iq3_s, true, 1, Deferred::kBoth> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 389 -> 372, ARMv8.0 418 -> 415
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    int32x4_t sc[2];
    odd_nibble_scales8(x.scales, sc);
    const uint32_t* g = iq3s_grid.v;
    return acc_sub32<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint64_t q;  // the sub-block's 8 low index bytes (one 64-bit load)
      std::memcpy(&q, x.qs + 8 * IB, 8);
      const uint32_t h = x.qh[IB];
      uint32_t sg;
      std::memcpy(&sg, x.signs + 4 * IB, 4);
      // index k: byte k of q, bit k of h as bit 8
      auto idx = [&](int k) EDGELLM_NEON_LAMBDA { return uint32_t((q >> (8 * k)) & 0xFF) | ((h << (8 - k)) & 256); };
      w0 = apply_signs(load_quad_u32(g, idx(0), idx(1), idx(2), idx(3)), byte_signs16<0>(sg));
      w1 = apply_signs(load_quad_u32(g, idx(4), idx(5), idx(6), idx(7)), byte_signs16<1>(sg));
    });
  }
};

// ---- IQ1_S: 11-bit indexes of 8-weight ternary points; per 32 weights a
// uint16: 4 x 3 high index bits, a 3-bit scale, the sign of the IQ1S_DELTA
// shift (that part goes through bsums).
struct IQ1S : IqFormat<block_iq1_s, false> {
  // sumi's and sumi1's lanes
  template <class D>
  struct Part {
    int32x4_t sumi, sumi1;
  };
  template <class D>
  static EDGELLM_NEON_INLINE float finish(const Part<D>& p) {
    return float(vaddvq_s32(p.sumi)) + IQ1S_DELTA * float(vaddvq_s32(p.sumi1));
  }
  template <class D>
  static EDGELLM_NEON_INLINE Part<D> block(const Block& x, const block_q8_K& y) {
    const uint16x8_t qh = vld1q_u16(x.qh);
    const uint16x8_t ls = vorrq_u16(vandq_u16(vshrq_n_u16(qh, 11), vdupq_n_u16(0xE)),
                                    vdupq_n_u16(1));  // 2 s + 1
    int32x4_t sc[2] = {vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(ls))), vreinterpretq_s32_u32(vmovl_high_u16(ls))};
    // sumi1 = sum over sub-blocks of ls * delta * (its two bsums)
    const int16x8_t neg = vshrq_n_s16(vreinterpretq_s16_u16(qh),
                                      15);  // -1 where the shift is negative
    const int16x8_t lsd = vsubq_s16(veorq_s16(vreinterpretq_s16_u16(ls), neg), neg);
    const int16x8_t bs = vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
    const int32x4_t sumi1 = vmlal_high_s16(vmull_s16(vget_low_s16(bs), vget_low_s16(lsd)), bs, lsd);
    const uint64_t* g = iq1s_grid.v;
    const int32x4_t sumi = acc_sub32<D>(y.qs, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint32_t qs;
      std::memcpy(&qs, x.qs + 4 * IB, 4);
      const uint32_t h = x.qh[IB];
      w0 = load_pair_u64(g + ((qs & 0xFF) | ((h << 8) & 0x700)), g + (((qs >> 8) & 0xFF) | ((h << 5) & 0x700)));
      w1 = load_pair_u64(g + (((qs >> 16) & 0xFF) | ((h << 2) & 0x700)), g + ((qs >> 24) | ((h >> 1) & 0x700)));
    });
    return {sumi, sumi1};
  }
};

// ---- IQ1_M: as IQ1_S with the shift sign per 8 weights (bit 3 / 7 of a qh
// byte) and a 3-bit scale per 16. The weights are built as 8 q + delta (in [-9,
// 9]): their dot is 8 sumi1 + sumi2 exactly, and (8 sumi1 + sumi2) / 8 is the
// reference's sumi1 + IQ1M_DELTA * sumi2, exact in float.
struct IQ1M : IqFormat<block_iq1_m, false> {
  template <class D>
  using Part = int32x4_t;
  template <class D>
  static EDGELLM_NEON_INLINE float finish(int32x4_t p) {
    return float(vaddvq_s32(p)) * IQ1M_DELTA;  // = sumi1 + IQ1M_DELTA * sumi2, exactly
  }
  // d_w * d_a, d_w from the top nibbles of the four scale words
  static EDGELLM_NEON_INLINE float scale(const Block& x, const block_q8_K& y) {
    uint16_t sc16[4];
    std::memcpy(sc16, x.scales, 8);
    const uint16_t d16 =
        uint16_t((sc16[0] >> 12) | ((sc16[1] >> 8) & 0x00F0) | ((sc16[2] >> 4) & 0x0F00) | (sc16[3] & 0xF000));
    return fp16_to_fp32(d16) * y.d;
  }
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block(const Block& x, const block_q8_K& y) {
    uint16_t sc16[4];
    std::memcpy(sc16, x.scales, 8);
    // scale k (16 weights, k = 0..15) = 2 * field k + 1, field k = bits 3 (k %
    // 4) of word k / 4
    static const int32_t kShift[4] = {1, -2, -5, -8};
    const int32x4_t shift = vld1q_s32(kShift);
    const uint32x4_t words = vmovl_u16(vld1_u16(sc16));
    int32x4_t sc[4];
    sc[0] = vreinterpretq_s32_u32(
        vorrq_u32(vandq_u32(vshlq_u32(vdupq_laneq_u32(words, 0), shift), vdupq_n_u32(0xE)), vdupq_n_u32(1)));
    sc[1] = vreinterpretq_s32_u32(
        vorrq_u32(vandq_u32(vshlq_u32(vdupq_laneq_u32(words, 1), shift), vdupq_n_u32(0xE)), vdupq_n_u32(1)));
    sc[2] = vreinterpretq_s32_u32(
        vorrq_u32(vandq_u32(vshlq_u32(vdupq_laneq_u32(words, 2), shift), vdupq_n_u32(0xE)), vdupq_n_u32(1)));
    sc[3] = vreinterpretq_s32_u32(
        vorrq_u32(vandq_u32(vshlq_u32(vdupq_laneq_u32(words, 3), shift), vdupq_n_u32(0xE)), vdupq_n_u32(1)));
    static const uint8_t kDeltaBit[16] = {8, 8, 8, 8, 8, 8, 8, 8, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
    const uint8x16_t dbit = vld1q_u8(kDeltaBit);
    const uint8x16_t qhv = vld1q_u8(x.qh);
    const uint64_t* g = iq1s_grid.v;
    return acc_sub16<D>(y.qs, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      uint32_t qs;
      std::memcpy(&qs, x.qs + 4 * IB, 4);
      const uint32_t h0 = x.qh[2 * IB], h1 = x.qh[2 * IB + 1];
      const int8x16_t g0 =
          load_pair_u64(g + ((qs & 0xFF) | ((h0 << 8) & 0x700)), g + (((qs >> 8) & 0xFF) | ((h0 << 4) & 0x700)));
      const int8x16_t g1 =
          load_pair_u64(g + (((qs >> 16) & 0xFF) | ((h1 << 8) & 0x700)), g + ((qs >> 24) | ((h1 << 4) & 0x700)));
      // delta: -1 where the bit is set, else +1
      const int8x16_t d0 = vreinterpretq_s8_u8(vorrq_u8(vtstq_u8(vdupq_laneq_u8(qhv, 2 * IB), dbit), vdupq_n_u8(1)));
      const int8x16_t d1 =
          vreinterpretq_s8_u8(vorrq_u8(vtstq_u8(vdupq_laneq_u8(qhv, 2 * IB + 1), dbit), vdupq_n_u8(1)));
      w0 = vmlaq_s8(d0, g0, vdupq_n_s8(8));
      w1 = vmlaq_s8(d1, g1, vdupq_n_s8(8));
    });
  }
};

// ---- IQ4_XS: 4-bit indexes into kvalues_iq4nl (table lookup), a 6-bit scale -
// 32 per 32.
// The 8 scales of an IQ4_XS block (or iq4_xs_t's, the same header), sub-block ib in lane ib % 4 of
// sc[ib / 4]: low nibble ib of scales_l | bits 2 ib, 2 ib + 1 of scales_h << 4, - 32.
template <class B>
EDGELLM_NEON_INLINE void iq4_xs_scales(const B& x, int32x4_t sc[2]) {
  uint32_t sl;
  std::memcpy(&sl, x.scales_l, 4);
  const uint8x8_t b = vcreate_u8(uint64_t(sl) * 0x100000001ull);
  const uint8x8_t lo = vzip1_u8(vand_u8(b, vdup_n_u8(0x0F)), vshr_n_u8(b, 4));
  static const int16_t kShiftH[8] = {4, 2, 0, -2, -4, -6, -8, -10};
  const uint16x8_t hh = vandq_u16(vshlq_u16(vdupq_n_u16(x.scales_h), vld1q_s16(kShiftH)), vdupq_n_u16(0x30));
  const int16x8_t s16 = vsubq_s16(vreinterpretq_s16_u16(vorrq_u16(vmovl_u8(lo), hh)), vdupq_n_s16(32));
  sc[0] = vmovl_s16(vget_low_s16(s16));
  sc[1] = vmovl_high_s16(s16);
}
struct IQ4XS : IqFormat<block_iq4_xs, true, 1, Deferred::kSdot> {
  // Deferred (picked_row): llvm-mca cycles iq_row -> deferred_row, dotprod 127 -> 125, ARMv8.0 165 -> 165
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    const int8x16_t values = vld1q_s8(kvalues_iq4nl);
    int32x4_t sc[2];
    iq4_xs_scales(x, sc);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    return acc_sub32<D>(q8, sc, [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      constexpr int IB = decltype(ib)::value;
      const uint8x16_t q = vld1q_u8(x.qs + 16 * IB);
      w0 = vqtbl1q_s8(values, vandq_u8(q, m4));
      w1 = vqtbl1q_s8(values, vshrq_n_u8(q, 4));
    });
  }
};

// ---- IQ4_NL: a legacy-shaped 32-weight block (dot_legacy.hpp's row and
// four-row bodies).
struct FmtIQ4_NL : LegacyFormat<block_iq4_nl, block_q8_0, 2> {
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t dot(const Block& x, int8x16_t y0, int8x16_t y1) {
    const int8x16_t values = vld1q_s8(kvalues_iq4nl);
    const uint8x16_t q = vld1q_u8(x.qs);
    const int32x4_t p = D::dot0(vqtbl1q_s8(values, vandq_u8(q, vdupq_n_u8(0x0F))), y0);
    return D::dot(p, vqtbl1q_s8(values, vshrq_n_u8(q, 4)), y1);
  }
};
// IQ4_NL's one-row driver: legacy_row with four groups of four blocks per step under dotprod
// (llvm-mca: 166 -> 157 cycles per 256 weights), two on ARMv8.0.
template <class F, class D>
EDGELLM_NEON_INLINE float iq4_nl_row(int n, const void* w, const void* a) {
  return legacy_row<F, D, std::is_same_v<D, DotSdot> ? 4 : 2>(n, w, a);
}

// ---- TQ2_0: 2-bit fields q (weight q - 1), field l of byte j of each 32-byte
// half is weight 32 l + j. Field l is taken as q & (3 << 2l) (worth 4^l q; its
// own accumulator, shifted back exactly) and the -1 goes through bsums.
struct TQ2 : IqFormat<block_tq2_0, false> {
  // The four field accumulators and bsums[i] + bsums[i + 8].
  template <class D>
  struct Part {
    int32x4_t acc[4];
    int16x8_t bs;
  };
  template <class D>
  static EDGELLM_NEON_INLINE Part<D> block(const Block& x, const block_q8_K& y) {
    Part<D> r;
    for (int k = 0; k < 4; ++k) r.acc[k] = vdupq_n_s32(0);
    for (int j = 0; j < 2; ++j) {
      const uint8x16_t q0 = vld1q_u8(x.qs + 32 * j), q1 = vld1q_u8(x.qs + 32 * j + 16);
      const int8_t* a = y.qs + 128 * j;
      for_each_sub(std::make_integer_sequence<int, 2>{}, [&](auto half) EDGELLM_NEON_LAMBDA {
        const uint8x16_t q = decltype(half)::value ? q1 : q0;
        const int8x16_t w[4] = {
            vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x03))), vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0C))),
            vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x30))), vreinterpretq_s8_u8(vshrq_n_u8(q, 6))};
        const int o = 16 * decltype(half)::value;
        const int8x16_t v[4] = {vld1q_s8(a + o), vld1q_s8(a + 32 + o), vld1q_s8(a + 64 + o), vld1q_s8(a + 96 + o)};
        Dot4<D>::add(r.acc, w, v);
      });
    }
    r.bs = vaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));  // |sum| <= 16 * 128 * 2
    return r;
  }
  template <class D>
  static EDGELLM_NEON_INLINE int32_t finish(const Part<D>& p) {
    int32x4_t s = vaddq_s32(p.acc[0], p.acc[3]);
    s = vsraq_n_s32(s, p.acc[1], 2);
    s = vsraq_n_s32(s, p.acc[2], 4);
    return vaddvq_s32(s) - vaddlvq_s16(p.bs);
  }
};

// ---- TQ1_0: 5 trits per byte (qs) and 4 per byte (qh) in base 3, most
// significant first, as ggml's fixed point: with p_l = q * 3^l mod 256, trit l
// of byte q is (3 p_l) >> 8, and 3 p_l = 256 trit_l + p_{l+1}. Weight = trit - 1.
// Vector g of 16 weights (activations 16 g): g = 2 l + j (l < 5) is plane l of
// qs bytes 16 j .. 16 j + 15, g = 10 + l plane l of qs bytes 32..47, g = 15 the
// qh trits (plane l of byte j: weight 240 + 4 l + j, from qh * {1, 3, 9, 27}).
//
// dotprod, no trits decoded: s_l = (q ^ 0x80) * 3^l mod 256 read as int8 is
// p_l - 128 (3^l * 128 = 128 mod 256), so s_{l+1} = 3 s_l mod 256 and
// 3 s_l - s_{l+1} = 3 p_l - p_{l+1} - 256 = 256 (trit_l - 1). The block's sum is
// (3 T - T') / 256 exactly, T = sum of s_l . a_l, T' = sum of s_{l+1} . a_l: one
// multiply and two sdots per 16 weights, no -1 term (bsums unused). ARMv8.0: the
// trits as ((p + (p >> 1)) / 2) >> 6 (halving add), their products with the
// activations summed in int16 (smlal: 8 products of at most 256 per lane and
// accumulator) and the -1 through bsums.
struct TQ1 : IqFormat<block_tq1_0, false> {
  // What block() leaves for finish(): the four sdot chains (T, T', T, T'), or
  // the ARMv8.0 int16 sums and bsums[i] + bsums[i + 8].
  struct PartSdot {
    int32x4_t acc[4];
  };
  struct PartV80 {
    int16x8_t acc[4];
    int16x8_t bs;
  };
  template <class D>
  using Part = std::conditional_t<std::is_same_v<D, DotV80>, PartV80, PartSdot>;

  // 3 in every byte, opaque: g++ would turn each multiply by 3 into shl + add.
  static EDGELLM_NEON_INLINE uint8x16_t three() {
    uint8x16_t t = vdupq_n_u8(3);
    __asm__("" : "+w"(t));
    return t;
  }
  // qh's four bytes times {1, 3, 9, 27} (byte j, lanes 4 l + j), after xor with
  // x80.
  static EDGELLM_NEON_INLINE uint8x16_t qh_planes(const Block& x, uint32_t x80) {
    static const uint8_t kPow3x4[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    return vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh ^ x80)), vld1q_u8(kPow3x4));
  }

  template <class D>
  static EDGELLM_NEON_INLINE Part<D> block(const Block& x, const block_q8_K& y) {
    if constexpr (std::is_same_v<D, DotV80>)
      return block_v80(x, y);
    else
      return block_sdot<D>(x, y.qs);
  }
  template <class D>
  static EDGELLM_NEON_INLINE int32_t finish(const Part<D>& p) {
    if constexpr (std::is_same_v<D, DotV80>) {
      const int16x8_t s = vaddq_s16(vaddq_s16(p.acc[0], p.acc[1]), vaddq_s16(p.acc[2], p.acc[3]));
      return vaddlvq_s16(vsubq_s16(s, p.bs));  // |lane| <= 8192 + 4096
    } else {
      int32x4_t k3 = vdupq_n_s32(3);
      __asm__("" : "+w"(k3));  // one mls, not shl + add + sub
      // T' - 3 T, a multiple of 256 (>> is exact)
      const int32x4_t t = vaddq_s32(p.acc[0], p.acc[2]), tn = vaddq_s32(p.acc[1], p.acc[3]);
      return -(vaddvq_s32(vmlsq_s32(tn, t, k3)) >> 8);
    }
  }

  template <class D>
  static EDGELLM_NEON_INLINE PartSdot block_sdot(const Block& x, const int8_t* a) {
    const uint8x16_t k80 = vdupq_n_u8(0x80), k3 = three();
    PartSdot r;
    // One Dot4 step: vectors u (activations 16 gu) and v (16 gv), each as s_l
    // and s_{l+1} (T and T' chains).
    const auto step = [&](auto first, int gu, uint8x16_t u, uint8x16_t u3, int gv, uint8x16_t v,
                          uint8x16_t v3) EDGELLM_NEON_LAMBDA {
      const int8x16_t au = vld1q_s8(a + 16 * gu), av = vld1q_s8(a + 16 * gv);
      const int8x16_t w[4] = {vreinterpretq_s8_u8(u), vreinterpretq_s8_u8(u3), vreinterpretq_s8_u8(v),
                              vreinterpretq_s8_u8(v3)};
      const int8x16_t y[4] = {au, au, av, av};
      if constexpr (decltype(first)::value)
        Dot4<D>::fresh(r.acc, w, y);
      else
        Dot4<D>::add(r.acc, w, y);
    };
    uint8x16_t s0 = veorq_u8(vld1q_u8(x.qs), k80), s1 = veorq_u8(vld1q_u8(x.qs + 16), k80);
    for_each_sub(std::make_integer_sequence<int, 5>{}, [&](auto l) EDGELLM_NEON_LAMBDA {
      constexpr int L = decltype(l)::value;
      const uint8x16_t n0 = vmulq_u8(s0, k3), n1 = vmulq_u8(s1, k3);
      step(std::bool_constant<L == 0>{}, 2 * L, s0, n0, 2 * L + 1, s1, n1);
      s0 = n0;
      s1 = n1;
    });
    // qs bytes 32..47, planes 0..5 (vectors 10..14), two per step; the qh
    // trits with plane 4.
    constexpr std::false_type more{};
    const uint8x16_t p0 = veorq_u8(vld1q_u8(x.qs + 32), k80), p1 = vmulq_u8(p0, k3), p2 = vmulq_u8(p1, k3);
    const uint8x16_t p3 = vmulq_u8(p2, k3), p4 = vmulq_u8(p3, k3), p5 = vmulq_u8(p4, k3);
    const uint8x16_t h = qh_planes(x, 0x80808080u);
    step(more, 10, p0, p1, 11, p1, p2);
    step(more, 12, p2, p3, 13, p3, p4);
    step(more, 14, p4, p5, 15, h, vmulq_u8(h, k3));
    return r;
  }

  static EDGELLM_NEON_INLINE int8x16_t trit(uint8x16_t p) {
    return vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(p, vshrq_n_u8(p, 1)), 6));
  }
  static EDGELLM_NEON_INLINE PartV80 block_v80(const Block& x, const block_q8_K& y) {
    const uint8x16_t k3 = three();
    PartV80 r;
    for (int k = 0; k < 4; ++k) r.acc[k] = vdupq_n_s16(0);
    // Vector g (plane p) into accumulators C and C + 1 (8 vectors each).
    const auto add = [&](auto c, int g, uint8x16_t p) EDGELLM_NEON_LAMBDA {
      constexpr int C = decltype(c)::value;
      const int8x16_t t = trit(p), v = vld1q_s8(y.qs + 16 * g);
      r.acc[C] = vmlal_s8(r.acc[C], vget_low_s8(t), vget_low_s8(v));
      r.acc[C + 1] = vmlal_high_s8(r.acc[C + 1], t, v);
    };
    uint8x16_t p0 = vld1q_u8(x.qs), p1 = vld1q_u8(x.qs + 16), p2 = vld1q_u8(x.qs + 32);
    for_each_sub(std::make_integer_sequence<int, 5>{}, [&](auto l) EDGELLM_NEON_LAMBDA {
      constexpr int L = decltype(l)::value;
      add(std::integral_constant<int, 0>{}, 2 * L, p0);
      add(std::integral_constant<int, 2>{}, 2 * L + 1, p1);
      add(std::integral_constant<int, 2 * (L % 2)>{}, 10 + L, p2);
      if constexpr (L < 4) {
        p0 = vmulq_u8(p0, k3);
        p1 = vmulq_u8(p1, k3);
        p2 = vmulq_u8(p2, k3);
      }
    });
    add(std::integral_constant<int, 2>{}, 15, qh_planes(x, 0));
    r.bs = vaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));  // |lane| <= 2 * 16 * 128
    return r;
  }
};
}  // namespace neon
}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
