// The model's conversion table: the row dequantizer of every stored type (dequantize_row_fn,
// can_dequantize, dequantize_row), and the quantizers the model runs at inference time, for its
// activations and its KV cache (runtime_quantize_row_fn: F32, F16, BF16, the legacy types and
// Q8_K, none of them a search). The offline quantizers of the other types (K-quant scale searches,
// i-quant grid searches) are quant/ref.hpp's, which the inference path does not include.
#pragma once
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_iquants.hpp"
#include "edgellm/quant/ref_kquants.hpp"
#include "edgellm/quant/ref_legacy.hpp"

namespace edgellm {

// Same shapes as kernels/api.hpp's ToFloatFn / FromFloatFn (x: blocks of the type, k elements).
using DequantizeRowFn = void (*)(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k);
using QuantizeRowFn = void (*)(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT y, int64_t k);

namespace detail {

// A row function of one block type, type-erased (the block type cast away).
template <class Block, void (*F)(const Block* EDGELLM_RESTRICT, float* EDGELLM_RESTRICT, int64_t)>
inline void dequantize_erased(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  F(static_cast<const Block*>(x), y, k);
}
template <class Block, void (*F)(const float* EDGELLM_RESTRICT, Block* EDGELLM_RESTRICT, int64_t)>
inline void quantize_erased(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT y, int64_t k) {
  F(x, static_cast<Block*>(y), k);
}

inline void check_row(DType t, int64_t k, bool supported, const char* what) {
  EDGELLM_CHECK(supported, "cannot ", what, " type ", dtype_name(t), " (id ", static_cast<uint32_t>(t),
                "): no reference ", what, "r");
  const int64_t bs = dtype_block_size(t);
  EDGELLM_CHECK(k >= 0 && k % bs == 0, what, " ", dtype_name(t), ": row length ", k,
                " is not a multiple of the block size ", bs);
}

}  // namespace detail

// The reference row dequantizer of t; nullptr for a type without one.
inline DequantizeRowFn dequantize_row_fn(DType t) {
  using detail::dequantize_erased;
  switch (t) {
    case DType::F32: return dequantize_erased<float, fp32_copy_row>;
    case DType::F16: return dequantize_erased<ggml_half, fp16_to_fp32_row>;
    case DType::BF16: return dequantize_erased<ggml_bf16, bf16_to_fp32_row>;
    case DType::Q4_0: return dequantize_erased<block_q4_0, dequantize_row_legacy<block_q4_0>>;
    case DType::Q4_1: return dequantize_erased<block_q4_1, dequantize_row_legacy<block_q4_1>>;
    case DType::Q5_0: return dequantize_erased<block_q5_0, dequantize_row_legacy<block_q5_0>>;
    case DType::Q5_1: return dequantize_erased<block_q5_1, dequantize_row_legacy<block_q5_1>>;
    case DType::Q8_0: return dequantize_erased<block_q8_0, dequantize_row_q8_0>;
    case DType::Q8_1: return dequantize_erased<block_q8_1, dequantize_row_q8_1>;
    case DType::Q2_K: return dequantize_erased<block_q2_K, dequantize_row_q2_K>;
    case DType::Q3_K: return dequantize_erased<block_q3_K, dequantize_row_q3_K>;
    case DType::Q4_K: return dequantize_erased<block_q4_K, dequantize_row_q4_K>;
    case DType::Q5_K: return dequantize_erased<block_q5_K, dequantize_row_q5_K>;
    case DType::Q6_K: return dequantize_erased<block_q6_K, dequantize_row_q6_K>;
    case DType::Q8_K: return dequantize_erased<block_q8_K, dequantize_row_q8_K>;
    case DType::IQ2_XXS: return dequantize_erased<block_iq2_xxs, dequantize_row_iq2_xxs>;
    case DType::IQ2_XS: return dequantize_erased<block_iq2_xs, dequantize_row_iq2_xs>;
    case DType::IQ2_S: return dequantize_erased<block_iq2_s, dequantize_row_iq2_s>;
    case DType::IQ3_XXS: return dequantize_erased<block_iq3_xxs, dequantize_row_iq3_xxs>;
    case DType::IQ3_S: return dequantize_erased<block_iq3_s, dequantize_row_iq3_s>;
    case DType::IQ1_S: return dequantize_erased<block_iq1_s, dequantize_row_iq1_s>;
    case DType::IQ1_M: return dequantize_erased<block_iq1_m, dequantize_row_iq1_m>;
    case DType::IQ4_NL: return dequantize_erased<block_iq4_nl, dequantize_row_iq4_nl>;
    case DType::IQ4_XS: return dequantize_erased<block_iq4_xs, dequantize_row_iq4_xs>;
    case DType::TQ1_0: return dequantize_erased<block_tq1_0, dequantize_row_tq1_0>;
    case DType::TQ2_0: return dequantize_erased<block_tq2_0, dequantize_row_tq2_0>;
    default: return nullptr;
  }
}

// The quantizer of a type the model makes at inference time (activations: F32, Q8_0, Q8_1, Q8_K;
// KV cache rows: F16, BF16, Q4_0 ... Q8_0), the same function as quant/ref.hpp's quantize_row_fn
// for these types; nullptr for the others (their quantizers are offline searches).
inline QuantizeRowFn runtime_quantize_row_fn(DType t) {
  using detail::quantize_erased;
  switch (t) {
    case DType::F32: return quantize_erased<float, fp32_copy_row>;
    case DType::F16: return quantize_erased<ggml_half, fp32_to_fp16_row>;
    case DType::BF16: return quantize_erased<ggml_bf16, fp32_to_bf16_row>;
    case DType::Q4_0: return quantize_erased<block_q4_0, quantize_row_legacy_ref<block_q4_0>>;
    case DType::Q4_1: return quantize_erased<block_q4_1, quantize_row_legacy_ref<block_q4_1>>;
    case DType::Q5_0: return quantize_erased<block_q5_0, quantize_row_legacy_ref<block_q5_0>>;
    case DType::Q5_1: return quantize_erased<block_q5_1, quantize_row_legacy_ref<block_q5_1>>;
    case DType::Q8_0: return quantize_erased<block_q8_0, quantize_row_q8_0_ref>;
    case DType::Q8_1: return quantize_erased<block_q8_1, quantize_row_q8_1_ref>;
    case DType::Q8_K: return quantize_erased<block_q8_K, quantize_row_q8_K_ref>;
    default: return nullptr;
  }
}

inline bool can_dequantize(DType t) { return dequantize_row_fn(t) != nullptr; }

// y[0..k) = the k elements stored in x (a row of type t). Throws Error for an unsupported type
// or k not a multiple of t's block size.
inline void dequantize_row(DType t, const void* x, float* y, int64_t k) {
  const DequantizeRowFn f = dequantize_row_fn(t);
  detail::check_row(t, k, f != nullptr, "dequantize");
  f(x, y, k);
}

}  // namespace edgellm
