// Registers the scalar reference kernels (the spec every SIMD variant is tested against).
#pragma once
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/entry.hpp"
#include "edgellm/kernels/scalar/dot.hpp"
#include "edgellm/kernels/scalar/dot_iquants.hpp"
#include "edgellm/kernels/scalar/float_ops.hpp"
#include "edgellm/quant/dequantize.hpp"

namespace edgellm {

// The reference dot kernel of every weight type; the converters come from quant/dequantize.hpp.
inline constexpr KernelEntry kRefKernelEntries[] = {
    {DType::Q4_0, vec_dot_q4_0_q8_0_ref},
    {DType::Q4_1, vec_dot_q4_1_q8_1_ref},
    {DType::Q5_0, vec_dot_q5_0_q8_0_ref},
    {DType::Q5_1, vec_dot_q5_1_q8_1_ref},
    {DType::Q8_0, vec_dot_q8_0_q8_0_ref},
    {DType::Q2_K, vec_dot_q2_K_q8_K_ref},
    {DType::Q3_K, vec_dot_q3_K_q8_K_ref},
    {DType::Q4_K, vec_dot_q4_K_q8_K_ref},
    {DType::Q5_K, vec_dot_q5_K_q8_K_ref},
    {DType::Q6_K, vec_dot_q6_K_q8_K_ref},
    {DType::F32, vec_dot_f32_f32_ref},
    {DType::F16, vec_dot_f16_f32_ref},
    {DType::BF16, vec_dot_bf16_f32_ref},
    // i-quants and ternary types
    {DType::IQ2_XXS, vec_dot_iq2_xxs_q8_K_ref},
    {DType::IQ2_XS, vec_dot_iq2_xs_q8_K_ref},
    {DType::IQ2_S, vec_dot_iq2_s_q8_K_ref},
    {DType::IQ3_XXS, vec_dot_iq3_xxs_q8_K_ref},
    {DType::IQ3_S, vec_dot_iq3_s_q8_K_ref},
    {DType::IQ1_S, vec_dot_iq1_s_q8_K_ref},
    {DType::IQ1_M, vec_dot_iq1_m_q8_K_ref},
    {DType::IQ4_NL, vec_dot_iq4_nl_q8_0_ref},
    {DType::IQ4_XS, vec_dot_iq4_xs_q8_K_ref},
    {DType::TQ1_0, vec_dot_tq1_0_q8_K_ref},
    {DType::TQ2_0, vec_dot_tq2_0_q8_K_ref},
};

// None beyond kNoKernelAnywhere (kernels/entry.hpp): the reference multiplies every weight type.
inline constexpr TableView<NotSupported> kRefNotSupported{};

inline void register_ref_kernels(KernelTable& t) {
  register_entries(t, kRefKernelEntries, "ref");
  // Converters: every dequantizer, and the quantizers of the types made at run time (activations,
  // KV cache rows: quant/dequantize.hpp). The weight types' offline quantizers are not kernels.
  for (uint32_t id = 0; id < kDTypeCount; ++id) {
    if (!dtype_valid(id)) continue;
    TypeKernels& k = t.types[id];
    k.from_float = runtime_quantize_row_fn(static_cast<DType>(id));
    k.to_float = dequantize_row_fn(static_cast<DType>(id));
  }
  FloatKernels& f = t.f;
  f.rmsnorm = rmsnorm_ref;
  f.softmax = softmax_ref;
  f.silu_mul = silu_mul_ref;
  f.rope = rope_ref;
  f.rope_neox = rope_neox_ref;  // also the x86 tables' (one pass over q and k per token: not worth SIMD there)
  f.gemm_f32 = gemm_f32_ref;
  f.transpose_f32 = transpose_f32_ref;
  f.variant = "ref";
}

}  // namespace edgellm
