// NEON kernels of the transcoded i-quant forms (kernels/layouts/transcoded_iquants.hpp: a nibble
// per weight, 3 bits of magnitude code and a sign bit, the file's d and 4-bit scales), the
// PackedFormats of resident IQ3_S / IQ3_XXS / IQ2_XXS / IQ2_XS / IQ2_S matrices in both NEON tables
// (dotprod and ARMv8.0): one row a group, the row's blocks in order. Per 32 weights: one 16-byte
// load, and + ushr for the nibbles, two tbl of the type's 16 signed values (the weights themselves,
// signs included), two int8 dots (sdot, or smull / smlal2 / sadalp), the scales in the file
// kernel's multiply-adds (per 32 weights: acc_sub32's; per 16, iq2_xs_t / iq2_s_t: acc_sub16's). A
// type is a trait (NibIQ3_S ...: its block, value table, scale rule and file format).
//
// Bit for bit: the integer sum of each block is the file kernel's (exact int32), and the float
// steps are the file form's (sumf += float(sum) * (d * y.d) in block order, then the file's kPost;
// iq_row and deferred_row both do them, picked_row takes the faster for the scale rule), so decode
// equals vec_dot at the same ISA. Prefill (ntok > 1; NEON has no u8 GEMM, so the file's form runs
// vec_dot per token) decodes each block once for a tile of kNibbleToks tokens and keeps each
// token's float steps: vec_dot's. llvm-mca cycles against the file form and llama.cpp:
// docs/PERF.md. arm64 only.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/layouts/packed_kquants.hpp"
#include "edgellm/kernels/layouts/transcoded_iquants.hpp"
#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/kernels/neon/quantize.hpp"
#include "edgellm/kernels/neon/vdot.hpp"

namespace edgellm {
namespace neon {

// The scale rules: NibScales<32>, a 4-bit scale s per 32 weights in nibble v % 2 of scales[v / 2],
// the 8 integer scales 2 s + 1 (IQ3S's and IQ3XXS's rule) as two int32x4; NibScales<16>, a 4-bit
// scale per 16 weights (nibble j % 2 of scales[j / 2]), the 16 scales 2 s + 1 as four int32x4
// (IQ2XS's and IQ2S's nibble_scales16). kDeferred: the row driver of the rule's loop (picked_row;
// iq_row and deferred_row do the same float steps, so either gives vec_dot's bits), the faster on
// llvm-mca A55, dotprod / ARMv8.0 cycles iq_row -> deferred_row: 32: 129 -> 124, 152 -> 144;
// 16: 141 -> 145, 157 -> 157.
template <int Sub>
struct NibScales {
  static constexpr int kSub = Sub;
  static constexpr Deferred kDeferred = Sub == 32 ? Deferred::kBoth : Deferred::kNone;
  template <class B>
  static EDGELLM_NEON_INLINE void scales(const B& x, int32x4_t sc[QK_K / Sub / 4]) {
    if constexpr (Sub == 32)
      odd_nibble_scales8(x.scales, sc);
    else
      nibble_scales16(x.scales, sc);
  }
};
using NibScales32 = NibScales<32>;
using NibScales16 = NibScales<16>;
// The nibble types: transcoded block, the weight of each nibble (bit 3: negative), the scale rule
// and the file's format, whose float steps (kPost) the kernel keeps.
struct NibIQ3_S : NibScales32 {
  using Block = block_iq3_s_t;
  using File = IQ3S;
  static constexpr int8_t kValues[16] = {1, 3, 5, 7, 9, 11, 13, 15, -1, -3, -5, -7, -9, -11, -13, -15};
};
struct NibIQ2_XXS : NibScales32 {
  using Block = block_iq2_xxs_t;
  using File = IQ2XXS;
  static constexpr const int8_t* kValues = transcode::kIq2Values;
};
struct NibIQ3_XXS : NibScales32 {
  using Block = block_iq3_xxs_t;
  using File = IQ3XXS;
  static constexpr const int8_t* kValues = transcode::kIq3XxsValues;
};
// iq2_xs_t, and iq2_s_t (the same layout, values and float steps as IQ2S's).
struct NibIQ2_XS : NibScales16 {
  using Block = block_iq2_xs_t;
  using File = IQ2XS;
  static constexpr const int8_t* kValues = transcode::kIq2Values;
};

// A nibble type as an IqFormat (kScaledSum: block_acc leaves the block's integer sum in the lanes).
template <class Nib>
struct NibbleIq : IqFormat<typename Nib::Block, true, 1, Nib::kDeferred> {
  using Block = typename Nib::Block;
  static constexpr float kPost = Nib::File::kPost;
  static constexpr bool kSub16 = Nib::kSub == 16;
  static constexpr int kScaleVecs = QK_K / Nib::kSub / 4;  // int32x4 scale vectors per block

