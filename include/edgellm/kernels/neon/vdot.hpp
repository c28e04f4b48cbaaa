// The one place that hides how an int8 dot product of 4-byte groups is done on arm64: sdot
// (vdotq_s32 in a dotprod build, inline asm in a baseline build) or its ARMv8.0 stand-in.
// Kernel bodies are templates over DotV80 / DotSdot. Includes <arm_neon.h>; arm64 only.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

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
