// x86 (AVX2 + FMA) KV-cache kernels for Q8_0 rows read in place by attention: dot of a float query
// with a block_q8_0 row and axpy from a block_q8_0 row (FloatKernels::dot_q8_0_f32 / axpy_q8_0).
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_XSIMD
#include <immintrin.h>

#include <cstdint>

#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/xsimd/common.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"

namespace edgellm {

// 8 int8 quants as 8 floats.
inline __m256 kv_q8_to_ps(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

// a: [n / 32] block_q8_0, b: [n] floats, n a multiple of 32. Each block's products are summed in
// floats, then scaled by its d once.
inline float dot_q8_0_f32_xsimd(const void* a, const float* b, int n) {
  const block_q8_0* x = static_cast<const block_q8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int i = 0; i < n / QK8_0; ++i, b += QK8_0) {
    __m256 s = _mm256_mul_ps(kv_q8_to_ps(x[i].qs), _mm256_loadu_ps(b));
    s = _mm256_fmadd_ps(kv_q8_to_ps(x[i].qs + 8), _mm256_loadu_ps(b + 8), s);
    s = _mm256_fmadd_ps(kv_q8_to_ps(x[i].qs + 16), _mm256_loadu_ps(b + 16), s);
    s = _mm256_fmadd_ps(kv_q8_to_ps(x[i].qs + 24), _mm256_loadu_ps(b + 24), s);
    acc = _mm256_fmadd_ps(s, _mm256_set1_ps(fp16_to_fp32(x[i].d)), acc);
  }
  return xs::hsum(acc);
}

// y: [n] floats, x: [n / 32] block_q8_0, n a multiple of 32; y += alpha * x.
inline void axpy_q8_0_xsimd(float* y, float alpha, const void* x, int n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(x);
  for (int i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const __m256 a = _mm256_set1_ps(alpha * fp16_to_fp32(b[i].d));
    for (int j = 0; j < QK8_0; j += 8)
      _mm256_storeu_ps(y + j, _mm256_fmadd_ps(a, kv_q8_to_ps(b[i].qs + j), _mm256_loadu_ps(y + j)));
  }
}

// Rows of the KV cache to floats, as attention reads them (KernelTable::of(F16 / Q8_0).to_float).
// Exact like the refs they replace: vcvtph2ps is the exact widening, q * d one float multiply.
inline void fp16_to_fp32_row_xsimd(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) y[i] = fp16_to_fp32(h[i]);
}
// n a multiple of 32 (whole blocks).
inline void dequantize_row_q8_0_xsimd(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b[i].d));
    for (int j = 0; j < QK8_0; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(kv_q8_to_ps(b[i].qs + j), d));
  }
}

// Sets the KV-cache entries of t.f to the kernels above (called by register_xsimd_kernels).
inline void register_xsimd_kv_kernels(FloatKernels& f) {
  f.dot_q8_0_f32 = dot_q8_0_f32_xsimd;
  f.axpy_q8_0 = axpy_q8_0_xsimd;
}

}  // namespace edgellm
#endif