  static EDGELLM_NEON_INLINE void scales(const Block& x, int32x4_t sc[kScaleVecs]) { Nib::scales(x, sc); }
  // Vector IB's 32 weights: qs[16 IB + j] holds weight j (low nibble) and 16 + j (high).
  template <int IB>
  static EDGELLM_NEON_INLINE void weights(const Block& x, int8x16_t values, int8x16_t& w0, int8x16_t& w1) {
    const uint8x16_t q = vld1q_u8(x.qs + 16 * IB);
    w0 = vqtbl1q_s8(values, vandq_u8(q, vdupq_n_u8(0x0F)));
    w1 = vqtbl1q_s8(values, vshrq_n_u8(q, 4));
  }
  // The file kernel's step: acc_sub32, or acc_sub16 with a scale per 16 weights.
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    int32x4_t sc[kScaleVecs];
    scales(x, sc);
    const int8x16_t values = vld1q_s8(Nib::kValues);
    const auto w = [&](auto ib, int8x16_t& w0, int8x16_t& w1) EDGELLM_NEON_LAMBDA {
      weights<decltype(ib)::value>(x, values, w0, w1);
    };
    if constexpr (kSub16)
      return acc_sub16<D>(q8, sc, w);
    else
      return acc_sub32<D>(q8, sc, w);
  }
  // Half H of a block (vectors 4 H .. 4 H + 3, decoded as w0 / w1) for one token's activations q8
  // (the half's 128): acc plus the scaled sums, one Dot4 step per 4 scales (per 32 weights: two
  // sdot chains into one; per 16: each its own lane).
  template <class D, int H>
  static EDGELLM_NEON_INLINE int32x4_t half_acc(int32x4_t acc, const int8x16_t (&w0)[4], const int8x16_t (&w1)[4],
                                                const int8_t* q8, const int32x4_t sc[kScaleVecs]) {
    int32x4_t p[4];
    if constexpr (kSub16) {
      for_each_sub(std::make_integer_sequence<int, 2>{}, [&](auto q) EDGELLM_NEON_LAMBDA {
        constexpr int Q = decltype(q)::value;
        const int8x16_t w[4] = {w0[2 * Q], w1[2 * Q], w0[2 * Q + 1], w1[2 * Q + 1]};
        int8x16_t y[4];
        for (int k = 0; k < 4; ++k) y[k] = vld1q_s8(q8 + 64 * Q + 16 * k);
        Dot4<D>::fresh(p, w, y);
        acc = vmlaq_s32(acc, hsum4(p[0], p[1], p[2], p[3]), sc[2 * H + Q]);
      });
    } else {
      int8x16_t y0[4], y1[4];
      for (int k = 0; k < 4; ++k) {
        y0[k] = vld1q_s8(q8 + 32 * k);
        y1[k] = vld1q_s8(q8 + 32 * k + 16);
      }
      Dot4<D>::fresh(p, w0, y0);
      Dot4<D>::add(p, w1, y1);
      acc = vmlaq_s32(acc, hsum4(p[0], p[1], p[2], p[3]), sc[H]);
    }
    return acc;
  }
};

// Tokens per prefill tile: 8 decoded weight vectors, T block sums and a Dot4 step's 8 activation and
// 4 product vectors fit the 32 registers with T = 4. llvm-mca A55 cycles per token and 256 weights,
// g++ (clang) at T = 2, 3, 4, 6: dotprod 91 (80), 76 (70), 71 (76), 68 (101); ARMv8.0, where the
// smull chain and not the decode sets the pace, g++ T = 2, 3, 4: 136, 138, 142. A scale per 16
// weights (twice the scale steps per token), g++ T = 2, 3, 4, 5: dotprod 107.5, 97.3, 91.8, 93.6;
// ARMv8.0 T = 2, 3, 4: 132.5, 135.3, 125.8.
template <class Nib, class D>
inline constexpr int kNibbleToks = std::is_same_v<D, DotSdot> || Nib::kSub == 16 ? 4 : 2;

// T tokens of one transcoded row (token t's Q8_K row y[t]): each vector decoded once for all T; per
// token the block's int32 sum as block_acc's, then vec_dot's float steps.
template <class Nib, class D, int T>
EDGELLM_NEON_INLINE void nibble_tile(int64_t nb, const typename Nib::Block* x, const block_q8_K* const (&y)[T],
                                     float (&sumf)[T]) {
  using F = NibbleIq<Nib>;
  const int8x16_t values = vld1q_s8(Nib::kValues);
  for (int t = 0; t < T; ++t) sumf[t] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32x4_t sc[F::kScaleVecs], acc[T];
    F::scales(x[b], sc);
    for (int t = 0; t < T; ++t) acc[t] = vdupq_n_s32(0);
    for_each_sub(std::make_integer_sequence<int, 2>{}, [&](auto h) EDGELLM_NEON_LAMBDA {
      constexpr int H = decltype(h)::value;
      int8x16_t w0[4], w1[4];
      for_each_sub(std::make_integer_sequence<int, 4>{}, [&](auto k) EDGELLM_NEON_LAMBDA {
        constexpr int K = decltype(k)::value;
        F::template weights<4 * H + K>(x[b], values, w0[K], w1[K]);
      });
      EDGELLM_NEON_UNROLL
      for (int t = 0; t < T; ++t) acc[t] = F::template half_acc<D, H>(acc[t], w0, w1, y[t][b].qs + 128 * H, sc);
    });
    const float d = fp16_to_fp32(x[b].d);
    EDGELLM_NEON_UNROLL
    for (int t = 0; t < T; ++t) {
      const float scale = d * y[t][b].d;
      sumf[t] += float(vaddvq_s32(acc[t])) * scale;
    }
  }
}

