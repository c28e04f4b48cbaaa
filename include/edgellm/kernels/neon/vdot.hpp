// The one place that hides how an int8 dot product of 4-byte groups is done on arm64: sdot
// (vdotq_s32 in a dotprod build, inline asm in a baseline build) or its ARMv8.0 stand-in.
// Kernel bodies are templates over DotV80 / DotSdot. Includes <arm_neon.h>; arm64 only.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>
#include <cstddef>
#include <cstdint>

// Forces a kernel body into its (possibly target-attributed) caller, so that the sdot it
// contains is assembled inside a function that is allowed to use it.
#define EDGELLM_NEON_INLINE inline __attribute__((always_inline))

// Put before a loop over the rows of a multi-row kernel (constant trip count): fully unrolled,
// its per-row arrays of vectors become registers instead of stack slots.
#define EDGELLM_NEON_UNROLL _Pragma("GCC unroll 8")

// Put on every *_dotprod function. In a dotprod build it is empty; in a baseline build it lets
// that one function use sdot (clang 14 and g++ 12 spell the target differently).
#if EDGELLM_HAS_DOTPROD
#define EDGELLM_TARGET_DOTPROD
#elif defined(__clang__)
#define EDGELLM_TARGET_DOTPROD __attribute__((target("dotprod")))
#else
#define EDGELLM_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

