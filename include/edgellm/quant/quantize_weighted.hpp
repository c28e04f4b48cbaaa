// Quantizers that take an importance matrix (llama-quantize --imatrix): per column of a weight
// matrix an importance q[j] (the mean squared activation that column multiplied, quant/imatrix.hpp),
// and searches that minimise sum_j q[j] * w_j * (x_j - x'_j)^2 instead of the plain error. The
// same algorithms and float operation order as ggml's quantize_row_<type>_impl, so the bytes
// equal llama-quantize's; without a matrix each falls back to the reference quantizer, as ggml's
// quantize_<type> does.
//
// Entry points have ggml's shape: quantize_<type>(src, dst, nrows, n_per_row, imatrix) quantizes
// nrows rows of n_per_row floats, imatrix = n_per_row importances (or nullptr), and returns the
// bytes written. quantize_chunk(type, ...) picks one at run time (ggml_quantize_chunk), the i-quant
// and ternary types included (quant/quantize_iq.hpp, whose IQ1_*, IQ2_XXS / IQ2_XS need a matrix).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/quantize.hpp"
#include "edgellm/quant/quantize_iq.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/quant/ref_kquants.hpp"
#include "edgellm/quant/ref_legacy.hpp"
#include "edgellm/quant/scales.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {
namespace detail {

// make_qp_quants: quant/quantize_iq.hpp (shared with the i-quants).

// Per-weight importance of a sub-block: q[l] * sqrt(sigma2 + x[l]^2) (ggml's rule for every
// weighted K-quant and legacy type); returns their sum.
inline float importance_weights(int n, const float* EDGELLM_RESTRICT qw, const float* EDGELLM_RESTRICT x, float sigma2,
                                float* EDGELLM_RESTRICT w) {
  EDGELLM_EXACT_FP_SCOPE
  for (int l = 0; l < n; ++l) w[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
  float sumw = 0;
  for (int l = 0; l < n; ++l) sumw += w[l];
  return sumw;
}

inline float sum_squares(const float* x, int64_t n) {
  EDGELLM_EXACT_FP_SCOPE
  float s = 0;
  for (int64_t j = 0; j < n; ++j) s += x[j] * x[j];
  return s;
}

// q4_K / q5_K: scales and mins of the 8 sub-blocks (6 bits each) from make_qp_quants, packed,
// then L re-derived from the stored values (nmax 15 or 31).
inline void quantize_block_k4_weighted(const float* EDGELLM_RESTRICT x, const float* EDGELLM_RESTRICT qw, int nmax,
                                       uint8_t* L, ggml_half* d_out, ggml_half* dmin_out, uint8_t* scales_out) {
  EDGELLM_EXACT_FP_SCOPE
  uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
  float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
  const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
  for (int j = 0; j < QK_K / 32; ++j) {
    sw[j] = importance_weights(32, qw + 32 * j, x + 32 * j, sigma2, weights);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
  }
  const float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
  const float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
  int ls[8], lm[8];
  for (int j = 0; j < QK_K / 32; ++j) {
    ls[j] = std::min<int>(63, Ls[j]);
    lm[j] = std::min<int>(63, Lm[j]);
  }
  store_block_k4(x, nmax, ls, lm, d_block, m_block, L, d_out, dmin_out, scales_out);
}

// Legacy 32-weight blocks: the importance of block ib uses the whole row's mean square.
template <class Block, class Fill>
inline void quantize_row_legacy_weighted(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t n_per_row,
                                         const float* EDGELLM_RESTRICT quant_weights, Fill fill) {
  EDGELLM_EXACT_FP_SCOPE
  float weight[32];
  const float sigma2 = sum_squares(x, n_per_row) / n_per_row;
  for (int64_t ib = 0; ib < n_per_row / 32; ++ib) {
    importance_weights(32, quant_weights + 32 * ib, x + 32 * ib, sigma2, weight);
    fill(x + 32 * ib, weight, y[ib]);
  }
}

// q4_1 / q5_1 block: the weighted min/scale fit with L in [0, nmax]; stores d and m.
inline void fit_block_with_min(const float* xb, const float* w, int nmax, uint8_t* L, ggml_half& d, ggml_half& m) {
  EDGELLM_EXACT_FP_SCOPE
  uint8_t Laux[32];
  float min;
  d = fp32_to_fp16(make_qkx2_quants(32, nmax, xb, w, L, &min, Laux, -0.9f, 0.05f, 36, false));
  m = fp32_to_fp16(-min);
}

// q5_0 / q5_1: low nibbles of L in qs, bit 4 of weight j in bit j of qh.
inline void pack_5bit_32(const uint8_t* L, uint8_t* qs, uint8_t* qh_out) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = uint8_t((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
    qh |= ((L[j] & 0x10u) >> 4) << j;
    qh |= ((L[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// One row each (n_per_row weights, quant_weights = n_per_row importances, never nullptr).

// q2_K: per 16 weights the weighted min/scale fit (make_qkx3), 4-bit scales and mins from
// make_qp_quants weighted by each sub-block's total importance, then L re-derived.
inline void quantize_row_q2_K_impl(const float* EDGELLM_RESTRICT x, block_q2_K* EDGELLM_RESTRICT y, int64_t n_per_row,
                                   const float* EDGELLM_RESTRICT quant_weights) {
  EDGELLM_EXACT_FP_SCOPE
  using namespace detail;
  uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
  float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
  for (int64_t i = 0; i < n_per_row / QK_K; ++i, x += QK_K) {
    const float sigma2 = sum_squares(x, QK_K) / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
      sw[j] = importance_weights(16, quant_weights + QK_K * i + 16 * j, x + 16 * j, sigma2, weight);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    float dm = make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
    float mm = make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
    y[i].d = fp32_to_fp16(dm);
    y[i].dmin = fp32_to_fp16(mm);
    dm = fp16_to_fp32(y[i].d);
    mm = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = uint8_t(Ls[j] | (Lm[j] << 4));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = dm * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float m = mm * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + m) / d);
        L[16 * j + ii] = uint8_t(std::max(0, std::min(3, l)));
      }
    }
    for (int j = 0; j < QK_K; j += 128) pack_2bit_128(L + j, y[i].qs + j / 4);
  }
}

// q3_K: per 16 weights the weighted symmetric search (make_qx_quants, nmax 4), the 16 scales
// themselves quantized to 6 bits by the same search weighted by sub-block importance.
inline void quantize_row_q3_K_impl(const float* EDGELLM_RESTRICT x, block_q3_K* EDGELLM_RESTRICT y, int64_t n_per_row,
                                   const float* EDGELLM_RESTRICT quant_weights) {
  EDGELLM_EXACT_FP_SCOPE
  using namespace detail;
  int8_t L[QK_K], Ls[QK_K / 16];
  float scales[QK_K / 16], weight[16], sw[QK_K / 16];
  for (int64_t i = 0; i < n_per_row / QK_K; ++i, x += QK_K) {
    const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
    for (int j = 0; j < QK_K / 16; ++j) {
      sw[j] = importance_weights(16, quant_weights + QK_K * i + 16 * j, x + 16 * j, sigma2, weight);
      scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
    }
    std::memset(y[i].scales, 0, 12);
    const float d_block = make_qx_quants(QK_K / 16, 32, scales, Ls, 1, sw);
    int ls[16];
    for (int j = 0; j < QK_K / 16; ++j) ls[j] = Ls[j];
    pack_scales_q3_K(ls, y[i].scales);
    y[i].d = fp32_to_fp16(d_block);
    store_block_q3_K(x, L, y[i]);
  }
}

namespace detail {
template <class Block, class Pack>
inline void quantize_row_k4_weighted(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t n_per_row,
                                     const float* EDGELLM_RESTRICT quant_weights, int nmax, Pack pack) {
  EDGELLM_EXACT_FP_SCOPE
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n_per_row / QK_K; ++i, x += QK_K) {
    quantize_block_k4_weighted(x, quant_weights + QK_K * i, nmax, L, &y[i].d, &y[i].dmin, y[i].scales);
    pack(L, y[i]);
  }
}
}  // namespace detail

inline void quantize_row_q4_K_impl(const float* EDGELLM_RESTRICT x, block_q4_K* EDGELLM_RESTRICT y, int64_t n_per_row,
                                   const float* EDGELLM_RESTRICT quant_weights) {
  detail::quantize_row_k4_weighted(x, y, n_per_row, quant_weights, 15,
                                   [](const uint8_t* L, block_q4_K& b) { detail::pack_q4_K_quants(L, b.qs); });
}

inline void quantize_row_q5_K_impl(const float* EDGELLM_RESTRICT x, block_q5_K* EDGELLM_RESTRICT y, int64_t n_per_row,
                                   const float* EDGELLM_RESTRICT quant_weights) {
  detail::quantize_row_k4_weighted(x, y, n_per_row, quant_weights, 31,
                                   [](const uint8_t* L, block_q5_K& b) { detail::pack_q5_K_quants(L, b.qh, b.qs); });
}

// q6_K: the reference algorithm with the importances (not x^2) weighting the scale search.
inline void quantize_row_q6_K_impl(const float* EDGELLM_RESTRICT x, block_q6_K* EDGELLM_RESTRICT y, int64_t n_per_row,
                                   const float* EDGELLM_RESTRICT quant_weights) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < n_per_row / QK_K; ++i, x += QK_K)
    detail::quantize_block_q6_K(x, quant_weights + QK_K * i, y[i]);
}

