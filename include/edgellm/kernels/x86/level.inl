// One level of the x86 kernels: the bodies of kernels/x86/*.inl inside namespace
// edgellm::EDGELLM_X86_LEVEL_NS, and the level's register_x86_kernels. No include guard:
// kernels/x86/register.hpp includes it once per level it compiles, having defined
//   EDGELLM_X86_LEVEL_NS      the namespace (x86_avx2, x86_avx2_vnni, x86_avx512, x86_avx512_vnni)
//   EDGELLM_X86_LEVEL_ISA     its Isa (Isa::Avx2, ...)
//   EDGELLM_X86_LEVEL_TARGET  the function target attribute (dispatch builds)
//   EDGELLM_X86_AVXVNNI, EDGELLM_X86_AVX512 (F+BW+VL+DQ), EDGELLM_X86_AVX512VNNI, EDGELLM_X86_GFNI,
//   EDGELLM_X86_AVX512VBMI    0 / 1: the forms the bodies take (#if), not the compiler's macros
// and undefines them at the end. In a dispatch build (no AVX2 compile flags) every function of the
// bodies gets the level's target attribute; in a build for an AVX2 target the flags cover them.
#define EDGELLM_X86_VNNI (EDGELLM_X86_AVXVNNI || EDGELLM_X86_AVX512VNNI)

#if EDGELLM_X86_DISPATCH
#if defined(__clang__)
EDGELLM_PRAGMA(clang attribute push(__attribute__((target(EDGELLM_X86_LEVEL_TARGET))), apply_to = function))
#else
EDGELLM_PRAGMA(GCC push_options)
EDGELLM_PRAGMA(GCC target(EDGELLM_X86_LEVEL_TARGET))
#endif
#endif

