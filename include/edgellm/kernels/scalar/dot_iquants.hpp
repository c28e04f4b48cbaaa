// Scalar reference dot products of the i-quant and ternary types (VecDotFn signature), the spec the
// SIMD variants are tested against: Q8_K activations (IQ4_NL: Q8_0), integer sums per sub-block
// times the integer sub-block scales, then the float scale arithmetic in the order of ggml's
// generic kernels (ggml-cpu/quants.c ggml_vec_dot_<type>_q8_K_generic): e.g. IQ2's sums of
// (2s + 1) * sum(q * q8) are scaled by d_w * d_a per block and by 0.125 once at the end, and IQ1's
// shift enters as IQ1S_DELTA * sum((2s + 1) * +-bsum). Weights are read by quant/ref_iquants.hpp's
// unpack_<type> helpers, which the dequantizers share.
#pragma once
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/kernels/scalar/block_walk.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_iquants.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

namespace detail {
// sum(q[j] * a[j]) for j < n
inline int32_t isum_i8(const int8_t* q, const int8_t* a, int n) {
  int32_t s = 0;
  for (int j = 0; j < n; ++j) s += int32_t(q[j]) * a[j];
  return s;
}
}  // namespace detail

namespace detail {
// The IQ2 / IQ3 form: per block d_w * d_a * sum over sub-blocks of (2s + 1) * sum(q * q8), then
// the sum of blocks times 1 / kInvScale (ggml's final 0.125f / 0.25f; 1: none).
template <class Block, int kSub, void (*Unpack)(const Block&, int8_t*), uint32_t (*Scale)(const Block&, int),
          int kInvScale>
inline float vec_dot_iq_odd_scales(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  const float sumf = sum_over_blocks<Block, block_q8_K>(n, w, a, [](const Block& x, const block_q8_K& y) {
    int8_t q[QK_K];
    Unpack(x, q);
    int32_t bsum = 0;
    for (int s = 0; s < QK_K / kSub; ++s)
      bsum += isum_i8(q + kSub * s, y.qs + kSub * s, kSub) * int32_t(2 * Scale(x, s) + 1);
    return fp16_to_fp32(x.d) * y.d * float(bsum);
  });
  return kInvScale == 1 ? sumf : (1.0f / float(kInvScale)) * sumf;
}
}  // namespace detail

// w: [n/256] block_iq2_xxs, a: [n/256] block_q8_K. Scale (2s + 1) / 8 per 32 weights.
inline float vec_dot_iq2_xxs_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq_odd_scales<block_iq2_xxs, 32, unpack_iq2_xxs, iq2_xxs_scale, 8>(n, w, a);
}
// w: [n/256] block_iq2_xs, a: [n/256] block_q8_K. Scale (2s + 1) / 8 per 16 weights.
inline float vec_dot_iq2_xs_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq_odd_scales<block_iq2_xs, 16, unpack_iq2_xs, iq2_scale16<block_iq2_xs>, 8>(n, w, a);
}
// w: [n/256] block_iq2_s, a: [n/256] block_q8_K. Scale (2s + 1) / 8 per 16 weights.
inline float vec_dot_iq2_s_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq_odd_scales<block_iq2_s, 16, unpack_iq2_s, iq2_scale16<block_iq2_s>, 8>(n, w, a);
}
// w: [n/256] block_iq3_xxs, a: [n/256] block_q8_K. Scale (2s + 1) / 4 per 32 weights.
inline float vec_dot_iq3_xxs_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq_odd_scales<block_iq3_xxs, 32, unpack_iq3_xxs, iq3_xxs_scale, 4>(n, w, a);
}
// w: [n/256] block_iq3_s, a: [n/256] block_q8_K. Scale 2s + 1 per 32 weights.
inline float vec_dot_iq3_s_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq_odd_scales<block_iq3_s, 32, unpack_iq3_s, iq3_s_scale, 1>(n, w, a);
}

// w: [n/256] block_iq1_s, a: [n/256] block_q8_K. Per 32 weights ls = 2s + 1; the shift +-IQ1S_DELTA
// is applied through the activation's bsums: d_w * d_a * (sum(ls * q.q8) + IQ1S_DELTA * sum(ls *
// +-bsum)).
inline float vec_dot_iq1_s_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  return detail::sum_over_blocks<block_iq1_s, block_q8_K>(n, w, a, [](const block_iq1_s& x, const block_q8_K& y) {
    int8_t q[QK_K];
    unpack_iq1_s(x, q);
    int32_t sumi = 0, sumi1 = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const int32_t ls = 2 * int32_t(iq1_s_scale(x, ib)) + 1;
      const int32_t delta = iq1_s_delta_negative(x, ib) ? -1 : 1;
      sumi += ls * detail::isum_i8(q + 32 * ib, y.qs + 32 * ib, 32);
      sumi1 += ls * delta * (y.bsums[2 * ib] + y.bsums[2 * ib + 1]);
    }
    return fp16_to_fp32(x.d) * y.d * (float(sumi) + IQ1S_DELTA * float(sumi1));
  });
}

