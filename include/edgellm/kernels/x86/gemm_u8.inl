// The x86 VNNI tile of the prefill GEMM (KernelTable::u8_gemm; the driver is kernels/matmul.hpp):
// weight rows in the common u8 form (kernels/layouts/unpack_u8.hpp: w = s * u + m per 16
// elements) against int8 activations, a register tile of kGemmRows rows x kGemmToks tokens running
// vpdpbusd, each loaded weight vector reused by every token of the tile and each activation vector
// by every row. AVX-512 (64 bytes per step) when the level has it, else AVX2 with VNNI; nothing
// without VNNI.
#if EDGELLM_X86_VNNI

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"  // _mm256_undefined_pd() inside _mm512_reduce_add_ps
#endif

namespace xs {

#if EDGELLM_X86_AVX512VNNI
// 64 bytes per step: the 16 int32 lanes are 16 groups of 4 weights.
struct GemmVec {
  using I = __m512i;
  using F = __m512;
  static constexpr int kBytes = 64;
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F zero() { return _mm512_setzero_ps(); }
  static I dot(I u, I s) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static float sum(F a) { return _mm512_reduce_add_ps(a); }
};
#else
struct GemmVec {
  using I = __m256i;
  using F = __m256;
  static constexpr int kBytes = 32;
  static I load(const void* p) { return load256(p); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static F zero() { return _mm256_setzero_ps(); }
  static I dot(I u, I s) { return dot_u8s8(u, s); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static float sum(F a) { return hsum(a); }
};
#endif

// Register tile: 4 x 4 accumulators plus the loaded vectors fit the 32 AVX-512 registers; AVX2 has
// 16, so 2 rows there.
#if EDGELLM_X86_AVX512
inline constexpr int kGemmRows = 4;
#else
inline constexpr int kGemmRows = 2;
#endif
inline constexpr int kGemmToks = 4;

// out[c * out_stride + r] = dot(weight row r, activation row c) for a full kGemmRows x kGemmToks
// tile; n % 128 == 0. w / a: the rows' GEMM forms.
inline void gemm_u8_tile_x86(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  using V = GemmVec;
  constexpr int R = kGemmRows, C = kGemmToks;
  typename V::F acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = V::zero();
  for (int64_t k = 0; k < n; k += V::kBytes) {
    typename V::I y[C];
    typename V::F dy[C];
    for (int c = 0; c < C; ++c) {
      y[c] = V::load(a[c].u + k);
      dy[c] = V::loadf(a[c].sv + k / 4);
    }
    for (int r = 0; r < R; ++r) {
      const typename V::I u = V::load(w[r].u + k);
      const typename V::F s = V::loadf(w[r].sv + k / 4);
      for (int c = 0; c < C; ++c) acc[r][c] = V::fma(V::mul(V::cvt(V::dot(u, y[c])), dy[c]), s, acc[r][c]);
    }
  }
  // Offsets: sum over groups of m_w * (activation scale * sum of its quants).
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      __m256 mo = _mm256_setzero_ps();
      for (int64_t g = 0; g < n / 16; g += 8)
        mo = _mm256_fmadd_ps(_mm256_loadu_ps(w[r].m + g), _mm256_loadu_ps(a[c].m + g), mo);
      out[size_t(c) * out_stride + size_t(r)] = V::sum(acc[r][c]) + hsum(mo);
    }
}

}  // namespace xs

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // EDGELLM_X86_VNNI
