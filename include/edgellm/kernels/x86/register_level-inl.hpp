// One level of the x86 kernels, the one place their bodies are compiled: kernels/x86/register.hpp
// defines the level's macros (kernels/x86/level.hpp lists them) and includes this once per level;
// this opens the level's namespace under its target attribute, includes the kernel bodies
// (kernels/x86/*-inl.hpp, no include guard, no prologue) in dependency order, defines the level's
// table and register_kernels, and undefines the macros.
#define EDGELLM_X86_VNNI (EDGELLM_X86_AVXVNNI || EDGELLM_X86_AVX512VNNI)

EDGELLM_X86_BEGIN
namespace edgellm::EDGELLM_X86_LEVEL_NS {

inline constexpr Isa kIsa = EDGELLM_X86_LEVEL_ISA;
// The level's forms (kernels/x86/level.hpp's switches) as constants: the kernel bodies choose a
// form by `if constexpr` on them where both forms compile at every level.
inline constexpr bool kAvxVnni = EDGELLM_X86_AVXVNNI, kAvx512 = EDGELLM_X86_AVX512,
                      kAvx512Vnni = EDGELLM_X86_AVX512VNNI, kVnni = EDGELLM_X86_VNNI, kGfni = EDGELLM_X86_GFNI,
                      kAvx512Vbmi = EDGELLM_X86_AVX512VBMI;
#if defined(EDGELLM_X86_EMULATE_AVXVNNI)
inline constexpr bool kEmulateAvxVnni = true;  // kernels/x86/register.hpp, tests only
#else
inline constexpr bool kEmulateAvxVnni = false;
#endif

#include "edgellm/kernels/x86/common-inl.hpp"
#include "edgellm/kernels/x86/quantize-inl.hpp"
#include "edgellm/kernels/x86/dot_float-inl.hpp"
#include "edgellm/kernels/x86/dot_legacy-inl.hpp"
#include "edgellm/kernels/x86/dot_kquants-inl.hpp"
#include "edgellm/kernels/x86/dot_iquants-inl.hpp"
#include "edgellm/kernels/x86/kv_ops-inl.hpp"
#include "edgellm/kernels/x86/float_ops-inl.hpp"
#include "edgellm/kernels/x86/gemm_u8-inl.hpp"
#include "edgellm/kernels/x86/packed-inl.hpp"
#include "edgellm/kernels/x86/packed_kquants-inl.hpp"
#include "edgellm/kernels/x86/transcoded_iquants-inl.hpp"
#if EDGELLM_X86_AVX512VNNI
#include "edgellm/kernels/x86/packed_kquants_x16-inl.hpp"
#elif EDGELLM_X86_DISPATCH && EDGELLM_X86_AVXVNNI
// The 8-row forms use no VNNI instruction, and a dispatch build compiles the avx2 level first: the
// avx2-vnni level registers that level's functions (the same code and bits) instead of compiling
// them a second time, which cost every translation unit of a plain -O2 build ~3 s.
inline void register_packed_kquants(KernelTable& t) { x86_avx2::register_packed_kquants(t); }
#else
#include "edgellm/kernels/x86/packed_kquants_x8-inl.hpp"
#endif

// This level's kernels over register_ref_kernels' entries: every weight
// type, the activation quantizers and the KV cache row conversions.
inline constexpr KernelEntry kKernelEntries[] = {
    {DType::Q4_0, vec_dot<FmtQ4_0>, vec_dot_rows<FmtQ4_0, kRowsLegacy>, kRowsLegacy},
    {DType::Q4_1, vec_dot<FmtQ4_1>, vec_dot_rows<FmtQ4_1, kRowsLegacy>, kRowsLegacy},
    {DType::Q5_0, vec_dot<FmtQ5_0>, vec_dot_rows<FmtQ5_0, kRowsLegacy>, kRowsLegacy},
    {DType::Q5_1, vec_dot<FmtQ5_1>, vec_dot_rows<FmtQ5_1, kRowsLegacy>, kRowsLegacy},
    {DType::Q8_0, vec_dot<FmtQ8_0>, vec_dot_rows<FmtQ8_0, kRowsLegacy>, kRowsLegacy, quantize_row_q8_0,
     dequantize_row_q8_0},
    {DType::Q2_K, vec_dot<FmtQ2_K>, vec_dot_rows<FmtQ2_K, kRowsKQuant>, kRowsKQuant},
    {DType::Q3_K, vec_dot<FmtQ3_K>, vec_dot_rows<FmtQ3_K, kRowsKQuant>, kRowsKQuant},
    {DType::Q4_K, vec_dot<FmtQ4_K>, vec_dot_rows<FmtQ4_K, kRowsKQuant>, kRowsKQuant},
    {DType::Q5_K, vec_dot<FmtQ5_K>, vec_dot_rows<FmtQ5_K, kRowsKQuant>, kRowsKQuant},
    {DType::Q6_K, vec_dot<FmtQ6_K>, vec_dot_rows<FmtQ6_K, kRowsKQuant>, kRowsKQuant},
    {DType::IQ2_XXS, vec_dot<FmtIQ2_XXS>, vec_dot_rows<FmtIQ2_XXS, kRowsIQ>, kRowsIQ},
    {DType::IQ2_XS, vec_dot<FmtIQ2_XS>, vec_dot_rows<FmtIQ2_XS, kRowsIQ>, kRowsIQ},
    {DType::IQ2_S, vec_dot<FmtIQ2_S>, vec_dot_rows<FmtIQ2_S, kRowsIQ>, kRowsIQ},
    {DType::IQ3_XXS, vec_dot<FmtIQ3_XXS>, vec_dot_rows<FmtIQ3_XXS, kRowsIQ>, kRowsIQ},
    {DType::IQ3_S, vec_dot<FmtIQ3_S>, vec_dot_rows<FmtIQ3_S, kRowsIQ>, kRowsIQ},
    {DType::IQ1_S, vec_dot<FmtIQ1_S>, vec_dot_rows<FmtIQ1_S, kRowsIQ>, kRowsIQ},
    {DType::IQ1_M, vec_dot<FmtIQ1_M>, vec_dot_rows<FmtIQ1_M, kRowsIQ>, kRowsIQ},
    {DType::IQ4_XS, vec_dot<FmtIQ4_XS>, vec_dot_rows<FmtIQ4_XS, kRowsIQ>, kRowsIQ},
    {DType::IQ4_NL, vec_dot<FmtIQ4_NL>, vec_dot_rows<FmtIQ4_NL, kRowsIQ>, kRowsIQ},
    {DType::TQ1_0, vec_dot<FmtTQ1_0>, vec_dot_rows<FmtTQ1_0, kRowsIQ>, kRowsIQ},
    {DType::TQ2_0, vec_dot<FmtTQ2_0>, vec_dot_rows<FmtTQ2_0, kRowsTQ2_0>, kRowsTQ2_0},
    {DType::F32, vec_dot_f32_f32, vec_dot_rows_f32_f32, 4},
    {DType::F16, vec_dot_f16_f32, vec_dot_rows_f16_f32, 4, nullptr, fp16_to_fp32_row},  // KV cache rows (attention)
    {DType::BF16, vec_dot_bf16_f32, vec_dot_rows_bf16_f32, 4},
    {DType::Q8_1, nullptr, nullptr, 1, quantize_row_q8_1},
    {DType::Q8_K, nullptr, nullptr, 1, quantize_row_q8_K},
};
inline constexpr TableView<NotSupported> kNotSupported{};  // none beyond kNoKernelAnywhere

inline void register_kernels(KernelTable& t) {
  register_entries(t, kKernelEntries, isa_name(kIsa));
  FloatKernels& f = t.f;
  f.rmsnorm = rmsnorm;
  f.softmax = softmax;
  f.silu_mul = silu_mul;
  f.rope = rope;
  f.gemm_f32 = gemm_f32;
  f.transpose_f32 = transpose_f32;
  f.variant = isa_name(kIsa);
  register_packed(t);
  register_packed_kquants(t);
  register_transcoded_iquants(t);
  t.u8_gemm.rows = kGemmRows;
  t.u8_gemm.toks = kGemmToks;
  t.u8_gemm.max_u = kMaxU;
  t.u8_gemm.tile = gemm_u8_tile;
  t.u8_gemm.tile_k = gemm_u8_tile_k;
  t.u8_gemm.group_rows = kGroupTileRows;
  t.u8_gemm.interleave = u8_interleave;
  if constexpr (!kVnni) {
    t.u8_gemm.tile_s8 = gemm_u8_tile_s8;
    t.u8_gemm.tile_sk = gemm_u8_tile_sk;
    t.u8_gemm.tile_k_narrow = gemm_u8_tile_k_narrow;
    t.u8_gemm.narrow_max_u = kNarrowMaxU;
    t.u8_gemm.tile_ks = gemm_u8_tile_ks;
    t.u8_gemm.tile_ks_narrow = gemm_u8_tile_ks_narrow;
    t.u8_gemm.ks_max_w = kSignedMaxW;
    t.u8_gemm.ks_narrow_max_w = kSignedNarrowMaxW;
  }
  t.u8_gemm.name = GemmVec::kBytes == 64 ? "u8 VNNI GEMM (64-byte steps)"
                   : kVnni               ? "u8 VNNI GEMM (32-byte steps)"
                                         : "u8 maddubs GEMM (32-byte steps)";
  t.isa = kIsa;
  t.stream_decode = true;
}

}  // namespace edgellm::EDGELLM_X86_LEVEL_NS
EDGELLM_X86_END

#undef EDGELLM_X86_VNNI
#undef EDGELLM_X86_LEVEL_NS
#undef EDGELLM_X86_LEVEL_ISA
#undef EDGELLM_X86_LEVEL_TARGET
#undef EDGELLM_X86_AVXVNNI
#undef EDGELLM_X86_AVX512
#undef EDGELLM_X86_AVX512VNNI
#undef EDGELLM_X86_GFNI
#undef EDGELLM_X86_AVX512VBMI
