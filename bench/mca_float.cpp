// Not a benchmark program: bench/mca_float.sh compiles this to assembly (-S) so that llvm-mca can
// time the arm64 float loops (kernels/neon/float_ops.hpp, kv_ops.hpp) on the Cortex-A55 model,
// each as it is (hand-written NEON, mca_neon_<op>) and written with xsimd (8.1, Debian's
// libxsimd-dev) for the compile-time NEON arch (mca_xsimd_<op>): the comparison behind keeping the
// hand-written forms (docs/PERF.md "arm64 float loops: hand NEON vs xsimd"). The xsimd forms do the
// same float operations in the same order as the NEON ones (same fused multiply-adds).
#include "edgellm/kernels/neon/register.hpp"

#if EDGELLM_HAS_NEON
#include <xsimd/xsimd.hpp>

using namespace edgellm;

// ---- the xsimd forms ----
namespace xs {
using A = xsimd::neon64;
using F = xsimd::batch<float, A>;
using I = xsimd::batch<int32_t, A>;
using U = xsimd::batch<uint32_t, A>;

// neon::exp_f32 in xsimd: fma(-k, c, r) is the same fused x - k c as vfmsq.
inline F exp_f32(F x) {
  const F hi(88.7f), lo(-87.3f);
  const auto under = x < lo, over = x > hi;
  x = xsimd::min(xsimd::max(x, lo), hi);
  const I ki = xsimd::nearbyint_as_int(x * F(1.44269504088896341f));
  const F k = xsimd::to_float(ki);
  F r = xsimd::fma(-k, F(0.693359375f), x);
  r = xsimd::fma(-k, F(-2.12194440e-4f), r);
  F p(1.0f / 720);
  p = xsimd::fma(p, r, F(1.0f / 120));
  p = xsimd::fma(p, r, F(1.0f / 24));
  p = xsimd::fma(p, r, F(1.0f / 6));
  p = xsimd::fma(p, r, F(0.5f));
  p = xsimd::fma(p, r, F(1.0f));
  p = xsimd::fma(p, r, F(1.0f));
  const I k1 = ki >> 1, k2 = ki - k1;
  const F s1 = xsimd::bitwise_cast<F>((k1 + I(127)) << 23), s2 = xsimd::bitwise_cast<F>((k2 + I(127)) << 23);
  F e = (p * s1) * s2;
  e = xsimd::select(under, F(0.0f), e);
  return xsimd::select(over, F(INFINITY), e);
}

inline float dot_f32(const float* a, const float* b, int n) {
  F s0(0.0f), s1(0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = xsimd::fma(F::load_unaligned(a + i), F::load_unaligned(b + i), s0);
    s1 = xsimd::fma(F::load_unaligned(a + i + 4), F::load_unaligned(b + i + 4), s1);
  }
  for (; i + 4 <= n; i += 4) s0 = xsimd::fma(F::load_unaligned(a + i), F::load_unaligned(b + i), s0);
  float s = xsimd::hadd(s0 + s1);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void rmsnorm(float* out, const float* x, const float* w, int n, float eps) {
  const float sum = dot_f32(x, x, n);
  const float scale = 1.0f / std::sqrt(sum / float(n) + eps);
  int i = 0;
  for (; i + 4 <= n; i += 4) (F::load_unaligned(x + i) * F(scale) * F::load_unaligned(w + i)).store_unaligned(out + i);
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// xsimd 8.1 has no horizontal max: the lanes go through memory.
inline void softmax(float* x, int n) {
  F mv(-INFINITY);
  int i = 0;
  for (; i + 4 <= n; i += 4) mv = xsimd::max(mv, F::load_unaligned(x + i));
  alignas(16) float lanes[4];
  mv.store_aligned(lanes);
  float mx = lanes[0];
  for (int l = 1; l < 4; ++l) mx = lanes[l] > mx ? lanes[l] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  F sv(0.0f);
  const F mxv(mx);
  for (i = 0; i + 4 <= n; i += 4) {
    const F e = exp_f32(F::load_unaligned(x + i) - mxv);
    e.store_unaligned(x + i);
    sv += e;
  }
  double sum = xsimd::hadd(sv);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float alpha = float(1.0 / sum);
  for (i = 0; i + 4 <= n; i += 4) (F::load_unaligned(x + i) * F(alpha)).store_unaligned(x + i);
  for (; i < n; ++i) x[i] *= alpha;
}

inline void silu_mul(float* gate, const float* up, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const F g = F::load_unaligned(gate + i);
    (g / (F(1.0f) + exp_f32(-g)) * F::load_unaligned(up + i)).store_unaligned(gate + i);
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// Interleaved pairs without a de-interleaving load (xsimd 8.1 has none): per 2 pairs (x0, x1)
// and (c, s), out = [x0, x0] * [c, s] rounded, then + [x1, x1] * [-s, c] fused (the NEON order).
inline void rope(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  using C0022 = xsimd::batch_constant<U, 0, 0, 2, 2>;
  using C1133 = xsimd::batch_constant<U, 1, 1, 3, 3>;
  using C1032 = xsimd::batch_constant<U, 1, 0, 3, 2>;
  const F sign = {-1.0f, 1.0f, -1.0f, 1.0f};
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    int i = 0;
    for (; i + 4 <= n_rot; i += 4) {  // 2 pairs
      const F p = F::load_unaligned(v + i), c = F::load_unaligned(cs + i);
      const F x0 = xsimd::swizzle(p, C0022()), x1 = xsimd::swizzle(p, C1133());
      xsimd::fma(x1, xsimd::swizzle(c, C1032()) * sign, x0 * c).store_unaligned(v + i);
    }
    for (; i + 2 <= n_rot; i += 2) {
      const float c = cs[i], s = cs[i + 1], x0 = v[i], x1 = v[i + 1];
      v[i] = x0 * c - x1 * s;
      v[i + 1] = x0 * s + x1 * c;
    }
  }
}

// NEOX: the halves are contiguous; only (cos, sin) is interleaved, split with swizzles.
inline void rope_neox(float* x, int n_heads, int head_dim, int n_rot, const float* cs) {
  using C02 = xsimd::batch_constant<U, 0, 2, 0, 2>;
  using C13 = xsimd::batch_constant<U, 1, 3, 1, 3>;
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim;
    int i = 0;
    for (; i + 4 <= half; i += 4) {
      const F ca = F::load_unaligned(cs + 2 * i), cb = F::load_unaligned(cs + 2 * i + 4);
      // [c0 c1 c0 c1] / [c2 c3 c2 c3] -> [c0 c1 c2 c3]: low halves of the two
      const F c = xsimd::bitwise_cast<F>(xsimd::zip_lo(xsimd::bitwise_cast<xsimd::batch<double, A>>(xsimd::swizzle(ca, C02())),
                                                       xsimd::bitwise_cast<xsimd::batch<double, A>>(xsimd::swizzle(cb, C02()))));
      const F s = xsimd::bitwise_cast<F>(xsimd::zip_lo(xsimd::bitwise_cast<xsimd::batch<double, A>>(xsimd::swizzle(ca, C13())),
                                                       xsimd::bitwise_cast<xsimd::batch<double, A>>(xsimd::swizzle(cb, C13()))));
      const F x0 = F::load_unaligned(v + i), x1 = F::load_unaligned(v + i + half);
      xsimd::fma(-x1, s, x0 * c).store_unaligned(v + i);
      xsimd::fma(x1, c, x0 * s).store_unaligned(v + i + half);
    }
    for (; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[i], x1 = v[i + half];
      v[i] = x0 * c - x1 * s;
      v[i + half] = x0 * s + x1 * c;
    }
  }
}

// neon::GemmF32Tile in xsimd: fma(b, broadcast a, c), the same unroll pragmas.
template <int V>
struct GemmF32Tile {
  template <int R>
  static void run(int K, const float* A_, int lda, const float* B, int ldb, float* C, int ldc, bool accumulate) {
    F c[R][V];
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r)
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) c[r][v] = accumulate ? F::load_unaligned(C + int64_t(r) * ldc + 4 * v) : F(0.0f);
    for (int k = 0; k < K; ++k) {
      F b[V];
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) b[v] = F::load_unaligned(B + int64_t(k) * ldb + 4 * v);
      EDGELLM_NEON_UNROLL
      for (int r = 0; r < R; ++r) {
        const F a(A_[int64_t(r) * lda + k]);
        EDGELLM_NEON_UNROLL
        for (int v = 0; v < V; ++v) c[r][v] = xsimd::fma(b[v], a, c[r][v]);
      }
    }
    EDGELLM_NEON_UNROLL
    for (int r = 0; r < R; ++r)
      EDGELLM_NEON_UNROLL
      for (int v = 0; v < V; ++v) c[r][v].store_unaligned(C + int64_t(r) * ldc + 4 * v);
  }
};

}  // namespace xs

