// Registers the hand-written NEON kernels (ARMv8.0 and, when asked, dotprod). arm64 only.
#pragma once
#include <cstddef>
#include <type_traits>

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
#include "edgellm/kernels/neon/transcoded_iquants.hpp"
#include "edgellm/kernels/neon/vec_dot.hpp"

namespace edgellm {

namespace neon {
// Format F's kernels (family Body) for int8 dot D: vec_dot_neon / vec_dot_dotprod, and the family's
// rows kernel where it has one (i-quants and ternary types: one row per call, their codebook
// gathers fill the load pipe, so a second row would share only the activation loads; IQ4_NL has the
// legacy four-row form). ARMv8.0 q3_K / q5_K have no rows kernel: two rows need more registers than
// there are (smull/sadalp temporaries), and llvm-mca puts the pair above two single rows
// (docs/PERF.md), so the driver loops vec_dot.
template <class D, class Body, class F>
constexpr KernelEntry dot_entry(DType t) {
  constexpr bool kSdot = std::is_same_v<D, DotSdot>;
  constexpr VecDotFn row = kSdot ? &vec_dot_dotprod<Body, F> : &vec_dot_neon<Body, F>;
  constexpr bool kKQuant = std::is_same_v<Body, KQuantBody>;
  constexpr bool kNoRows = !kSdot && (std::is_same_v<F, KQ3> || std::is_same_v<F, KQ5>);
  if constexpr ((kKQuant || std::is_base_of_v<LegacyBody, Body>) && !kNoRows)
    return {t, row, kSdot ? &vec_dot_rows_dotprod<Body, F> : &vec_dot_rows_neon<Body, F>,
            kKQuant ? kRowsKQuantNeon : kRowsLegacyNeon};
  else
    return {t, row};
}

// Q8_0 is also an activation type: in the ARMv8.0 table its row carries the quantizer and the row
// conversion too (one row per type).
template <class D>
constexpr KernelEntry q8_0_entry() {
  KernelEntry e = dot_entry<D, LegacyBody, FmtQ8_0>(DType::Q8_0);
  if constexpr (std::is_same_v<D, DotV80>) {
    e.from_float = quantize_row_q8_0_neon;
    e.to_float = dequantize_row_q8_0_neon;
  }
  return e;
}

// Every quantized weight type's dot for int8 dot D: the ARMv8.0 (DotV80) and dotprod (DotSdot)
// tables below.
template <class D>
inline constexpr KernelEntry kDotEntries[] = {
    dot_entry<D, LegacyBody, FmtQ4_0>(DType::Q4_0),
    dot_entry<D, LegacyBody, FmtQ4_1>(DType::Q4_1),
    dot_entry<D, LegacyBody, FmtQ5_0>(DType::Q5_0),
    dot_entry<D, LegacyBody, FmtQ5_1>(DType::Q5_1),
    q8_0_entry<D>(),
    dot_entry<D, KQuantBody, KQ2>(DType::Q2_K),
    dot_entry<D, KQuantBody, KQ3>(DType::Q3_K),
    dot_entry<D, KQuantBody, KQ4>(DType::Q4_K),
    dot_entry<D, KQuantBody, KQ5>(DType::Q5_K),
    dot_entry<D, KQuantBody, KQ6>(DType::Q6_K),
    dot_entry<D, PickedBody, IQ2XXS>(DType::IQ2_XXS),
    dot_entry<D, PickedBody, IQ2XS>(DType::IQ2_XS),
    dot_entry<D, PickedBody, IQ2S>(DType::IQ2_S),
    dot_entry<D, PickedBody, IQ3XXS>(DType::IQ3_XXS),
    dot_entry<D, PickedBody, IQ3S>(DType::IQ3_S),
    dot_entry<D, DeferredBody, IQ1S>(DType::IQ1_S),
    dot_entry<D, DeferredBody, IQ1M>(DType::IQ1_M),
    dot_entry<D, PickedBody, IQ4XS>(DType::IQ4_XS),
    dot_entry<D, Iq4NlBody, FmtIQ4_NL>(DType::IQ4_NL),
    dot_entry<D, DeferredBody, TQ1>(DType::TQ1_0),
    dot_entry<D, DeferredBody, TQ2>(DType::TQ2_0),
};

// ARMv8.0 only: the float weights' dots, the other activation quantizers and the KV cache's F16 rows.
inline constexpr KernelEntry kV80OnlyEntries[] = {
    {DType::F32, vec_dot_f32_f32_neon},
    {DType::F16, vec_dot_f16_f32_neon, nullptr, 1, nullptr, fp16_to_fp32_row_neon},  // KV cache rows (attention)
    {DType::BF16, vec_dot_bf16_f32_neon},
    {DType::Q8_1, nullptr, nullptr, 1, quantize_row_q8_1_neon},
    {DType::Q8_K, nullptr, nullptr, 1, quantize_row_q8_K_neon},
};

// Two tables as one array (the ARMv8.0 registration).
template <size_t N, size_t M>
struct JoinedEntries {
  KernelEntry v[N + M];
};
template <size_t N, size_t M>
constexpr JoinedEntries<N, M> join_entries(const KernelEntry (&a)[N], const KernelEntry (&b)[M]) {
  JoinedEntries<N, M> r{};
  for (size_t i = 0; i < N; ++i) r.v[i] = a[i];
  for (size_t i = 0; i < M; ++i) r.v[N + i] = b[i];
  return r;
}
inline constexpr auto kV80Entries = join_entries(kDotEntries<DotV80>, kV80OnlyEntries);
}  // namespace neon

// ARMv8.0 NEON: every weight type, the activation quantizers and the KV cache row conversions.
inline constexpr const auto& kNeonKernelEntries = neon::kV80Entries.v;
inline constexpr TableView<NotSupported> kNeonNotSupported{};  // none beyond kNoKernelAnywhere

// dotprod (sdot), registered over kNeonKernelEntries when the CPU has it.
inline constexpr const auto& kDotprodKernelEntries = neon::kDotEntries<neon::DotSdot>;
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
  register_neon_transcoded_iquants(t, dotprod);  // both tables: the file form's int8 dot, decoded by tbl
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
