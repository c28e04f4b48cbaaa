// Registers the xsimd (x86 AVX2/AVX-512) kernels. The only place besides kernels/xsimd/*.hpp that
// may include xsimd, and only when EDGELLM_HAS_XSIMD.
#pragma once
#include "edgellm/kernels/api.hpp"

#if EDGELLM_HAS_XSIMD
#include "edgellm/kernels/xsimd/dot_float.hpp"
#include "edgellm/kernels/xsimd/dot_kquants.hpp"
#include "edgellm/kernels/xsimd/dot_legacy.hpp"
#include "edgellm/kernels/xsimd/float_ops.hpp"
#include "edgellm/kernels/xsimd/kv_ops.hpp"
#include "edgellm/kernels/xsimd/packed.hpp"
#include "edgellm/kernels/xsimd/packed_kquants.hpp"
#include "edgellm/kernels/xsimd/quantize.hpp"

namespace edgellm {

// Overrides the entries of register_ref_kernels with the x86 variants (vec_dot_type unchanged).
inline void register_xsimd_kernels(KernelTable& t) {
  struct Entry {
    DType type;
    VecDotFn dot;
    VecDotRowsFn rows;
    int rows_per_call;
  };
  const Entry entries[] = {
      {DType::Q4_0, vec_dot_q4_0_q8_0_xsimd, vec_dot_rows_q4_0_q8_0_xsimd, kRowsLegacyXsimd},
      {DType::Q4_1, vec_dot_q4_1_q8_0_xsimd, vec_dot_rows_q4_1_q8_0_xsimd, kRowsLegacyXsimd},
      {DType::Q5_0, vec_dot_q5_0_q8_0_xsimd, vec_dot_rows_q5_0_q8_0_xsimd, kRowsLegacyXsimd},
      {DType::Q5_1, vec_dot_q5_1_q8_0_xsimd, vec_dot_rows_q5_1_q8_0_xsimd, kRowsLegacyXsimd},
      {DType::Q8_0, vec_dot_q8_0_q8_0_xsimd, vec_dot_rows_q8_0_q8_0_xsimd, kRowsLegacyXsimd},
      {DType::Q2_K, vec_dot_q2_K_q8_K_xsimd, vec_dot_rows_q2_K_q8_K_xsimd, kRowsKQuantXsimd},
      {DType::Q3_K, vec_dot_q3_K_q8_K_xsimd, vec_dot_rows_q3_K_q8_K_xsimd, kRowsKQuantXsimd},
      {DType::Q4_K, vec_dot_q4_K_q8_K_xsimd, vec_dot_rows_q4_K_q8_K_xsimd, kRowsKQuantXsimd},
      {DType::Q5_K, vec_dot_q5_K_q8_K_xsimd, vec_dot_rows_q5_K_q8_K_xsimd, kRowsKQuantXsimd},
      {DType::Q6_K, vec_dot_q6_K_q8_K_xsimd, vec_dot_rows_q6_K_q8_K_xsimd, kRowsKQuantXsimd},
      {DType::F32, vec_dot_f32_f32_xsimd, vec_dot_rows_f32_f32_xsimd, 4},
      {DType::F16, vec_dot_f16_f32_xsimd, vec_dot_rows_f16_f32_xsimd, 4},
      {DType::BF16, vec_dot_bf16_f32_xsimd, vec_dot_rows_bf16_f32_xsimd, 4},
  };
  for (const Entry& e : entries) {
    TypeKernels& k = t.of(e.type);
    k.vec_dot = e.dot;
    k.vec_dot_rows = e.rows;
    k.rows_per_call = e.rows_per_call;
    k.variant = "xsimd";
  }
  t.of(DType::Q8_0).from_float = quantize_row_q8_0_xsimd;
  t.of(DType::Q8_K).from_float = quantize_row_q8_K_xsimd;
  t.of(DType::F16).to_float = fp16_to_fp32_row_xsimd;  // KV cache rows (attention)
  t.of(DType::Q8_0).to_float = dequantize_row_q8_0_xsimd;
  FloatKernels& f = t.f;
  f.rmsnorm = rmsnorm_xsimd;
  f.dot_f32 = dot_f32_xsimd;
  f.dot_f16_f32 = dot_f16_f32_xsimd;
  f.axpy = axpy_xsimd;
  f.axpy_f16 = axpy_f16_xsimd;
  f.scale = scale_xsimd;
  f.softmax = softmax_xsimd;
  f.silu_mul = silu_mul_xsimd;
  f.rope = rope_xsimd;
  f.gemm_f32 = gemm_f32_xsimd;
  f.transpose_f32 = transpose_f32_xsimd;
  register_xsimd_kv_kernels(f);
  f.variant = "xsimd";
  register_xsimd_packed(t);
  register_xsimd_packed_kquants(t);
}

}  // namespace edgellm
#endif