namespace detail {
// An IQ1 type or transcoded form (accessors of detail::dequantize_row_iq1), in the order of ggml's
// IQ1_M kernel: ls = 2s + 1 per 16 weights, the shift sign per 8, its activation sums taken from
// the quants.
template <class B, void (*Unpack)(const B&, int8_t*), float (*D)(const B&), uint32_t (*Scale16)(const B&, int),
          bool (*Neg8)(const B&, int)>
inline float vec_dot_iq1(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  return sum_over_blocks<B, block_q8_K>(n, w, a, [](const B& x, const block_q8_K& y) {
    static const int8_t kOnes[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int8_t q[QK_K];
    Unpack(x, q);
    int32_t sumi1 = 0, sumi2 = 0;
    for (int g = 0; g < QK_K / 8; ++g) {
      const int32_t ls = 2 * int32_t(Scale16(x, g / 2)) + 1;
      const int32_t delta = Neg8(x, g) ? -1 : 1;
      const int8_t* q8 = y.qs + 8 * g;
      sumi1 += ls * isum_i8(q + 8 * g, q8, 8);
      sumi2 += ls * delta * isum_i8(kOnes, q8, 8);
    }
    return D(x) * y.d * (float(sumi1) + IQ1M_DELTA * float(sumi2));
  });
}
}  // namespace detail

// w: [n/256] block_iq1_m, a: [n/256] block_q8_K.
inline float vec_dot_iq1_m_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_iq1<block_iq1_m, unpack_iq1_m, iq1_m_dfloat, iq1_m_scale16, iq1_m_delta_negative>(n, w, a);
}

// w: [n/32] block_iq4_nl, a: [n/32] block_q8_0
inline float vec_dot_iq4_nl_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  return detail::sum_over_blocks<block_iq4_nl, block_q8_0>(n, w, a, [](const block_iq4_nl& x, const block_q8_0& y) {
    int8_t q[QK4_NL];
    const float d = fp16_to_fp32(y.d) * fp16_to_fp32(x.d);
    unpack_iq4_32(x.qs, q);
    return d * float(detail::isum_i8(q, y.qs, QK4_NL));
  });
}

// w: [n/256] block_iq4_xs, a: [n/256] block_q8_K. One float term per 32 weights: d_w * d_a * (s - 32).
inline float vec_dot_iq4_xs_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  const auto* x = static_cast<const block_iq4_xs*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  int8_t q[QK_K];
  float sumf = 0.0f;
  for (int i = 0; i < n / QK_K; ++i) {
    const float d4d8 = fp16_to_fp32(x[i].d) * y[i].d;
    unpack_iq4_xs(x[i], q);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float dl = d4d8 * float(iq4_xs_scale(x[i], ib) - 32);
      sumf += dl * float(detail::isum_i8(q + 32 * ib, y[i].qs + 32 * ib, 32));
    }
  }
  return sumf;
}

namespace detail {
// Ternary: per block sum(q * q8) * (d_w * d_a) (ggml's TQ2_0 writes d_a * d_w: the same product).
template <class Block, void (*Unpack)(const Block&, int8_t*)>
inline float vec_dot_ternary(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  EDGELLM_EXACT_FP_SCOPE
  return sum_over_blocks<Block, block_q8_K>(n, w, a, [](const Block& x, const block_q8_K& y) {
    int8_t q[QK_K];
    Unpack(x, q);
    return float(isum_i8(q, y.qs, QK_K)) * (fp16_to_fp32(x.d) * y.d);
  });
}
}  // namespace detail

// w: [n/256] block_tq1_0, a: [n/256] block_q8_K
inline float vec_dot_tq1_0_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_ternary<block_tq1_0, unpack_tq1_0>(n, w, a);
}
// w: [n/256] block_tq2_0, a: [n/256] block_q8_K
inline float vec_dot_tq2_0_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_ternary<block_tq2_0, unpack_tq2_0>(n, w, a);
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