// ---- one unmangled wrapper per op, everything inlined into it (flatten) ----
#define EDGELLM_MCA_F(name, body) extern "C" __attribute__((noinline, flatten)) void name body

EDGELLM_MCA_F(mca_neon_rmsnorm, (float* o, const float* x, const float* w, int n) { rmsnorm_neon(o, x, w, n, 1e-5f); })
EDGELLM_MCA_F(mca_xsimd_rmsnorm, (float* o, const float* x, const float* w, int n) { xs::rmsnorm(o, x, w, n, 1e-5f); })
EDGELLM_MCA_F(mca_neon_softmax, (float* x, int n) { softmax_neon(x, n); })
EDGELLM_MCA_F(mca_xsimd_softmax, (float* x, int n) { xs::softmax(x, n); })
EDGELLM_MCA_F(mca_neon_silu, (float* g, const float* u, int n) { silu_mul_neon(g, u, n); })
EDGELLM_MCA_F(mca_xsimd_silu, (float* g, const float* u, int n) { xs::silu_mul(g, u, n); })
EDGELLM_MCA_F(mca_neon_rope, (float* x, int h, int d, const float* cs) { rope_neon(x, h, d, d, cs); })
EDGELLM_MCA_F(mca_xsimd_rope, (float* x, int h, int d, const float* cs) { xs::rope(x, h, d, d, cs); })
EDGELLM_MCA_F(mca_neon_rope_neox, (float* x, int h, int d, const float* cs) { rope_neox_neon(x, h, d, d, cs); })
EDGELLM_MCA_F(mca_xsimd_rope_neox, (float* x, int h, int d, const float* cs) { xs::rope_neox(x, h, d, d, cs); })
EDGELLM_MCA_F(mca_neon_gemm, (int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  neon::GemmF32Tile<4>::run<4>(K, a, lda, b, ldb, c, ldc, true);
})
EDGELLM_MCA_F(mca_xsimd_gemm, (int K, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  xs::GemmF32Tile<4>::run<4>(K, a, lda, b, ldb, c, ldc, true);
})
#endif