namespace detail {
// One 32-weight legacy block from its importance weights w: q4_0 / q5_0 symmetric (make_qx_quants,
// nmax 8 / 16), q4_1 / q5_1 with a min (make_qkx3, nmax 15 / 31).
template <class Block>
inline void quantize_block_legacy_weighted(const float* xb, const float* w, Block& b) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr bool five_bit = std::is_same<Block, block_q5_0>::value || std::is_same<Block, block_q5_1>::value;
  constexpr bool with_min = std::is_same<Block, block_q4_1>::value || std::is_same<Block, block_q5_1>::value;
  uint8_t L[32];
  if constexpr (with_min) {
    fit_block_with_min(xb, w, five_bit ? 31 : 15, L, b.d, b.m);
  } else {
    int8_t Ls[32];
    b.d = fp32_to_fp16(make_qx_quants(32, five_bit ? 16 : 8, xb, Ls, 1, w));
    std::memcpy(L, Ls, 32);
  }
  if constexpr (five_bit) pack_5bit_32(L, b.qs, b.qh);
  else for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(L[j] | (L[j + 16] << 4));
}
}  // namespace detail

// q4_0, q4_1, q5_0, q5_1 with importances: per 32-weight block the weighted fit, importance
// q[j] * sqrt(sigma2 + x[j]^2) with sigma2 the row's mean square.
template <class Block>
inline void quantize_row_legacy_impl(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t n_per_row,
                                     const float* EDGELLM_RESTRICT quant_weights) {
  detail::quantize_row_legacy_weighted(x, y, n_per_row, quant_weights, detail::quantize_block_legacy_weighted<Block>);
}
inline void quantize_row_q4_0_impl(const float* x, block_q4_0* y, int64_t n, const float* qw) { quantize_row_legacy_impl(x, y, n, qw); }
inline void quantize_row_q4_1_impl(const float* x, block_q4_1* y, int64_t n, const float* qw) { quantize_row_legacy_impl(x, y, n, qw); }
inline void quantize_row_q5_0_impl(const float* x, block_q5_0* y, int64_t n, const float* qw) { quantize_row_legacy_impl(x, y, n, qw); }
inline void quantize_row_q5_1_impl(const float* x, block_q5_1* y, int64_t n, const float* qw) { quantize_row_legacy_impl(x, y, n, qw); }

