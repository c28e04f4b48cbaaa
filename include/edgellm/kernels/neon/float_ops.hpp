// NEON float helpers (FloatKernels) and float-weight dots (f32 / f16 / bf16 weights against F32
// activations). ARMv8.0 only: F16 is widened with fcvtl, which every arm64 CPU has.
// Semantics: kernels/scalar/float_ops.hpp and vec_dot_{f32,f16,bf16}_f32_ref.
#pragma once
#include <cmath>
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/kernels/neon/vdot.hpp"
#include "edgellm/kernels/scalar/float_ops.hpp"
#include "edgellm/quant/fp16.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

namespace edgellm {
namespace neon {

inline float32x4_t load_f16x4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
inline float32x4_t load_bf16x4(const uint16_t* p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

// exp(x) for x in float range: 2^k * p(r) with r = x - k ln2 in [-ln2/2, ln2/2], a degree-6
// polynomial (relative error ~2e-7); x below -87.3 flushes to 0, above 88.7 gives +inf.
inline float32x4_t exp_f32(float32x4_t x) {
  const float32x4_t hi = vdupq_n_f32(88.7f), lo = vdupq_n_f32(-87.3f);
  const uint32x4_t under = vcltq_f32(x, lo), over = vcgtq_f32(x, hi);
  x = vminq_f32(vmaxq_f32(x, lo), hi);
  const float32x4_t k = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_n_f32(x, k, 0.693359375f);  // ln2 split in two for exactness
  r = vfmsq_n_f32(r, k, -2.12194440e-4f);
  float32x4_t p = vdupq_n_f32(1.0f / 720);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  // 2^k in two halves so k = 128 (x near 88.7) does not overflow the exponent field
  const int32x4_t ki = vcvtq_s32_f32(k);
  const int32x4_t k1 = vshrq_n_s32(ki, 1), k2 = vsubq_s32(ki, k1);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, vdupq_n_s32(127)), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, vdupq_n_s32(127)), 23));
  float32x4_t e = vmulq_f32(vmulq_f32(p, s1), s2);
  e = vbslq_f32(under, vdupq_n_f32(0.0f), e);
  return vbslq_f32(over, vdupq_n_f32(INFINITY), e);
}

}  // namespace neon

// ---- FloatKernels ----

// a, b: [n]
inline float dot_f32_neon(const float* a, const float* b, int n) {
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
  }
  for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
  float s = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// a: [n] F16 bits (Bf16 false) or BF16 bits (Bf16 true), b: [n]
template <bool Bf16>
inline float dot_half_f32_neon(const uint16_t* a, const float* b, int n) {
  const auto load4 = [](const uint16_t* p) { return Bf16 ? neon::load_bf16x4(p) : neon::load_f16x4(p); };
  float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = vfmaq_f32(s0, load4(a + i), vld1q_f32(b + i));
    s1 = vfmaq_f32(s1, load4(a + i + 4), vld1q_f32(b + i + 4));
  }
  float s = vaddvq_f32(vaddq_f32(s0, s1));
  for (; i < n; ++i) s += (Bf16 ? bf16_to_fp32(a[i]) : fp16_to_fp32(a[i])) * b[i];
  return s;
}

// out, x, w: [n]; out may alias x
inline void rmsnorm_neon(float* out, const float* x, const float* w, int n, float eps) {
  const float sum = dot_f32_neon(x, x, n);
  const float scale = 1.0f / std::sqrt(sum / float(n) + eps);
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// y: [n]; y *= alpha
inline void scale_neon(float* y, float alpha, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(y + i), alpha));
  for (; i < n; ++i) y[i] *= alpha;
}

// x: [n], n >= 1, in place
inline void softmax_neon(float* x, int n) {
  float32x4_t mv = vdupq_n_f32(-INFINITY);
  int i = 0;
  for (; i + 4 <= n; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
  float mx = vmaxvq_f32(mv);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float32x4_t sv = vdupq_n_f32(0.0f);
  const float32x4_t mxv = vdupq_n_f32(mx);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = neon::exp_f32(vsubq_f32(vld1q_f32(x + i), mxv));
    vst1q_f32(x + i, e);
    sv = vaddq_f32(sv, e);
  }
  double sum = vaddvq_f32(sv);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  scale_neon(x, float(1.0 / sum), n);
}