namespace edgellm {
namespace EDGELLM_X86_LEVEL_NS {

#include "edgellm/kernels/x86/common.inl"
#include "edgellm/kernels/x86/quantize.inl"
#include "edgellm/kernels/x86/dot_float.inl"
#include "edgellm/kernels/x86/dot_legacy.inl"
#include "edgellm/kernels/x86/dot_kquants.inl"
#include "edgellm/kernels/x86/dot_iquants.inl"
#include "edgellm/kernels/x86/kv_ops.inl"
#include "edgellm/kernels/x86/float_ops.inl"
#include "edgellm/kernels/x86/gemm_u8.inl"
#include "edgellm/kernels/x86/packed.inl"
#include "edgellm/kernels/x86/packed_kquants.inl"
#include "edgellm/kernels/x86/packed_kquants_avx2.inl"

inline constexpr Isa kIsa = EDGELLM_X86_LEVEL_ISA;

// Overrides the entries of register_ref_kernels with this level's variants (vec_dot_type unchanged).
inline void register_x86_kernels(KernelTable& t) {
  struct Entry {
    DType type;
    VecDotFn dot;
    VecDotRowsFn rows;
    int rows_per_call;
  };
  const Entry entries[] = {
      {DType::Q4_0, vec_dot_q4_0_q8_0_x86, vec_dot_rows_q4_0_q8_0_x86, kRowsLegacyX86},
      {DType::Q4_1, vec_dot_q4_1_q8_1_x86, vec_dot_rows_q4_1_q8_1_x86, kRowsLegacyX86},
      {DType::Q5_0, vec_dot_q5_0_q8_0_x86, vec_dot_rows_q5_0_q8_0_x86, kRowsLegacyX86},
      {DType::Q5_1, vec_dot_q5_1_q8_1_x86, vec_dot_rows_q5_1_q8_1_x86, kRowsLegacyX86},
      {DType::Q8_0, vec_dot_q8_0_q8_0_x86, vec_dot_rows_q8_0_q8_0_x86, kRowsLegacyX86},
      {DType::Q2_K, vec_dot_q2_K_q8_K_x86, vec_dot_rows_q2_K_q8_K_x86, kRowsKQuantX86},
      {DType::Q3_K, vec_dot_q3_K_q8_K_x86, vec_dot_rows_q3_K_q8_K_x86, kRowsKQuantX86},
      {DType::Q4_K, vec_dot_q4_K_q8_K_x86, vec_dot_rows_q4_K_q8_K_x86, kRowsKQuantX86},
      {DType::Q5_K, vec_dot_q5_K_q8_K_x86, vec_dot_rows_q5_K_q8_K_x86, kRowsKQuantX86},
      {DType::Q6_K, vec_dot_q6_K_q8_K_x86, vec_dot_rows_q6_K_q8_K_x86, kRowsKQuantX86},
      {DType::IQ2_XXS, vec_dot_iq2_xxs_q8_K_x86, vec_dot_rows_iq2_xxs_q8_K_x86, kRows_iq2_xxs_q8_K_x86},
      {DType::IQ2_XS, vec_dot_iq2_xs_q8_K_x86, vec_dot_rows_iq2_xs_q8_K_x86, kRows_iq2_xs_q8_K_x86},
      {DType::IQ2_S, vec_dot_iq2_s_q8_K_x86, vec_dot_rows_iq2_s_q8_K_x86, kRows_iq2_s_q8_K_x86},
      {DType::IQ3_XXS, vec_dot_iq3_xxs_q8_K_x86, vec_dot_rows_iq3_xxs_q8_K_x86, kRows_iq3_xxs_q8_K_x86},
      {DType::IQ3_S, vec_dot_iq3_s_q8_K_x86, vec_dot_rows_iq3_s_q8_K_x86, kRows_iq3_s_q8_K_x86},
      {DType::IQ1_S, vec_dot_iq1_s_q8_K_x86, vec_dot_rows_iq1_s_q8_K_x86, kRows_iq1_s_q8_K_x86},
      {DType::IQ1_M, vec_dot_iq1_m_q8_K_x86, vec_dot_rows_iq1_m_q8_K_x86, kRows_iq1_m_q8_K_x86},
      {DType::IQ4_XS, vec_dot_iq4_xs_q8_K_x86, vec_dot_rows_iq4_xs_q8_K_x86, kRows_iq4_xs_q8_K_x86},
      {DType::IQ4_NL, vec_dot_iq4_nl_q8_0_x86, vec_dot_rows_iq4_nl_q8_0_x86, kRows_iq4_nl_q8_0_x86},
      {DType::TQ1_0, vec_dot_tq1_0_q8_K_x86, vec_dot_rows_tq1_0_q8_K_x86, kRows_tq1_0_q8_K_x86},
      {DType::TQ2_0, vec_dot_tq2_0_q8_K_x86, vec_dot_rows_tq2_0_q8_K_x86, kRows_tq2_0_q8_K_x86},
      {DType::F32, vec_dot_f32_f32_x86, vec_dot_rows_f32_f32_x86, 4},
      {DType::F16, vec_dot_f16_f32_x86, vec_dot_rows_f16_f32_x86, 4},
      {DType::BF16, vec_dot_bf16_f32_x86, vec_dot_rows_bf16_f32_x86, 4},
  };
  for (const Entry& e : entries) {
    TypeKernels& k = t.of(e.type);
    k.vec_dot = e.dot;
    k.vec_dot_rows = e.rows;
    k.rows_per_call = e.rows_per_call;
    k.variant = isa_name(kIsa);
  }
  t.of(DType::Q8_0).from_float = quantize_row_q8_0_x86;
  t.of(DType::Q8_1).from_float = quantize_row_q8_1_x86;
  t.of(DType::Q8_K).from_float = quantize_row_q8_K_x86;
  t.of(DType::F16).to_float = fp16_to_fp32_row_x86;  // KV cache rows (attention)
  t.of(DType::Q8_0).to_float = dequantize_row_q8_0_x86;
  FloatKernels& f = t.f;
  f.rmsnorm = rmsnorm_x86;
  f.softmax = softmax_x86;
  f.silu_mul = silu_mul_x86;
  f.rope = rope_x86;
  f.gemm_f32 = gemm_f32_x86;
  f.transpose_f32 = transpose_f32_x86;
  f.variant = isa_name(kIsa);
  register_x86_packed(t);
  register_x86_packed_kquants(t);
  t.u8_gemm.rows = xs::kGemmRows;
  t.u8_gemm.toks = xs::kGemmToks;
  t.u8_gemm.max_u = xs::kMaxU;
  t.u8_gemm.tile = xs::gemm_u8_tile_x86;
#if !EDGELLM_X86_VNNI
  t.u8_gemm.tile_k = xs::gemm_u8_tile_k_x86;
  t.u8_gemm.tile_s8 = xs::gemm_u8_tile_s8_x86;
  t.u8_gemm.group_rows = kGroupRows;
  t.u8_gemm.interleave = xs::u8_interleave_x86;
#endif
  t.u8_gemm.name = xs::GemmVec::kBytes == 64 ? "u8 VNNI GEMM (64-byte steps)"
                   : EDGELLM_X86_VNNI        ? "u8 VNNI GEMM (32-byte steps)"
                                             : "u8 maddubs GEMM (32-byte steps)";
  t.isa = kIsa;
  t.stream_decode = true;
}

}  // namespace EDGELLM_X86_LEVEL_NS
}  // namespace edgellm

#if EDGELLM_X86_DISPATCH
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

#undef EDGELLM_X86_VNNI
#undef EDGELLM_X86_LEVEL_NS
#undef EDGELLM_X86_LEVEL_ISA
#undef EDGELLM_X86_LEVEL_TARGET
#undef EDGELLM_X86_AVXVNNI
#undef EDGELLM_X86_AVX512
#undef EDGELLM_X86_AVX512VNNI
#undef EDGELLM_X86_GFNI
#undef EDGELLM_X86_AVX512VBMI
