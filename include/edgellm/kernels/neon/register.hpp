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
#include "edgellm/kernels/neon/vec_dot.hpp"

namespace edgellm {

// ARMv8.0 NEON: every weight type, the activation quantizers and the KV cache row conversions.
inline constexpr KernelEntry kNeonKernelEntries[] = {
    {DType::Q4_0, vec_dot_neon<neon::LegacyBody, neon::FmtQ4_0>,
     vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ4_0>, neon::kRowsLegacyNeon},
    {DType::Q4_1, vec_dot_neon<neon::LegacyBody, neon::FmtQ4_1>,
     vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ4_1>, neon::kRowsLegacyNeon},
    {DType::Q5_0, vec_dot_neon<neon::LegacyBody, neon::FmtQ5_0>,
     vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ5_0>, neon::kRowsLegacyNeon},
    {DType::Q5_1, vec_dot_neon<neon::LegacyBody, neon::FmtQ5_1>,
     vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ5_1>, neon::kRowsLegacyNeon},
    {DType::Q8_0, vec_dot_neon<neon::LegacyBody, neon::FmtQ8_0>,
     vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ8_0>, neon::kRowsLegacyNeon,
     quantize_row_q8_0_neon, dequantize_row_q8_0_neon},
    {DType::Q2_K, vec_dot_neon<neon::KQuantBody, neon::KQ2>,
     vec_dot_rows_neon<neon::KQuantBody, neon::KQ2>, neon::kRowsKQuantNeon},
    // ARMv8.0 q3_K / q5_K: two rows need more registers than there are (smull/sadalp temporaries),
    // and llvm-mca puts the pair above two single rows (docs/PERF.md), so the driver loops vec_dot.
    {DType::Q3_K, vec_dot_neon<neon::KQuantBody, neon::KQ3>},
    {DType::Q4_K, vec_dot_neon<neon::KQuantBody, neon::KQ4>,
     vec_dot_rows_neon<neon::KQuantBody, neon::KQ4>, neon::kRowsKQuantNeon},
    {DType::Q5_K, vec_dot_neon<neon::KQuantBody, neon::KQ5>},
    {DType::Q6_K, vec_dot_neon<neon::KQuantBody, neon::KQ6>,
     vec_dot_rows_neon<neon::KQuantBody, neon::KQ6>, neon::kRowsKQuantNeon},
    // i-quants and ternary types: one row per call (their codebook gathers fill the load pipe, so
    // a second row would share only the activation loads); IQ4_NL has the legacy four-row form.
    {DType::IQ2_XXS, vec_dot_neon<neon::PickedBody, neon::IQ2XXS>},
    {DType::IQ2_XS, vec_dot_neon<neon::PickedBody, neon::IQ2XS>},
    {DType::IQ2_S, vec_dot_neon<neon::PickedBody, neon::IQ2S>},
    {DType::IQ3_XXS, vec_dot_neon<neon::PickedBody, neon::IQ3XXS>},
    {DType::IQ3_S, vec_dot_neon<neon::PickedBody, neon::IQ3S>},
    {DType::IQ1_S, vec_dot_neon<neon::DeferredBody, neon::IQ1S>},
    {DType::IQ1_M, vec_dot_neon<neon::DeferredBody, neon::IQ1M>},
    {DType::IQ4_XS, vec_dot_neon<neon::PickedBody, neon::IQ4XS>},
    {DType::IQ4_NL, vec_dot_neon<neon::Iq4NlBody, neon::FmtIQ4_NL>,
     vec_dot_rows_neon<neon::Iq4NlBody, neon::FmtIQ4_NL>, neon::kRowsLegacyNeon},
    {DType::TQ1_0, vec_dot_neon<neon::DeferredBody, neon::TQ1>},
    {DType::TQ2_0, vec_dot_neon<neon::DeferredBody, neon::TQ2>},
    {DType::F32, vec_dot_f32_f32_neon},
    {DType::F16, vec_dot_f16_f32_neon, nullptr, 1, nullptr, fp16_to_fp32_row_neon},  // KV cache rows (attention)
    {DType::BF16, vec_dot_bf16_f32_neon},
    {DType::Q8_1, nullptr, nullptr, 1, quantize_row_q8_1_neon},
    {DType::Q8_K, nullptr, nullptr, 1, quantize_row_q8_K_neon},
};
inline constexpr TableView<NotSupported> kNeonNotSupported{};  // none beyond kNoKernelAnywhere

// dotprod (sdot), registered over kNeonKernelEntries when the CPU has it.
inline constexpr KernelEntry kDotprodKernelEntries[] = {
    {DType::Q4_0, vec_dot_dotprod<neon::LegacyBody, neon::FmtQ4_0>,
     vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ4_0>, neon::kRowsLegacyNeon},
    {DType::Q4_1, vec_dot_dotprod<neon::LegacyBody, neon::FmtQ4_1>,
     vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ4_1>, neon::kRowsLegacyNeon},
    {DType::Q5_0, vec_dot_dotprod<neon::LegacyBody, neon::FmtQ5_0>,
     vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ5_0>, neon::kRowsLegacyNeon},
    {DType::Q5_1, vec_dot_dotprod<neon::LegacyBody, neon::FmtQ5_1>,
     vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ5_1>, neon::kRowsLegacyNeon},
    {DType::Q8_0, vec_dot_dotprod<neon::LegacyBody, neon::FmtQ8_0>,
     vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ8_0>, neon::kRowsLegacyNeon},
    {DType::Q2_K, vec_dot_dotprod<neon::KQuantBody, neon::KQ2>,
     vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ2>, neon::kRowsKQuantNeon},
    {DType::Q3_K, vec_dot_dotprod<neon::KQuantBody, neon::KQ3>,
     vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ3>, neon::kRowsKQuantNeon},
    {DType::Q4_K, vec_dot_dotprod<neon::KQuantBody, neon::KQ4>,
     vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ4>, neon::kRowsKQuantNeon},
    {DType::Q5_K, vec_dot_dotprod<neon::KQuantBody, neon::KQ5>,
     vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ5>, neon::kRowsKQuantNeon},
    {DType::Q6_K, vec_dot_dotprod<neon::KQuantBody, neon::KQ6>,
     vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ6>, neon::kRowsKQuantNeon},
    // i-quants and ternary types: one row per call, as on ARMv8.0
    {DType::IQ2_XXS, vec_dot_dotprod<neon::PickedBody, neon::IQ2XXS>},
    {DType::IQ2_XS, vec_dot_dotprod<neon::PickedBody, neon::IQ2XS>},
    {DType::IQ2_S, vec_dot_dotprod<neon::PickedBody, neon::IQ2S>},
    {DType::IQ3_XXS, vec_dot_dotprod<neon::PickedBody, neon::IQ3XXS>},
    {DType::IQ3_S, vec_dot_dotprod<neon::PickedBody, neon::IQ3S>},
    {DType::IQ1_S, vec_dot_dotprod<neon::DeferredBody, neon::IQ1S>},
    {DType::IQ1_M, vec_dot_dotprod<neon::DeferredBody, neon::IQ1M>},
    {DType::IQ4_XS, vec_dot_dotprod<neon::PickedBody, neon::IQ4XS>},
    {DType::IQ4_NL, vec_dot_dotprod<neon::Iq4NlBody, neon::FmtIQ4_NL>,
     vec_dot_rows_dotprod<neon::Iq4NlBody, neon::FmtIQ4_NL>, neon::kRowsLegacyNeon},
    {DType::TQ1_0, vec_dot_dotprod<neon::DeferredBody, neon::TQ1>},
    {DType::TQ2_0, vec_dot_dotprod<neon::DeferredBody, neon::TQ2>},
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
