// x86 (AVX2 + FMA + F16C) dot products of float weights (F32, F16, BF16) against F32 activations,
// single-row and multi-row. F16 -> F32 uses vcvtph2ps.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

struct LoadF32 {
  static __m256 load(const void* p, int i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); }
  static float scalar(const void* p, int i) { return static_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  static __m256 load(const void* p, int i) { return _mm256_cvtph_ps(load128(static_cast<const uint16_t*>(p) + i)); }
  static float scalar(const void* p, int i) { return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
};
struct LoadBF16 {
  static __m256 load(const void* p, int i) {
    const __m256i w = _mm256_cvtepu16_epi32(load128(static_cast<const uint16_t*>(p) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float scalar(const void* p, int i) { return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]); }
};

// R rows of n weights (w_stride bytes apart) against one F32 row; any n (scalar tail).
template <class Load, int R>
inline void float_rows(int n, float* out, const void* w, size_t w_stride, const float* a) {
  const void* x[R];
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) {
    x[r] = static_cast<const uint8_t*>(w) + size_t(r) * w_stride;
    acc0[r] = acc1[r] = _mm256_setzero_ps();
  }
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm256_fmadd_ps(Load::load(x[r], i), a0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(Load::load(x[r], i + 8), a1, acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float s = hsum(_mm256_add_ps(acc0[r], acc1[r]));
    for (int k = i; k < n; ++k) s += Load::scalar(x[r], k) * a[k];
    out[r] = s;
  }
}

template <class Load>
inline void float_rows_grouped(int n, float* out, int nrows, const void* w, size_t w_stride, const void* a) {
  const auto* act = static_cast<const float*>(a);
  int r = 0;
  for (; r + 4 <= nrows; r += 4)
    float_rows<Load, 4>(n, out + r, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, w_stride, act);
  for (; r < nrows; ++r)
    float_rows<Load, 1>(n, out + r, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, w_stride, act);
}


inline float vec_dot_f32_f32(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  float out;
  float_rows<LoadF32, 1>(n, &out, w, 0, static_cast<const float*>(a));
  return out;
}
inline float vec_dot_f16_f32(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  float out;
  float_rows<LoadF16, 1>(n, &out, w, 0, static_cast<const float*>(a));
  return out;
}
inline float vec_dot_bf16_f32(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  float out;
  float_rows<LoadBF16, 1>(n, &out, w, 0, static_cast<const float*>(a));
  return out;
}

inline void vec_dot_rows_f32_f32(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                                       const void* EDGELLM_RESTRICT a) {
  float_rows_grouped<LoadF32>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_f16_f32(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                                       const void* EDGELLM_RESTRICT a) {
  float_rows_grouped<LoadF16>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_bf16_f32(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                                        const void* EDGELLM_RESTRICT a) {
  float_rows_grouped<LoadBF16>(n, out, nrows, w, w_stride, a);
}