// PackedFormat::gemm of a one-row group: one token through picked_row (vec_dot's steps), more in
// tiles of kNibbleToks<Nib, D>, then 2, then picked_row for a last one.
template <class Nib, class D>
EDGELLM_NEON_INLINE void nibble_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                                     size_t out_stride) {
  const int64_t nb = n_in / QK_K;
  const auto* x = static_cast<const typename Nib::Block*>(group);
  const auto* a = static_cast<const block_q8_K*>(act);
  const auto tile = [&](auto toks, int t0) EDGELLM_NEON_LAMBDA {
    constexpr int T = decltype(toks)::value;
    const block_q8_K* y[T];
    for (int t = 0; t < T; ++t) y[t] = a + size_t(t0 + t) * size_t(nb);
    float sumf[T];
    nibble_tile<Nib, D, T>(nb, x, y, sumf);
    for (int t = 0; t < T; ++t) out[size_t(t0 + t) * out_stride] = NibbleIq<Nib>::kPost * sumf[t];
  };
  int t = 0;
  constexpr int kToks = kNibbleToks<Nib, D>;
  for (; t + kToks <= ntok; t += kToks) tile(std::integral_constant<int, kToks>{}, t);
  for (; t + 2 <= ntok; t += 2) tile(std::integral_constant<int, 2>{}, t);
  if (t < ntok) out[size_t(t) * out_stride] = picked_row<NibbleIq<Nib>, D>(int(n_in), x, a + size_t(t) * size_t(nb));
}
template <class Nib>
void nibble_gemm_neon(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  nibble_gemm<Nib, DotV80>(n_in, group, act, ntok, out, out_stride);
}
template <class Nib>
EDGELLM_TARGET_DOTPROD void nibble_gemm_dotprod(int64_t n_in, const void* group, const void* act, int ntok,
                                                float* out, size_t out_stride) {
  nibble_gemm<Nib, DotSdot>(n_in, group, act, ntok, out, out_stride);
}

// The activation rows: Q8_K as the type's vec_dot reads them (the table's quantizer).
inline void prepare_act_q8_K_rows_neon(const float* x, int64_t n_in, void* dst) { quantize_row_q8_K_neon(x, dst, n_in); }

