// Scalar reference float helpers (FloatKernels in kernels/api.hpp): the spec for the SIMD variants.
// Standard library only; no ISA headers.
#pragma once
#include <cmath>
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"

namespace edgellm {

// out, x, w: [n]. Sum of squares in float like ggml: mean = sum / n, scale = 1 / sqrtf(mean + eps).
// out may alias x.
inline void rmsnorm_ref(float* out, const float* x, const float* w, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / float(n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// x: [n], n >= 1, in place. Subtracting the max keeps exp() finite; -inf entries become 0.
inline void softmax_ref(float* x, int n) {
  float mx = x[0];
  for (int i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = float(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// gate, up: [n]; gate = silu(gate) * up
inline void silu_mul_ref(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// x: [n_heads, head_dim], cs: [n_rot] interleaved (cos, sin) per pair. Pairs beyond n_rot untouched.
inline void rope_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < n_rot / 2; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * c - x1 * s;
      v[2 * i + 1] = x0 * s + x1 * c;
    }
  }
}

// NEOX form: pair i is (v[i], v[i + n_rot/2]), same cs. Dimensions from n_rot on untouched.
inline void rope_neox_ref(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * c - x1 * s;
      v[i + half] = x0 * s + x1 * c;
    }
  }
}

// dst[c * ldd + r] = src[r * lds + c]; the SIMD forms transpose square tiles in registers and use
// this for the edges.
inline void transpose_f32_ref(const float* src, int rows, int cols, int lds, float* dst, int ldd) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) dst[int64_t(c) * ldd + r] = src[int64_t(r) * lds + c];
}

// The row loop of the SIMD gemm_f32 kernels: tiles of 4 rows, then one tile of the 1..3 left, for
// one column slice. Tile::run<R>(K, A, lda, B, ldb, C, ldc, accumulate) is the ISA's register tile.
template <class Tile>
inline void gemm_f32_rows(int M, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                          bool accumulate) {
  int m = 0;
  for (; m + 4 <= M; m += 4)
    Tile::template run<4>(K, A + int64_t(m) * lda, lda, B, ldb, C + int64_t(m) * ldc, ldc, accumulate);
  const float* a = A + int64_t(m) * lda;
  float* c = C + int64_t(m) * ldc;
  switch (M - m) {
    case 3: Tile::template run<3>(K, a, lda, B, ldb, c, ldc, accumulate); break;
    case 2: Tile::template run<2>(K, a, lda, B, ldb, c, ldc, accumulate); break;
    case 1: Tile::template run<1>(K, a, lda, B, ldb, c, ldc, accumulate); break;
    default: break;
  }
}

// A: [M, lda], B: [K, ldb], C: [M, ldc]; C (+)= A[:, :K] B[:K, :N]. C must not alias A or B.
inline void gemm_f32_ref(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                         bool accumulate) {
  for (int m = 0; m < M; ++m) {
    float* c = C + int64_t(m) * ldc;
    if (!accumulate)
      for (int j = 0; j < N; ++j) c[j] = 0.0f;
    for (int k = 0; k < K; ++k) {
      const float a = A[int64_t(m) * lda + k];
      const float* b = B + int64_t(k) * ldb;
      for (int j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

}  // namespace edgellm
