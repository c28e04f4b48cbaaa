// Registers the hand-written NEON kernels (ARMv8.0 and, when asked, dotprod). arm64 only.
#pragma once
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/entry.hpp"

#if EDGELLM_HAS_NEON
#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/kernels/neon/dot_kquants.hpp"
#include "edgellm/kernels/neon/dot_legacy.hpp"
#include "edgellm/kernels/neon/float_ops.hpp"
#include "edgellm/kernels/neon/kv_ops.hpp"
#include "edgellm/kernels/neon/packed.hpp"
#include "edgellm/kernels/neon/packed_kquants.hpp"
#include "edgellm/kernels/neon/quantize.hpp"

namespace edgellm {

// ARMv8.0 NEON: every weight type, the activation quantizers and the KV cache row conversions.
inline constexpr KernelEntry kNeonKernelEntries[] = {
    {DType::Q4_0, vec_dot_q4_0_q8_0_neon, vec_dot_rows_q4_0_q8_0_neon, neon::kRowsLegacyNeon},
    {DType::Q4_1, vec_dot_q4_1_q8_1_neon, vec_dot_rows_q4_1_q8_1_neon, neon::kRowsLegacyNeon},
    {DType::Q5_0, vec_dot_q5_0_q8_0_neon, vec_dot_rows_q5_0_q8_0_neon, neon::kRowsLegacyNeon},
    {DType::Q5_1, vec_dot_q5_1_q8_1_neon, vec_dot_rows_q5_1_q8_1_neon, neon::kRowsLegacyNeon},
    {DType::Q8_0, vec_dot_q8_0_q8_0_neon, vec_dot_rows_q8_0_q8_0_neon, neon::kRowsLegacyNeon, quantize_row_q8_0_neon,
     dequantize_row_q8_0_neon},
    {DType::Q2_K, vec_dot_q2_K_q8_K_neon, vec_dot_rows_q2_K_q8_K_neon, neon::kRowsKQuantNeon},
    // ARMv8.0 q3_K / q5_K: two rows need more registers than there are (smull/sadalp temporaries),
    // and llvm-mca puts the pair above two single rows (docs/PERF.md), so the driver loops vec_dot.
    {DType::Q3_K, vec_dot_q3_K_q8_K_neon},
    {DType::Q4_K, vec_dot_q4_K_q8_K_neon, vec_dot_rows_q4_K_q8_K_neon, neon::kRowsKQuantNeon},
    {DType::Q5_K, vec_dot_q5_K_q8_K_neon},
    {DType::Q6_K, vec_dot_q6_K_q8_K_neon, vec_dot_rows_q6_K_q8_K_neon, neon::kRowsKQuantNeon},
    // i-quants and ternary types: one row per call (their codebook gathers fill the load pipe, so
    // a second row would share only the activation loads); IQ4_NL has the legacy four-row form.
    {DType::IQ2_XXS, vec_dot_iq2_xxs_q8_K_neon},
    {DType::IQ2_XS, vec_dot_iq2_xs_q8_K_neon},
    {DType::IQ2_S, vec_dot_iq2_s_q8_K_neon},
    {DType::IQ3_XXS, vec_dot_iq3_xxs_q8_K_neon},
    {DType::IQ3_S, vec_dot_iq3_s_q8_K_neon},
    {DType::IQ1_S, vec_dot_iq1_s_q8_K_neon},
    {DType::IQ1_M, vec_dot_iq1_m_q8_K_neon},
    {DType::IQ4_XS, vec_dot_iq4_xs_q8_K_neon},
    {DType::IQ4_NL, vec_dot_iq4_nl_q8_0_neon, vec_dot_rows_iq4_nl_q8_0_neon, neon::kRowsLegacyNeon},
    {DType::TQ1_0, vec_dot_tq1_0_q8_K_neon},
    {DType::TQ2_0, vec_dot_tq2_0_q8_K_neon},
    {DType::F32, vec_dot_f32_f32_neon},
    {DType::F16, vec_dot_f16_f32_neon, nullptr, 1, nullptr, fp16_to_fp32_row_neon},  // KV cache rows (attention)
    {DType::BF16, vec_dot_bf16_f32_neon},
    {DType::Q8_1, nullptr, nullptr, 1, quantize_row_q8_1_neon},
    {DType::Q8_K, nullptr, nullptr, 1, quantize_row_q8_K_neon},
};
inline constexpr TableView<NotSupported> kNeonNotSupported{};  // none beyond kNoKernelAnywhere

// dotprod (sdot), registered over kNeonKernelEntries when the CPU has it.
inline constexpr KernelEntry kDotprodKernelEntries[] = {
    {DType::Q4_0, vec_dot_q4_0_q8_0_dotprod, vec_dot_rows_q4_0_q8_0_dotprod, neon::kRowsLegacyNeon},
    {DType::Q4_1, vec_dot_q4_1_q8_1_dotprod, vec_dot_rows_q4_1_q8_1_dotprod, neon::kRowsLegacyNeon},
    {DType::Q5_0, vec_dot_q5_0_q8_0_dotprod, vec_dot_rows_q5_0_q8_0_dotprod, neon::kRowsLegacyNeon},
    {DType::Q5_1, vec_dot_q5_1_q8_1_dotprod, vec_dot_rows_q5_1_q8_1_dotprod, neon::kRowsLegacyNeon},
    {DType::Q8_0, vec_dot_q8_0_q8_0_dotprod, vec_dot_rows_q8_0_q8_0_dotprod, neon::kRowsLegacyNeon},
    {DType::Q2_K, vec_dot_q2_K_q8_K_dotprod, vec_dot_rows_q2_K_q8_K_dotprod, neon::kRowsKQuantNeon},
    {DType::Q3_K, vec_dot_q3_K_q8_K_dotprod, vec_dot_rows_q3_K_q8_K_dotprod, neon::kRowsKQuantNeon},
    {DType::Q4_K, vec_dot_q4_K_q8_K_dotprod, vec_dot_rows_q4_K_q8_K_dotprod, neon::kRowsKQuantNeon},
    {DType::Q5_K, vec_dot_q5_K_q8_K_dotprod, vec_dot_rows_q5_K_q8_K_dotprod, neon::kRowsKQuantNeon},
    {DType::Q6_K, vec_dot_q6_K_q8_K_dotprod, vec_dot_rows_q6_K_q8_K_dotprod, neon::kRowsKQuantNeon},
    // i-quants and ternary types: one row per call, as on ARMv8.0
    {DType::IQ2_XXS, vec_dot_iq2_xxs_q8_K_dotprod},
    {DType::IQ2_XS, vec_dot_iq2_xs_q8_K_dotprod},
    {DType::IQ2_S, vec_dot_iq2_s_q8_K_dotprod},
    {DType::IQ3_XXS, vec_dot_iq3_xxs_q8_K_dotprod},
    {DType::IQ3_S, vec_dot_iq3_s_q8_K_dotprod},
    {DType::IQ1_S, vec_dot_iq1_s_q8_K_dotprod},
    {DType::IQ1_M, vec_dot_iq1_m_q8_K_dotprod},
    {DType::IQ4_XS, vec_dot_iq4_xs_q8_K_dotprod},
    {DType::IQ4_NL, vec_dot_iq4_nl_q8_0_dotprod, vec_dot_rows_iq4_nl_q8_0_dotprod, neon::kRowsLegacyNeon},
    {DType::TQ1_0, vec_dot_tq1_0_q8_K_dotprod},
    {DType::TQ2_0, vec_dot_tq2_0_q8_K_dotprod},
};
inline constexpr NotSupported kDotprodNotSupported[] = {
    {DType::F32, "float weights: no integer dot; the ARMv8.0 kernel serves"},
    {DType::F16, "float weights: no integer dot; the ARMv8.0 kernel serves"},
    {DType::BF16, "float weights: no integer dot; the ARMv8.0 kernel serves"},
};

// Overrides the table's entries; dotprod = the CPU executes sdot (the caller checked).
inline void register_neon_kernels(KernelTable& t, bool dotprod) {
  register_entries(t, kNeonKernelEntries, "neon");
  // Row-interleaved x4 forms (repacked at load) need the by-element sdot; ARMv8.0 keeps the rows kernels.
  if (dotprod) {
    register_entries(t, kDotprodKernelEntries, "dotprod");
    register_neon_packed(t);
    register_neon_packed_kquants(t);
  }
  FloatKernels& f = t.f;
  f.rmsnorm = rmsnorm_neon;
  f.softmax = softmax_neon;
  f.silu_mul = silu_mul_neon;
  f.rope = rope_neon;
  f.rope_neox = rope_neox_neon;
  f.gemm_f32 = gemm_f32_neon;
  f.transpose_f32 = transpose_f32_neon;
  f.variant = "neon";
}

}  // namespace edgellm
#endif