// PackedFormat::gemm of a one-row group whose vec_dot steps are Row's: each token through Row
// (prefill per token, as the file's form).
template <float (*Row)(int, const void*, const void*)>
EDGELLM_NEON_INLINE void per_token_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                                        size_t out_stride) {
  for (int t = 0; t < ntok; ++t)
    out[size_t(t) * out_stride] = Row(int(n_in), group, static_cast<const uint8_t*>(act) + size_t(t) * act_bytes_q8_K_rows(n_in));
}

// tq1_0_t (a TQ2_0 block made from each TQ1_0 block): TQ2's row, deferred_row as the file forms'
// vec_dot of both TQ1_0 and TQ2_0 (the exact int32 block sum times d * y.d in block order), so each
// token gets TQ1_0's vec_dot bit for bit.
inline void tq1_0_t_gemm_neon(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  per_token_gemm<deferred_row<TQ2, DotV80>>(n_in, group, act, ntok, out, out_stride);
}
EDGELLM_TARGET_DOTPROD inline void tq1_0_t_gemm_dotprod(int64_t n_in, const void* group, const void* act, int ntok,
                                                        float* out, size_t out_stride) {
  per_token_gemm<deferred_row<TQ2, DotSdot>>(n_in, group, act, ntok, out, out_stride);
}

