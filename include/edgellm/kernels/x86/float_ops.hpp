// x86 (xsimd AVX2 + FMA) float helpers: the `_x86` FloatKernels. Semantics and aliasing rules:
// kernels/api.hpp and kernels/scalar/float_ops.hpp.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_XSIMD
#include <cmath>

#include "edgellm/kernels/scalar/float_ops.hpp"
#include "edgellm/kernels/x86/common.hpp"
#include "edgellm/kernels/x86/dot_float.hpp"
#include "edgellm/quant/fp16.hpp"

namespace edgellm {

// out, x, w: [n]; out may alias x.
inline void rmsnorm_x86(float* out, const float* x, const float* w, int n, float eps) {
  using B = xs::FloatBatch;
  constexpr int kW = int(B::size);
  B acc(0.0f);
  int i = 0;
  for (; i + kW <= n; i += kW) {
    const B v = B::load_unaligned(x + i);
    acc = xsimd::fma(v, v, acc);
  }
  float sum = xsimd::hadd(acc);
  for (int k = i; k < n; ++k) sum += x[k] * x[k];
  const float scale = 1.0f / std::sqrt(sum / float(n) + eps);
  const B vs(scale);
  for (i = 0; i + kW <= n; i += kW) (B::load_unaligned(x + i) * vs * B::load_unaligned(w + i)).store_unaligned(out + i);
  for (int k = i; k < n; ++k) out[k] = x[k] * scale * w[k];
}

// y: [n]; y *= alpha
inline void scale_x86(float* y, float alpha, int n) {
  using B = xs::FloatBatch;
  constexpr int kW = int(B::size);
  const B va(alpha);
  int i = 0;
  for (; i + kW <= n; i += kW) (B::load_unaligned(y + i) * va).store_unaligned(y + i);
  for (; i < n; ++i) y[i] *= alpha;
}

// x: [n], n >= 1, in place.
inline void softmax_x86(float* x, int n) {
  using B = xs::FloatBatch;
  constexpr int kW = int(B::size);
  float mx = x[0];
  int i = 0;
  if (n >= kW) {
    B vm = B::load_unaligned(x);
    for (i = kW; i + kW <= n; i += kW) vm = xsimd::max(vm, B::load_unaligned(x + i));
    mx = xs::hmax_ps(vm);
  }
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const B vmx(mx);
  B acc(0.0f);
  for (i = 0; i + kW <= n; i += kW) {
    const B e = xsimd::exp(B::load_unaligned(x + i) - vmx);
    e.store_unaligned(x + i);
    acc += e;
  }
  float sum = xsimd::hadd(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  scale_x86(x, 1.0f / sum, n);
}

// gate, up: [n]; gate = silu(gate) * up
inline void silu_mul_x86(float* gate, const float* up, int n) {
  using B = xs::FloatBatch;
  constexpr int kW = int(B::size);
  const B one(1.0f);
  int i = 0;
  for (; i + kW <= n; i += kW) {
    const B g = B::load_unaligned(gate + i);
    (g / (one + xsimd::exp(-g)) * B::load_unaligned(up + i)).store_unaligned(gate + i);
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// x: [n_heads, head_dim], cs: [n_rot] interleaved (cos, sin). Even lanes x0*c - x1*s, odd lanes
// x1*c + x0*s: one fmaddsub on (x, cos) and (swapped x, sin).
inline void rope_x86(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
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

namespace xs {
// R rows of A x V vectors of columns of B, all of K: R * V accumulators stay in registers while
// each B row slice is loaded once per k and each A element broadcast once per k.
template <int V>
struct GemmF32Tile {
  template <int R>
  static void run(int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc, bool accumulate) {
    using Bt = FloatBatch;
    constexpr int kW = int(Bt::size);
    Bt c[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v)
        c[r][v] = accumulate ? Bt::load_unaligned(C + int64_t(r) * ldc + v * kW) : Bt(0.0f);
    for (int k = 0; k < K; ++k) {
      Bt b[V];
      for (int v = 0; v < V; ++v) b[v] = Bt::load_unaligned(B + int64_t(k) * ldb + v * kW);
      for (int r = 0; r < R; ++r) {
        const Bt a(A[int64_t(r) * lda + k]);
        for (int v = 0; v < V; ++v) c[r][v] = xsimd::fma(a, b[v], c[r][v]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) c[r][v].store_unaligned(C + int64_t(r) * ldc + v * kW);
  }
};

}  // namespace xs

// A: [M, lda], B: [K, ldb], C: [M, ldc]; C (+)= A[:, :K] B[:K, :N]. C must not alias A or B.
inline void gemm_f32_x86(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                           bool accumulate) {
  constexpr int kW = int(xs::FloatBatch::size);
  int j = 0;
  for (; j + 2 * kW <= N; j += 2 * kW) gemm_f32_rows<xs::GemmF32Tile<2>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  for (; j + kW <= N; j += kW) gemm_f32_rows<xs::GemmF32Tile<1>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  if (j < N) gemm_f32_ref(M, N - j, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
}

// 8 x 8 tiles transposed in ymm registers (unpack, shuffle, 128-bit lane permute: 24 shuffles per
// 64 floats, against 64 scalar load/store pairs), the edges by the ref.
inline void transpose_f32_x86(const float* src, int rows, int cols, int lds, float* dst, int ldd) {
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

}  // namespace edgellm
#endif  // EDGELLM_HAS_XSIMD
