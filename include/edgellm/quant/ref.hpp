// Type-erased entry points over the reference dequantizers / quantizers: can_dequantize,
// can_quantize, dequantize_row, quantize_row (DType chosen at run time), their function pointers,
// and an RMSE helper for quality checks.
#pragma once
#include <cmath>
#include <cstdint>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/quantize.hpp"
#include "edgellm/quant/quantize_iq.hpp"
#include "edgellm/quant/ref_iquants.hpp"
#include "edgellm/quant/ref_kquants.hpp"
#include "edgellm/quant/ref_legacy.hpp"

namespace edgellm {

// Same shapes as kernels/api.hpp's ToFloatFn / FromFloatFn (x: blocks of the type, k elements).
using DequantizeRowFn = void (*)(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k);
using QuantizeRowFn = void (*)(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT y, int64_t k);
struct RowFns {
  DequantizeRowFn dequantize;
  QuantizeRowFn quantize;
};

namespace detail {

template <class Block, void (*F)(const Block* EDGELLM_RESTRICT, float* EDGELLM_RESTRICT, int64_t)>
inline void dequantize_erased(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  F(static_cast<const Block*>(x), y, k);
}
template <class Block, void (*F)(const float* EDGELLM_RESTRICT, Block* EDGELLM_RESTRICT, int64_t)>
inline void quantize_erased(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT y, int64_t k) {
  F(x, static_cast<Block*>(y), k);
}

// One row's reference dequantizer and quantizer, type-erased (the block type cast away); the
// two-argument form for types without a reference quantizer. (Two overloads, not a defaulted
// nullptr: g++ -fsanitize=undefined does not take `Q == nullptr` as a constant expression.)
template <class Block, void (*D)(const Block* EDGELLM_RESTRICT, float* EDGELLM_RESTRICT, int64_t)>
constexpr RowFns fns() {
  return {dequantize_erased<Block, D>, nullptr};
}
template <class Block, void (*D)(const Block* EDGELLM_RESTRICT, float* EDGELLM_RESTRICT, int64_t),
          void (*Q)(const float* EDGELLM_RESTRICT, Block* EDGELLM_RESTRICT, int64_t)>
constexpr RowFns fns() {
  return {dequantize_erased<Block, D>, quantize_erased<Block, Q>};
}

}  // namespace detail

// The reference row dequantizer and quantizer of t (the quality one for weight types, the
// activation rule for q8_0 / q8_1 / q8_K); nullptr where there is none (the quantizer of IQ2_XXS,
// IQ2_XS, IQ1_S, IQ1_M: ggml has no row form of those without an imatrix; every function of
// types without a reference).
inline RowFns row_fns(DType t) {
  using namespace detail;
  switch (t) {
    case DType::F32: return fns<float, fp32_copy_row, fp32_copy_row>();
    case DType::F16: return fns<ggml_half, fp16_to_fp32_row, fp32_to_fp16_row>();
    case DType::BF16: return fns<ggml_bf16, bf16_to_fp32_row, fp32_to_bf16_row>();
    case DType::Q4_0: return fns<block_q4_0, dequantize_row_legacy<block_q4_0>, quantize_row_legacy_ref<block_q4_0>>();
    case DType::Q4_1: return fns<block_q4_1, dequantize_row_legacy<block_q4_1>, quantize_row_legacy_ref<block_q4_1>>();
    case DType::Q5_0: return fns<block_q5_0, dequantize_row_legacy<block_q5_0>, quantize_row_legacy_ref<block_q5_0>>();
    case DType::Q5_1: return fns<block_q5_1, dequantize_row_legacy<block_q5_1>, quantize_row_legacy_ref<block_q5_1>>();
    case DType::Q8_0: return fns<block_q8_0, dequantize_row_q8_0, quantize_row_q8_0_ref>();
    case DType::Q8_1: return fns<block_q8_1, dequantize_row_q8_1, quantize_row_q8_1_ref>();
    case DType::Q2_K: return fns<block_q2_K, dequantize_row_q2_K, quantize_row_q2_K_ref>();
    case DType::Q3_K: return fns<block_q3_K, dequantize_row_q3_K, quantize_row_q3_K_ref>();
    case DType::Q4_K: return fns<block_q4_K, dequantize_row_q4_K, quantize_row_q4_K_ref>();
    case DType::Q5_K: return fns<block_q5_K, dequantize_row_q5_K, quantize_row_q5_K_ref>();
    case DType::Q6_K: return fns<block_q6_K, dequantize_row_q6_K, quantize_row_q6_K_ref>();
    case DType::Q8_K: return fns<block_q8_K, dequantize_row_q8_K, quantize_row_q8_K_ref>();
    case DType::IQ2_XXS: return fns<block_iq2_xxs, dequantize_row_iq2_xxs>();
    case DType::IQ2_XS: return fns<block_iq2_xs, dequantize_row_iq2_xs>();
    case DType::IQ2_S: return fns<block_iq2_s, dequantize_row_iq2_s, quantize_row_iq2_s_ref>();
    case DType::IQ3_XXS: return fns<block_iq3_xxs, dequantize_row_iq3_xxs, quantize_row_iq3_xxs_ref>();
    case DType::IQ3_S: return fns<block_iq3_s, dequantize_row_iq3_s, quantize_row_iq3_s_ref>();
    case DType::IQ1_S: return fns<block_iq1_s, dequantize_row_iq1_s>();
    case DType::IQ1_M: return fns<block_iq1_m, dequantize_row_iq1_m>();
    case DType::IQ4_NL: return fns<block_iq4_nl, dequantize_row_iq4_nl, quantize_row_iq4_nl_ref>();
    case DType::IQ4_XS: return fns<block_iq4_xs, dequantize_row_iq4_xs, quantize_row_iq4_xs_ref>();
    case DType::TQ1_0: return fns<block_tq1_0, dequantize_row_tq1_0, quantize_row_tq1_0_ref>();
    case DType::TQ2_0: return fns<block_tq2_0, dequantize_row_tq2_0, quantize_row_tq2_0_ref>();
    default: return {nullptr, nullptr};
  }
}

inline DequantizeRowFn dequantize_row_fn(DType t) { return row_fns(t).dequantize; }
inline QuantizeRowFn quantize_row_fn(DType t) { return row_fns(t).quantize; }
inline bool can_dequantize(DType t) { return dequantize_row_fn(t) != nullptr; }
inline bool can_quantize(DType t) { return quantize_row_fn(t) != nullptr; }

namespace detail {
inline void check_row(DType t, int64_t k, bool supported, const char* what) {
  EDGELLM_CHECK(supported, "cannot ", what, " type ", dtype_name(t), " (id ", static_cast<uint32_t>(t),
                "): no reference ", what, "r");
  const int64_t bs = dtype_block_size(t);
  EDGELLM_CHECK(k >= 0 && k % bs == 0, what, " ", dtype_name(t), ": row length ", k,
                " is not a multiple of the block size ", bs);
}
}  // namespace detail

// y[0..k) = the k elements stored in x (a row of type t). Throws Error for an unsupported type
// or k not a multiple of t's block size.
inline void dequantize_row(DType t, const void* x, float* y, int64_t k) {
  const DequantizeRowFn f = dequantize_row_fn(t);
  detail::check_row(t, k, f != nullptr, "dequantize");
  f(x, y, k);
}

// y = x[0..k) stored as type t (dtype_row_bytes(t, k) bytes). Throws as dequantize_row.
inline void quantize_row(DType t, const float* x, void* y, int64_t k) {
  const QuantizeRowFn f = quantize_row_fn(t);
  detail::check_row(t, k, f != nullptr, "quantize");
  f(x, y, k);
}

// sqrt(mean((a - b)^2)) over n values, accumulated in double; 0 for n <= 0.
inline double rmse(const float* a, const float* b, int64_t n) {
  if (n <= 0) return 0.0;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(a[i]) - double(b[i]);
    s += e * e;
  }
  return std::sqrt(s / double(n));
}

// sqrt(mean(a^2)): the scale RMSE is compared with.
inline double rms(const float* a, int64_t n) {
  if (n <= 0) return 0.0;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(a[i]);
  return std::sqrt(s / double(n));
}

}  // namespace edgellm