// iq4_xs_t (kernels/layouts/transcoded_iquants.hpp: the file's nibbles in chunk order, activations
// to match, as on x86): a 16-byte load of qs[32 m + 16 h ..] holds chunks 2m (low nibbles) and
// 2m + 1 (high) of vectors 4h .. 4h + 3, vector 4h + i at bytes 4i .. 4i + 3, against the 16 bytes
// at h of their activation slots. dotprod: sdot's int32 lane i is then vector 4h + i's alone, so
// the 8 chunks' dots summed give the block's 8 sub-block sums in two vectors, scaled by one multiply
// and one multiply-add (the file's order needs an addp tree per 4 sub-blocks). ARMv8.0: smull of
// chunk 2m's low 8 bytes plus smlal of chunk 2m + 1's (|two products| <= 2 * 127 * 127 < 2^15)
// keep vectors 4h, 4h + 1 apart in int16 lanes, sadalp pairs them into int32, the high 8 bytes
// (vectors 4h + 2, 4h + 3) likewise; one addp per 4 sub-blocks. The block's integer sum is the
// file kernel's (exact int32), the float steps are picked_row's over it, IQ4XS's (vec_dot's).
struct IQ4XST : IqFormat<block_iq4_xs_t, true, 1, Deferred::kBoth> {
  // Deferred (picked_row): llvm-mca A55 cycles iq_row -> deferred_row, dotprod 121 -> 120, ARMv8.0 147 -> 145 (the file form: 125, 165)
  // Load M's weights: chunk 2M of vectors 0..3, 4..7, chunk 2M + 1 of vectors 0..3, 4..7.
  template <int M>
  static EDGELLM_NEON_INLINE void weights(const Block& x, int8x16_t values, int8x16_t (&w)[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const uint8x16_t q0 = vld1q_u8(x.qs + 32 * M), q1 = vld1q_u8(x.qs + 32 * M + 16);
    w[0] = vqtbl1q_s8(values, vandq_u8(q0, m4));
    w[1] = vqtbl1q_s8(values, vandq_u8(q1, m4));
    w[2] = vqtbl1q_s8(values, vshrq_n_u8(q0, 4));
    w[3] = vqtbl1q_s8(values, vshrq_n_u8(q1, 4));
  }
  // Load M's products with one token's activations q8 (the block's 256) into p: dotprod: vectors
  // 0..3 low, 4..7 low, 0..3 high, 4..7 high; ARMv8.0: vectors (0, 1), (2, 3), (4, 5), (6, 7).
  template <class D, int M>
  static EDGELLM_NEON_INLINE void step(int32x4_t (&p)[4], const int8x16_t (&w)[4], const int8_t* q8) {
    constexpr int kSlot = ((M & 2) << 1) | (M & 1);  // transcode::iq4_slot(2M); chunk 2M + 1's two slots on
    const int8_t* ya = q8 + 32 * kSlot;
    const int8_t* yb = ya + 64;
    const int8x16_t y[4] = {vld1q_s8(ya), vld1q_s8(ya + 16), vld1q_s8(yb), vld1q_s8(yb + 16)};
    if constexpr (std::is_same_v<D, DotV80>) {
      for (int h = 0; h < 2; ++h) {
        const int16x8_t lo =
            vmlal_s8(vmull_s8(vget_low_s8(w[h]), vget_low_s8(y[h])), vget_low_s8(w[2 + h]), vget_low_s8(y[2 + h]));
        const int16x8_t hi = vmlal_high_s8(vmull_high_s8(w[h], y[h]), w[2 + h], y[2 + h]);
        p[2 * h] = M == 0 ? vpaddlq_s16(lo) : vpadalq_s16(p[2 * h], lo);
        p[2 * h + 1] = M == 0 ? vpaddlq_s16(hi) : vpadalq_s16(p[2 * h + 1], hi);
      }
    } else if constexpr (M == 0) {
      Dot4<D>::fresh(p, w, y);
    } else {
      Dot4<D>::add(p, w, y);
    }
  }
  // The block's scaled sub-block sums, in the lanes of one vector.
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t finish(const int32x4_t (&p)[4], const int32x4_t sc[2]) {
    const bool v80 = std::is_same_v<D, DotV80>;
    const int32x4_t s0 = v80 ? vpaddq_s32(p[0], p[1]) : vaddq_s32(p[0], p[2]);
    const int32x4_t s1 = v80 ? vpaddq_s32(p[2], p[3]) : vaddq_s32(p[1], p[3]);
    return vmlaq_s32(vmulq_s32(s0, sc[0]), s1, sc[1]);
  }
  template <class D>
  static EDGELLM_NEON_INLINE int32x4_t block_acc(const Block& x, const int8_t* q8) {
    const int8x16_t values = vld1q_s8(kvalues_iq4nl);
    int32x4_t sc[2], p[4];
    iq4_xs_scales(x, sc);
    for_each_sub(std::make_integer_sequence<int, 4>{}, [&](auto mm) EDGELLM_NEON_LAMBDA {
      constexpr int M = decltype(mm)::value;
      int8x16_t w[4];
      weights<M>(x, values, w);
      step<D, M>(p, w, q8);
    });
    return finish<D>(p, sc);
  }
};

// T tokens of one iq4_xs_t row (token t's activations y[t]): each load's weights decoded once for
// all T; per token block_acc's int32 sum, then vec_dot's float steps (kPost is 1).
template <class D, int T>
EDGELLM_NEON_INLINE void iq4_xs_t_tile(int64_t nb, const block_iq4_xs_t* x, const block_q8_K* const (&y)[T],
                                       float (&sumf)[T]) {
  const int8x16_t values = vld1q_s8(kvalues_iq4nl);
  for (int t = 0; t < T; ++t) sumf[t] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32x4_t sc[2], p[T][4];
    iq4_xs_scales(x[b], sc);
    for_each_sub(std::make_integer_sequence<int, 4>{}, [&](auto mm) EDGELLM_NEON_LAMBDA {
      constexpr int M = decltype(mm)::value;
      int8x16_t w[4];
      IQ4XST::weights<M>(x[b], values, w);
      EDGELLM_NEON_UNROLL
      for (int t = 0; t < T; ++t) IQ4XST::step<D, M>(p[t], w, y[t][b].qs);
    });
    const float d = fp16_to_fp32(x[b].d);
    EDGELLM_NEON_UNROLL
    for (int t = 0; t < T; ++t) {
      const float scale = d * y[t][b].d;
      sumf[t] += float(vaddvq_s32(IQ4XST::finish<D>(p[t], sc))) * scale;
    }
  }
}
// Tokens per prefill tile: llvm-mca A55 cycles per token and 256 weights (one token: 120, 145), g++
// at T = 2, 3, 4, 6: dotprod 84, 74, 73, 76; ARMv8.0 T = 2, 3, 4: 130.5, 121, 143.
template <class D>
inline constexpr int kIq4XsTToks = std::is_same_v<D, DotSdot> ? 4 : 3;
// PackedFormat::gemm: tiles of kIq4XsTToks tokens, then each token left through picked_row
// (vec_dot's steps).
template <class D>
EDGELLM_NEON_INLINE void iq4_xs_t_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                                       size_t out_stride) {
  constexpr int T = kIq4XsTToks<D>;
  const int64_t nb = n_in / QK_K;
  const auto* x = static_cast<const block_iq4_xs_t*>(group);
  const auto* a = static_cast<const block_q8_K*>(act);
  int t0 = 0;
  for (; t0 + T <= ntok; t0 += T) {
    const block_q8_K* y[T];
    for (int t = 0; t < T; ++t) y[t] = a + size_t(t0 + t) * size_t(nb);
    float sumf[T];
    iq4_xs_t_tile<D, T>(nb, x, y, sumf);
    for (int t = 0; t < T; ++t) out[size_t(t0 + t) * out_stride] = sumf[t];
  }
  per_token_gemm<picked_row<IQ4XST, D>>(n_in, group, a + size_t(t0) * size_t(nb), ntok - t0, out + size_t(t0) * out_stride,
                                        out_stride);
}
inline void iq4_xs_t_gemm_neon(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  iq4_xs_t_gemm<DotV80>(n_in, group, act, ntok, out, out_stride);
}
EDGELLM_TARGET_DOTPROD inline void iq4_xs_t_gemm_dotprod(int64_t n_in, const void* group, const void* act, int ntok,
                                                         float* out, size_t out_stride) {
  iq4_xs_t_gemm<DotSdot>(n_in, group, act, ntok, out, out_stride);
}
inline void prepare_act_iq4_xs_t_neon(const float* x, int64_t n_in, void* dst) {
  iq4_xs_t_prepare_act<quantize_row_q8_K_neon>(x, n_in, dst);
}

}  // namespace neon

