// x86 (AVX2 + FMA intrinsics) float helpers: this level's FloatKernels. Semantics and aliasing rules:
// kernels/api.hpp and kernels/scalar/float_ops.hpp.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// e^x for 8 floats, our own (no libm call per lane): x = k ln2 + r with |r| <= ln2 / 2 (ln2 in two
// parts, so r keeps float precision), e^r by Cephes' expf polynomial, 2^k by the exponent bits (as
// 2^127 * 2 for k = 128, the top of the range). Within 2 ulp of std::exp where the result is a
// normal float (tests/kernels/test_float_ops.cpp, kMaxExpRelErr); 0 below that (x < -87.34), +inf
// where e^x overflows (x > 88.72); NaN stays NaN.
inline __m256 exp_ps(__m256 x) {
  const __m256 kHi = _mm256_set1_ps(88.7228391f), kLo = _mm256_set1_ps(-87.3365447f);
  const __m256 c = _mm256_max_ps(kLo, _mm256_min_ps(kHi, x));  // NaN passes through (second operand)
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(c, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), c);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256 k1 = _mm256_min_ps(k, _mm256_set1_ps(127.0f));  // 2^k = 2^k1 * (1 + k - k1)
  p = _mm256_mul_ps(p, _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_sub_ps(k, k1)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k1), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, kLo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, kHi, _CMP_GT_OQ));
}


// y[i] = e^x[i], y may alias x: exp_ps over a row, std::exp on the tail (how the tests reach exp_ps).
inline void exp_row(float* y, const float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_ps(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = std::exp(x[i]);
}

// out, x, w: [n]; out may alias x.
inline void rmsnorm(float* out, const float* x, const float* w, int n, float eps) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float sum = hsum(acc);
  for (int k = i; k < n; ++k) sum += x[k] * x[k];
  const float scale = 1.0f / std::sqrt(sum / float(n) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  for (int k = i; k < n; ++k) out[k] = x[k] * scale * w[k];
}

// y: [n]; y *= alpha
inline void scale(float* y, float alpha, int n) {
  const __m256 va = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), va));
  for (; i < n; ++i) y[i] *= alpha;
}

// x: [n], n >= 1, in place.
inline void softmax(float* x, int n) {
  float mx = x[0];
  int i = 0;
  if (n >= 8) {
    __m256 vm = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    mx = hmax_ps(vm);
  }
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  scale(x, 1.0f / sum, n);
}

// gate, up: [n]; gate = silu(gate) * up
inline void silu_mul(float* gate, const float* up, int n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_xor_ps(g, sign))));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// x: [n_heads, head_dim], cs: [n_rot] interleaved (cos, sin). Even lanes x0*c - x1*s, odd lanes
// x1*c + x0*s: one fmaddsub on (x, cos) and (swapped x, sin).
inline void rope(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    int i = 0;
    for (; i + 8 <= n_rot; i += 8) {
      const __m256 xv = _mm256_loadu_ps(v + i), c = _mm256_loadu_ps(cs + i);
      const __m256 swapped = _mm256_permute_ps(xv, 0xB1);
      const __m256 prod = _mm256_mul_ps(swapped, _mm256_movehdup_ps(c));
      _mm256_storeu_ps(v + i, _mm256_fmaddsub_ps(xv, _mm256_moveldup_ps(c), prod));
    }
    for (; i + 1 < n_rot; i += 2) {
      const float c = cs[i], s = cs[i + 1], x0 = v[i], x1 = v[i + 1];
      v[i] = x0 * c - x1 * s;
      v[i + 1] = x0 * s + x1 * c;
    }
  }
}

// ---- small GEMM for attention (FloatKernels::gemm_f32) ----

// R rows of A x V vectors of columns of B, all of K: R * V accumulators stay in registers while
// each B row slice is loaded once per k and each A element broadcast once per k.
template <int V>
struct GemmF32Tile {
  template <int R>
  static void run(int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc, bool accumulate) {
    constexpr int kW = 8;
    __m256 c[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v)
        c[r][v] = accumulate ? _mm256_loadu_ps(C + int64_t(r) * ldc + v * kW) : _mm256_setzero_ps();
    for (int k = 0; k < K; ++k) {
      __m256 b[V];
      for (int v = 0; v < V; ++v) b[v] = _mm256_loadu_ps(B + int64_t(k) * ldb + v * kW);
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_set1_ps(A[int64_t(r) * lda + k]);
        for (int v = 0; v < V; ++v) c[r][v] = _mm256_fmadd_ps(a, b[v], c[r][v]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) _mm256_storeu_ps(C + int64_t(r) * ldc + v * kW, c[r][v]);
  }
};


// A: [M, lda], B: [K, ldb], C: [M, ldc]; C (+)= A[:, :K] B[:K, :N]. C must not alias A or B.
inline void gemm_f32(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                           bool accumulate) {
  constexpr int kW = 8;
  int j = 0;
  for (; j + 2 * kW <= N; j += 2 * kW) gemm_f32_rows<GemmF32Tile<2>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  for (; j + kW <= N; j += kW) gemm_f32_rows<GemmF32Tile<1>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  if (j < N) gemm_f32_ref(M, N - j, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
}

// 8 x 8 tiles transposed in ymm registers (unpack, shuffle, 128-bit lane permute: 24 shuffles per
// 64 floats, against 64 scalar load/store pairs), the edges by the ref.
inline void transpose_f32(const float* src, int rows, int cols, int lds, float* dst, int ldd) {
  const int r8 = rows / 8 * 8, c8 = cols / 8 * 8;
  for (int r = 0; r < r8; r += 8)
    for (int c = 0; c < c8; c += 8) {
      __m256 v[8], t[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + int64_t(r + i) * lds + c);
      for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved: (a0 b0 a1 b1 | a4 b4 a5 b5), ..
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {  // 4 rows per 128-bit lane: columns 0, 1 (2, 3) of rows i .. i+3
        v[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
      }
      for (int i = 0; i < 4; ++i) {  // lanes of rows 0..3 and 4..7 joined: column i, then column 4 + i
        _mm256_storeu_ps(dst + int64_t(c + i) * ldd + r, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
        _mm256_storeu_ps(dst + int64_t(c + 4 + i) * ldd + r, _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
      }
    }
  if (c8 < cols) transpose_f32_ref(src + c8, r8, cols - c8, lds, dst + int64_t(c8) * ldd, ldd);
  if (r8 < rows) transpose_f32_ref(src + int64_t(r8) * lds, rows - r8, cols, lds, dst + r8, ldd);
}