// gate, up: [n]; gate = silu(gate) * up
inline void silu_mul_neon(float* gate, const float* up, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t den = vaddq_f32(vdupq_n_f32(1.0f), neon::exp_f32(vnegq_f32(g)));
    vst1q_f32(gate + i, vmulq_f32(vdivq_f32(g, den), vld1q_f32(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// x: [n_heads, head_dim], cs: [n_rot] interleaved (cos, sin). Pairs beyond n_rot untouched.
inline void rope_neon(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    int i = 0;
    for (; i + 8 <= n_rot; i += 8) {  // 4 pairs
      const float32x4x2_t p = vld2q_f32(v + i), c = vld2q_f32(cs + i);
      float32x4x2_t r;
      r.val[0] = vfmsq_f32(vmulq_f32(p.val[0], c.val[0]), p.val[1], c.val[1]);
      r.val[1] = vfmaq_f32(vmulq_f32(p.val[0], c.val[1]), p.val[1], c.val[0]);
      vst2q_f32(v + i, r);
    }
    for (; i + 2 <= n_rot; i += 2) {
      const float c = cs[i], s = cs[i + 1], x0 = v[i], x1 = v[i + 1];
      v[i] = x0 * c - x1 * s;
      v[i + 1] = x0 * s + x1 * c;
    }
  }
}

// NEOX form: pair i is (v[i], v[i + n_rot/2]); vld2q splits 4 (cos, sin) pairs.
inline void rope_neox_neon(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    int i = 0;
    for (; i + 4 <= half; i += 4) {
      const float32x4x2_t c = vld2q_f32(cs + 2 * i);
      const float32x4_t x0 = vld1q_f32(v + i), x1 = vld1q_f32(v + i + half);
      vst1q_f32(v + i, vfmsq_f32(vmulq_f32(x0, c.val[0]), x1, c.val[1]));
      vst1q_f32(v + i + half, vfmaq_f32(vmulq_f32(x0, c.val[1]), x1, c.val[0]));
    }
    for (; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[i], x1 = v[i + half];
      v[i] = x0 * c - x1 * s;
      v[i + half] = x0 * s + x1 * c;
    }
  }
}

// ---- small GEMM for attention (FloatKernels::gemm_f32) ----

namespace neon {
// R rows of A x V float32x4 column vectors of B over all of K, accumulators in registers (the
// unroll pragmas: g++ -O2 otherwise keeps c[R][V] in memory, 18 + 10 + 16 cycles per k on the
// llvm-mca A55 model instead of 36 for the whole step, bench/mca_float.sh).
template <int V>
struct GemmF32Tile {
  template <int R>
  static void run(int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc, bool accumulate) {
    float32x4_t c[R][V];
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r)
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) c[r][v] = accumulate ? vld1q_f32(C + int64_t(r) * ldc + 4 * v) : vdupq_n_f32(0.0f);
    for (int k = 0; k < K; ++k) {
      float32x4_t b[V];
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) b[v] = vld1q_f32(B + int64_t(k) * ldb + 4 * v);
      EDGELLM_NEON_UNROLL
      for (int r = 0; r < R; ++r) {
        const float a = A[int64_t(r) * lda + k];
        EDGELLM_NEON_UNROLL
        for (int v = 0; v < V; ++v) c[r][v] = vfmaq_n_f32(c[r][v], b[v], a);
      }
    }
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r)
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) vst1q_f32(C + int64_t(r) * ldc + 4 * v, c[r][v]);
  }
};

}  // namespace neon

// A: [M, lda], B: [K, ldb], C: [M, ldc]; C (+)= A[:, :K] B[:K, :N]. C must not alias A or B.
// Tiles of 4 rows x 16 columns (16 accumulators of the 32 vector registers).
inline void gemm_f32_neon(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                          bool accumulate) {
  int j = 0;
  for (; j + 16 <= N; j += 16) gemm_f32_rows<neon::GemmF32Tile<4>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  for (; j + 4 <= N; j += 4) gemm_f32_rows<neon::GemmF32Tile<1>>(M, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
  if (j < N) gemm_f32_ref(M, N - j, K, A, lda, B + j, ldb, C + j, ldc, accumulate);
}

// 4 x 4 tiles transposed in registers (trn1/trn2 on 32-bit, then on 64-bit elements), the edges by
// the ref.
inline void transpose_f32_neon(const float* src, int rows, int cols, int lds, float* dst, int ldd) {
  const int r4 = rows / 4 * 4, c4 = cols / 4 * 4;
  auto f64 = [](float32x4_t v) { return vreinterpretq_f64_f32(v); };
  for (int r = 0; r < r4; r += 4)
    for (int c = 0; c < c4; c += 4) {
      const float* p = src + int64_t(r) * lds + c;
      const float32x4_t a = vld1q_f32(p), b = vld1q_f32(p + lds), cc = vld1q_f32(p + 2 * int64_t(lds)),
                        d = vld1q_f32(p + 3 * int64_t(lds));
      const float32x4_t t0 = vtrn1q_f32(a, b), t1 = vtrn2q_f32(a, b);    // a0 b0 a2 b2, a1 b1 a3 b3
      const float32x4_t t2 = vtrn1q_f32(cc, d), t3 = vtrn2q_f32(cc, d);  // c0 d0 c2 d2, c1 d1 c3 d3
      float* q = dst + int64_t(c) * ldd + r;
      vst1q_f32(q, vreinterpretq_f32_f64(vtrn1q_f64(f64(t0), f64(t2))));
      vst1q_f32(q + ldd, vreinterpretq_f32_f64(vtrn1q_f64(f64(t1), f64(t3))));
      vst1q_f32(q + 2 * int64_t(ldd), vreinterpretq_f32_f64(vtrn2q_f64(f64(t0), f64(t2))));
      vst1q_f32(q + 3 * int64_t(ldd), vreinterpretq_f32_f64(vtrn2q_f64(f64(t1), f64(t3))));
    }
  if (c4 < cols) transpose_f32_ref(src + c4, r4, cols - c4, lds, dst + int64_t(c4) * ldd, ldd);
  if (r4 < rows) transpose_f32_ref(src + int64_t(r4) * lds, rows - r4, cols, lds, dst + r4, ldd);
}

// ---- float weights against F32 activations (VecDotFn) ----

inline float vec_dot_f32_f32_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return dot_f32_neon(static_cast<const float*>(w), static_cast<const float*>(a), n);
}
inline float vec_dot_f16_f32_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return dot_half_f32_neon<false>(static_cast<const uint16_t*>(w), static_cast<const float*>(a), n);
}
inline float vec_dot_bf16_f32_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return dot_half_f32_neon<true>(static_cast<const uint16_t*>(w), static_cast<const float*>(a), n);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