// ---------------------------------------------------------------------------------------------
// ggml's quantize_<type>: nrows rows; with an importance matrix the weighted row quantizer, else
// the reference one (q8_0 ignores the matrix).

namespace detail {
template <class Block, DType T, void (*Impl)(const float*, Block*, int64_t, const float*),
          void (*Ref)(const float* EDGELLM_RESTRICT, Block* EDGELLM_RESTRICT, int64_t)>
inline size_t quantize_rows_weighted(const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                                     const float* imatrix) {
  const size_t row_size = dtype_row_bytes(T, n_per_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < nrows; ++r, src += n_per_row, out += row_size) {
    if (imatrix) Impl(src, reinterpret_cast<Block*>(out), n_per_row, imatrix);
    else Ref(src, reinterpret_cast<Block*>(out), n_per_row);
  }
  return static_cast<size_t>(nrows) * row_size;
}
}  // namespace detail

// quantize_<type>(src, dst, nrows, n_per_row, imatrix): ggml's quantize_<type> (the weighted rows with a
// matrix, the reference rows without).
inline constexpr auto quantize_q4_0 =
    detail::quantize_rows_weighted<block_q4_0, DType::Q4_0, quantize_row_q4_0_impl, quantize_row_legacy_ref<block_q4_0>>;
inline constexpr auto quantize_q4_1 =
    detail::quantize_rows_weighted<block_q4_1, DType::Q4_1, quantize_row_q4_1_impl, quantize_row_legacy_ref<block_q4_1>>;
