// Registers the x86 (AVX2 / AVX-512) kernels. The only place besides kernels/x86/*.hpp that
// may include xsimd, and only when EDGELLM_HAS_XSIMD.
#pragma once
#include "edgellm/kernels/api.hpp"

#if EDGELLM_HAS_XSIMD
#include "edgellm/kernels/x86/dot_float.hpp"
#include "edgellm/kernels/x86/dot_kquants.hpp"
#include "edgellm/kernels/x86/dot_legacy.hpp"
#include "edgellm/kernels/x86/float_ops.hpp"
#include "edgellm/kernels/x86/gemm_u8.hpp"
#include "edgellm/kernels/x86/kv_ops.hpp"
#include "edgellm/kernels/x86/packed.hpp"
#include "edgellm/kernels/x86/packed_kquants.hpp"
#include "edgellm/kernels/x86/quantize.hpp"

namespace edgellm {

// Overrides the entries of register_ref_kernels with the x86 variants (vec_dot_type unchanged).
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
      {DType::F32, vec_dot_f32_f32_x86, vec_dot_rows_f32_f32_x86, 4},
      {DType::F16, vec_dot_f16_f32_x86, vec_dot_rows_f16_f32_x86, 4},
      {DType::BF16, vec_dot_bf16_f32_x86, vec_dot_rows_bf16_f32_x86, 4},
  };
  for (const Entry& e : entries) {
    TypeKernels& k = t.of(e.type);
    k.vec_dot = e.dot;
    k.vec_dot_rows = e.rows;
    k.rows_per_call = e.rows_per_call;
    k.variant = EDGELLM_X86_LEVEL;
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
  f.variant = EDGELLM_X86_LEVEL;
  register_x86_packed(t);
  register_x86_packed_kquants(t);
#if EDGELLM_HAS_GEMM_U8
  t.u8_gemm.rows = xs::kGemmRows;
  t.u8_gemm.toks = xs::kGemmToks;
  t.u8_gemm.tile = xs::gemm_u8_tile_x86;
  t.u8_gemm.name = xs::GemmVec::kBytes == 64 ? "u8 VNNI GEMM (64-byte steps)" : "u8 VNNI GEMM (32-byte steps)";
#endif
}

}  // namespace edgellm
#endif
