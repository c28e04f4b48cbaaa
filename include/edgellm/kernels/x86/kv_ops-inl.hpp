// x86 (AVX2 + FMA, F16C) KV-cache row conversions: F16 and Q8_0 rows to floats, as attention reads
// them (KernelTable::of(F16 / Q8_0).to_float).
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// 8 int8 quants as 8 floats.
inline __m256 kv_q8_to_ps(const int8_t* q) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

// Rows of the KV cache to floats, as attention reads them (KernelTable::of(F16 / Q8_0).to_float).
// Exact like the refs they replace: vcvtph2ps is the exact widening, q * d one float multiply.
inline void fp16_to_fp32_row(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const uint16_t* h = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) y[i] = fp16_to_fp32(h[i]);
}
// n a multiple of 32 (whole blocks).
inline void dequantize_row_q8_0(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n) {
  const block_q8_0* b = static_cast<const block_q8_0*>(x);
  for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const __m256 d = _mm256_set1_ps(fp16_to_fp32(b[i].d));
    for (int j = 0; j < QK8_0; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(kv_q8_to_ps(b[i].qs + j), d));
  }
}