// Sets the IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS and IQ2_S transcoded forms of a NEON table: the dotprod
// kernels when the CPU runs sdot (dotprod), else the ARMv8.0 ones. Resident matrices only (model/residency.hpp).
inline void register_neon_transcoded_iquants(KernelTable& t, bool dotprod) {
  using namespace neon;
  const auto form = [&](DType type, const char* name, size_t (*group_bytes)(int64_t),
                        void (*pack)(const void*, size_t, int, int64_t, void*), PackedGemmFn gemm,
                        UnpackRowU8Fn unpack) {
    PackedFormat f{1, name, group_bytes, pack, act_bytes_q8_K_rows, prepare_act_q8_K_rows_neon, gemm};
    f.resident_only = true;
    f.unpack_u8 = unpack;  // for a u8 GEMM (none on NEON yet): the file's unpack_row_u8
    t.packed_of(type) = f;
  };
  const auto gemm = [&](auto nib) {
    using Nib = decltype(nib);
    return dotprod ? nibble_gemm_dotprod<Nib> : nibble_gemm_neon<Nib>;
  };
  form(DType::IQ3_S, "iq3_s_t", FormIQ3_S_T::group_bytes, FormIQ3_S_T::pack, gemm(NibIQ3_S{}), unpack_u8_iq3_s_t);
  form(DType::IQ2_XXS, "iq2_xxs_t", FormIQ2_XXS_T::group_bytes, FormIQ2_XXS_T::pack, gemm(NibIQ2_XXS{}),
       unpack_u8_iq2_xxs_t);
  form(DType::IQ2_XS, "iq2_xs_t", FormIQ2_XS_T::group_bytes, FormIQ2_XS_T::pack, gemm(NibIQ2_XS{}), unpack_u8_iq2_xs_t);
  form(DType::IQ2_S, "iq2_s_t", FormIQ2_S_T::group_bytes, FormIQ2_S_T::pack, gemm(NibIQ2_XS{}), unpack_u8_iq2_xs_t);
  form(DType::IQ3_XXS, "iq3_xxs_t", FormIQ3_XXS_T::group_bytes, FormIQ3_XXS_T::pack, gemm(NibIQ3_XXS{}),
       unpack_u8_iq3_xxs_t);
  form(DType::TQ1_0, "tq1_0_t", FormTQ1_0_T::group_bytes, FormTQ1_0_T::pack,
       dotprod ? tq1_0_t_gemm_dotprod : tq1_0_t_gemm_neon, unpack_u8_tq1_0_t);
  PackedFormat iq4{1, "iq4_xs_t", FormIQ4_XS_T::group_bytes, FormIQ4_XS_T::pack, act_bytes_q8_K_rows,
                   prepare_act_iq4_xs_t_neon, dotprod ? iq4_xs_t_gemm_dotprod : iq4_xs_t_gemm_neon};
  iq4.resident_only = true;  // the file's size, but streamed rows stay the file's bytes
  iq4.to_file_row = iq4_xs_t_to_file_row;
  t.packed_of(DType::IQ4_XS) = iq4;
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