inline constexpr auto quantize_q5_0 =
    detail::quantize_rows_weighted<block_q5_0, DType::Q5_0, quantize_row_q5_0_impl, quantize_row_legacy_ref<block_q5_0>>;
inline constexpr auto quantize_q5_1 =
    detail::quantize_rows_weighted<block_q5_1, DType::Q5_1, quantize_row_q5_1_impl, quantize_row_legacy_ref<block_q5_1>>;
inline constexpr auto quantize_q2_K =
    detail::quantize_rows_weighted<block_q2_K, DType::Q2_K, quantize_row_q2_K_impl, quantize_row_q2_K_ref>;
inline constexpr auto quantize_q3_K =
    detail::quantize_rows_weighted<block_q3_K, DType::Q3_K, quantize_row_q3_K_impl, quantize_row_q3_K_ref>;
inline constexpr auto quantize_q4_K =
    detail::quantize_rows_weighted<block_q4_K, DType::Q4_K, quantize_row_q4_K_impl, quantize_row_q4_K_ref>;
inline constexpr auto quantize_q5_K =
    detail::quantize_rows_weighted<block_q5_K, DType::Q5_K, quantize_row_q5_K_impl, quantize_row_q5_K_ref>;
inline constexpr auto quantize_q6_K =
    detail::quantize_rows_weighted<block_q6_K, DType::Q6_K, quantize_row_q6_K_impl, quantize_row_q6_K_ref>;

// Whether quantize_chunk can write type t (with or without a matrix).
inline bool can_quantize_chunk(DType t) {
  switch (t) {
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ4_NL: case DType::IQ4_XS: case DType::TQ1_0:
    case DType::TQ2_0:
      return true;
    default: return can_quantize(t);
  }
}

// ggml_quantize_chunk: nrows rows of n_per_row floats as type t into dst (imatrix: n_per_row
// importances or nullptr). Returns the bytes written. Throws Error for a type without quantizer or
// a row length that does not split into t's blocks.
inline size_t quantize_chunk(DType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  EDGELLM_CHECK(can_quantize_chunk(t), "no quantizer for type ", dtype_name(t));
  EDGELLM_CHECK(n_per_row % dtype_block_size(t) == 0, "quantize ", dtype_name(t), ": row length ", n_per_row,
                " is not a multiple of the block size ", dtype_block_size(t));
  switch (t) {
    case DType::Q4_0: return quantize_q4_0(src, dst, nrows, n_per_row, imatrix);
    case DType::Q4_1: return quantize_q4_1(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_0: return quantize_q5_0(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_1: return quantize_q5_1(src, dst, nrows, n_per_row, imatrix);
    case DType::Q2_K: return quantize_q2_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q3_K: return quantize_q3_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q4_K: return quantize_q4_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q5_K: return quantize_q5_K(src, dst, nrows, n_per_row, imatrix);
    case DType::Q6_K: return quantize_q6_K(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ2_XXS: return quantize_iq2_xxs(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ2_XS: return quantize_iq2_xs(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ2_S: return quantize_iq2_s(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ3_XXS: return quantize_iq3_xxs(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ3_S: return quantize_iq3_s(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ1_S: return quantize_iq1_s(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ1_M: return quantize_iq1_m(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ4_NL: return quantize_iq4_nl(src, dst, nrows, n_per_row, imatrix);
    case DType::IQ4_XS: return quantize_iq4_xs(src, dst, nrows, n_per_row, imatrix);
    case DType::TQ1_0: return quantize_tq1_0(src, dst, nrows, n_per_row, imatrix);
    case DType::TQ2_0: return quantize_tq2_0(src, dst, nrows, n_per_row, imatrix);
    default: {
      const size_t row_size = dtype_row_bytes(t, n_per_row);
      auto* out = static_cast<uint8_t*>(dst);
      for (int64_t r = 0; r < nrows; ++r) quantize_row(t, src + r * n_per_row, out + r * row_size, n_per_row);
      return static_cast<size_t>(nrows) * row_size;
    }
  }
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