namespace edgellm {
namespace neon {

// acc[i] += sum of a[4i..4i+3] * b[4i..4i+3] (signed bytes).
#if EDGELLM_HAS_DOTPROD
EDGELLM_NEON_INLINE int32x4_t sdot_s32(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return vdotq_s32(acc, a, b);
}
#else
// clang 14's arm_neon.h hides vdotq_s32 unless the whole file targets dotprod; the asm form
// works in both compilers inside an EDGELLM_TARGET_DOTPROD function (and nowhere else).
EDGELLM_NEON_INLINE int32x4_t sdot_s32(int32x4_t acc, int8x16_t a, int8x16_t b) {
  __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
}
#endif

// acc[i] += sum of w[4i..4i+3] * a[4L..4L+3]: the by-element sdot, four bytes of a (lane L)
// against each 32-bit lane of w. With one weight row per lane (the packed x4 layouts) this adds a
// quad of four weights of four rows into the rows' own lanes, with no horizontal sum afterwards.
#if EDGELLM_HAS_DOTPROD
template <int L>
EDGELLM_NEON_INLINE int32x4_t sdot_lane_s32(int32x4_t acc, int8x16_t w, int8x16_t a) {
  return vdotq_laneq_s32(acc, w, a, L);
}
#else
template <int L>
EDGELLM_NEON_INLINE int32x4_t sdot_lane_s32(int32x4_t acc, int8x16_t w, int8x16_t a) {
  static_assert(L >= 0 && L < 4, "sdot lane is 0..3");
  __asm__("sdot %0.4s, %1.16b, %2.4b[%c3]" : "+w"(acc) : "w"(w), "w"(a), "i"(L));
  return acc;
}
#endif

#if defined(__clang__)
// For clang (see sdot_4chains): J steps j of four by-element sdots, one per chain k: c_k += w_k[j] .
// lane (j + L) of y_k for the odd chains k = 1, 3, lane j for k = 0, 2.
template <int J, int L, int j = 0>
EDGELLM_NEON_INLINE void sdot_lanes_4chains(int32x4_t& c0, int32x4_t& c1, int32x4_t& c2, int32x4_t& c3,
                                            const int8x16_t* w0, const int8x16_t* w1, const int8x16_t* w2,
                                            const int8x16_t* w3, int8x16_t y0, int8x16_t y1, int8x16_t y2,
                                            int8x16_t y3) {
  c0 = sdot_lane_s32<j>(c0, w0[j], y0);
  c1 = sdot_lane_s32<j + L>(c1, w1[j], y1);
  c2 = sdot_lane_s32<j>(c2, w2[j], y2);
  c3 = sdot_lane_s32<j + L>(c3, w3[j], y3);
  if constexpr (j + 1 < J) sdot_lanes_4chains<J, L, j + 1>(c0, c1, c2, c3, w0, w1, w2, w3, y0, y1, y2, y3);
}
#endif

// Four chains of by-element sdots, issued round-robin: c0 += sum_j wa[j] . ya0[lane j],
// c1 += sum_j wa[4 + j] . ya1[lane j], c2 / c3 likewise from wb, yb0, yb1 (j = 0..3). The A55 issues
// an sdot per cycle but a dependent one 4 cycles later, so four interleaved chains keep it busy;
// with g++ one asm statement, because g++ 12 (its A55 tuning has no sdot latency) schedules each
// chain back to back whatever the source order (docs/PERF.md, "Kernel constants").
// The packed kernels pass e.g. two blocks of one token, or one block (wa == wb) of two tokens.
EDGELLM_NEON_INLINE void sdot_4chains(int32x4_t& c0, int32x4_t& c1, int32x4_t& c2, int32x4_t& c3,
                                      const int8x16_t wa[8], const int8x16_t wb[8], int8x16_t ya0, int8x16_t ya1,
                                      int8x16_t yb0, int8x16_t yb1) {
#if defined(__clang__)
  // clang's scheduler models the A55's sdot latency and interleaves these itself (and around them
  // the loads and unpacking, which one asm statement would pin), so clang gets the intrinsics.
  sdot_lanes_4chains<4, 0>(c0, c1, c2, c3, wa, wa + 4, wb, wb + 4, ya0, ya1, yb0, yb1);
#else
  __asm__(
      "sdot %0.4s, %4.16b, %20.4b[0]\n\t"
      "sdot %1.4s, %8.16b, %21.4b[0]\n\t"
      "sdot %2.4s, %12.16b, %22.4b[0]\n\t"
      "sdot %3.4s, %16.16b, %23.4b[0]\n\t"
      "sdot %0.4s, %5.16b, %20.4b[1]\n\t"
      "sdot %1.4s, %9.16b, %21.4b[1]\n\t"
      "sdot %2.4s, %13.16b, %22.4b[1]\n\t"
      "sdot %3.4s, %17.16b, %23.4b[1]\n\t"
      "sdot %0.4s, %6.16b, %20.4b[2]\n\t"
      "sdot %1.4s, %10.16b, %21.4b[2]\n\t"
      "sdot %2.4s, %14.16b, %22.4b[2]\n\t"
      "sdot %3.4s, %18.16b, %23.4b[2]\n\t"
      "sdot %0.4s, %7.16b, %20.4b[3]\n\t"
      "sdot %1.4s, %11.16b, %21.4b[3]\n\t"
      "sdot %2.4s, %15.16b, %22.4b[3]\n\t"
      "sdot %3.4s, %19.16b, %23.4b[3]"
      : "+w"(c0), "+w"(c1), "+w"(c2), "+w"(c3)
      : "w"(wa[0]), "w"(wa[1]), "w"(wa[2]), "w"(wa[3]), "w"(wa[4]), "w"(wa[5]), "w"(wa[6]), "w"(wa[7]),
        "w"(wb[0]), "w"(wb[1]), "w"(wb[2]), "w"(wb[3]), "w"(wb[4]), "w"(wb[5]), "w"(wb[6]), "w"(wb[7]),
        "w"(ya0), "w"(ya1), "w"(yb0), "w"(yb1));
#endif
}

// Four chains of two by-element sdots, issued round-robin: c0 += wa[0] . ya[0] + wa[1] . ya[1],
// c1 += wa[2] . ya[2] + wa[3] . ya[3], c2 / c3 likewise from wb, yb ([n] = lane n). For 16-weight
// sub-blocks (4 quads, one activation vector): two sub-blocks' sums, each split over two chains.
EDGELLM_NEON_INLINE void sdot_4chains2(int32x4_t& c0, int32x4_t& c1, int32x4_t& c2, int32x4_t& c3,
                                       const int8x16_t wa[4], const int8x16_t wb[4], int8x16_t ya, int8x16_t yb) {
#if defined(__clang__)  // as in sdot_4chains
  sdot_lanes_4chains<2, 2>(c0, c1, c2, c3, wa, wa + 2, wb, wb + 2, ya, ya, yb, yb);
#else
  __asm__(
      "sdot %0.4s, %4.16b, %12.4b[0]\n\t"
      "sdot %1.4s, %6.16b, %12.4b[2]\n\t"
      "sdot %2.4s, %8.16b, %13.4b[0]\n\t"
      "sdot %3.4s, %10.16b, %13.4b[2]\n\t"
      "sdot %0.4s, %5.16b, %12.4b[1]\n\t"
      "sdot %1.4s, %7.16b, %12.4b[3]\n\t"
      "sdot %2.4s, %9.16b, %13.4b[1]\n\t"
      "sdot %3.4s, %11.16b, %13.4b[3]"
      : "+w"(c0), "+w"(c1), "+w"(c2), "+w"(c3)
      : "w"(wa[0]), "w"(wa[1]), "w"(wa[2]), "w"(wa[3]), "w"(wb[0]), "w"(wb[1]), "w"(wb[2]), "w"(wb[3]), "w"(ya),
        "w"(yb));
#endif
}

// c[k] += w . lane L of y[k] for k = 0..3: one weight vector (a quad of 4 rows) against four tokens,
// four independent chains (prefill register tiles of 4 tokens).
template <int L>
EDGELLM_NEON_INLINE void sdot_4tok(int32x4_t (&c)[4], int8x16_t w, const int8x16_t (&y)[4]) {
#if defined(__clang__)  // as in sdot_4chains
  for (int k = 0; k < 4; ++k) c[k] = sdot_lane_s32<L>(c[k], w, y[k]);
#else
  static_assert(L >= 0 && L < 4, "sdot lane is 0..3");
  __asm__(
      "sdot %0.4s, %4.16b, %5.4b[%c9]\n\t"
      "sdot %1.4s, %4.16b, %6.4b[%c9]\n\t"
      "sdot %2.4s, %4.16b, %7.4b[%c9]\n\t"
      "sdot %3.4s, %4.16b, %8.4b[%c9]"
      : "+w"(c[0]), "+w"(c[1]), "+w"(c[2]), "+w"(c[3])
      : "w"(w), "w"(y[0]), "w"(y[1]), "w"(y[2]), "w"(y[3]), "i"(L));
#endif
}

// On lambdas inside the kernel bodies: inlined into their caller, so that the sdot they contain
// is assembled inside the dotprod-target function (clang checks the lambda's own target otherwise).
#define EDGELLM_NEON_LAMBDA __attribute__((always_inline))

// The VecDotRowsFn skeleton: groups of R rows (w, w + w_stride, ...) through group(out + r, that
// group's first row), then the rows left over one at a time through one(out + r, the row).
template <int R, class Group, class One>
EDGELLM_NEON_INLINE void rows_by_groups(int nrows, float* out, const void* w, size_t w_stride, Group group, One one) {
  const auto* base = static_cast<const uint8_t*>(w);
  int r = 0;
  for (; r + R <= nrows; r += R) group(out + r, base + size_t(r) * w_stride);
  for (; r < nrows; ++r) one(out + r, base + size_t(r) * w_stride);
}

// The two dot policies the kernel bodies are instantiated with. Both add the 16 products of
// a and b into the 4 lanes of acc; only the sum over all 4 lanes is defined to be equal (the
// kernels never rely on which lane got which product).
// dot0(a, b) = dot(0, a, b): the ARMv8.0 form then needs no zeroed accumulator (saddlp).
struct DotSdot {
  static EDGELLM_NEON_INLINE int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return sdot_s32(acc, a, b);
  }
  static EDGELLM_NEON_INLINE int32x4_t dot0(int8x16_t a, int8x16_t b) { return sdot_s32(vdupq_n_s32(0), a, b); }
};

// ARMv8.0: the products of bytes i and i + 8 are added in int16 before widening (3 instructions per
// 16 bytes instead of 4). Needs |a_i * b_i| <= 16383 for every i, which holds whenever one side is
// in [-127, 127] (activations from our quantizers; K-quant fields, q4_0 x16 and q5 quants are too).
struct DotV80 {
  static EDGELLM_NEON_INLINE int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
  }
  static EDGELLM_NEON_INLINE int32x4_t dot0(int8x16_t a, int8x16_t b) {
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
  }
};

}  // namespace neon
}  // namespace edgellm

#endif  // EDGELLM_HAS_NEON
