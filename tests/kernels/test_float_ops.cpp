// Every ISA's float helpers (FloatKernels) against the scalar `_ref` ones on random data and awkward
// lengths; written over the KernelTable so arm64 builds test the NEON variants.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/kernels/select.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

constexpr float kMaxRelErrReduce = 1e-5f;   // rmsnorm: summation order differs
constexpr float kMaxRelErrExp = 2e-6f;      // softmax / silu: vector exp vs libm expf
constexpr float kMaxAbsErrRope = 1e-6f;
// x86 exp_ps vs std::exp where e^x is a normal float: relative, 2 ulp (2^-23 = 1.19e-7; measured 1).
constexpr float kMaxRelErrExpPs = 2.4e-7f;

const int kLengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 64, 100, 4096 + 3};

std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = fp32_to_fp16_ref(v[i]);
  return h;
}

bool close_rel(float got, float want, float rel, float scale) { return std::fabs(got - want) <= rel * scale + 1e-30f; }

#if EDGELLM_HAS_X86_KERNELS
// The x86 levels' row exp (exp_ps), for the levels this CPU runs.
std::vector<std::pair<Isa, void (*)(float*, const float*, int)>> x86_exps() {
  std::vector<std::pair<Isa, void (*)(float*, const float*, int)>> v;
#if EDGELLM_X86_DISPATCH
  v = {{Isa::Avx2, x86_avx2::exp_row}, {Isa::Avx2Vnni, x86_avx2_vnni::exp_row},
       {Isa::Avx512Vnni, x86_avx512_vnni::exp_row}};
#else
  v = {{x86_native::kIsa, x86_native::exp_row}};
#endif
  std::vector<std::pair<Isa, void (*)(float*, const float*, int)>> runs;
  for (const auto& e : v)
    if (x86_cpu_runs(e.first)) runs.push_back(e);
  return runs;
}
#endif

}  // namespace

#if EDGELLM_HAS_X86_KERNELS
TEST_CASE("x86 vector exp matches std::exp: 2 ulp over the normal range, exact 0 / inf / NaN beyond") {
  const auto exps = x86_exps();
  REQUIRE(!exps.empty());
  std::vector<float> x;
  for (float v = -87.3f; v < 88.72f; v += 0.000731f) x.push_back(v);  // ~240k points, every exponent
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 0.5f * 0.693147f, 88.72f, -87.33f}) x.push_back(v);
  while (x.size() % 8) x.push_back(0.25f);
  for (const auto& [isa, exp_row] : exps) {
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    std::vector<float> y(x.size());
    exp_row(y.data(), x.data(), int(x.size()));
    float worst = 0.0f, at = 0.0f;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::exp(x[i]), err = std::fabs(y[i] - want) / want;
      if (err > worst) worst = err, at = x[i];
    }
    CAPTURE(at);
    CHECK(worst <= kMaxRelErrExpPs);
    const float inf = INFINITY;
    const std::vector<float> edge = {-inf, -1000.0f, -87.4f, -100.0f, 88.8f, 1000.0f, inf, NAN};
    std::vector<float> e(edge.size());
    exp_row(e.data(), edge.data(), int(edge.size()));
    for (size_t i = 0; i < 4; ++i) CHECK(e[i] == 0.0f);  // std::exp: 0 or a subnormal below 1.2e-38
    for (size_t i = 4; i < 7; ++i) CHECK(e[i] == inf);
    CHECK(std::isnan(e[7]));
    std::vector<float> zero(8, 0.0f);
    exp_row(zero.data(), zero.data(), 8);  // in place
    for (float z : zero) CHECK(z == 1.0f);
  }
}
#endif

TEST_CASE("float helpers of every ISA match the ref") {
  const FloatKernels r = make_kernel_table(Isa::Ref).f;
  std::mt19937 rng(5);
  for (Isa isa : available_isas()) {
    const FloatKernels f = make_kernel_table(isa).f;
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (int n : kLengths) {
      CAPTURE(n);
      const auto a = uniform_floats(rng, n, -2.0f, 2.0f), b = uniform_floats(rng, n, -2.0f, 2.0f);
      {  // rmsnorm, out-of-place and in place
        std::vector<float> o1(a.size()), o2(a.size()), inplace = a;
        f.rmsnorm(o1.data(), a.data(), b.data(), n, 1e-5f);
        r.rmsnorm(o2.data(), a.data(), b.data(), n, 1e-5f);
        f.rmsnorm(inplace.data(), inplace.data(), b.data(), n, 1e-5f);
        for (int i = 0; i < n; ++i) {
          CHECK(close_rel(o1[size_t(i)], o2[size_t(i)], kMaxRelErrReduce, std::fabs(o2[size_t(i)]) + 1e-6f));
          CHECK(inplace[size_t(i)] == o1[size_t(i)]);
        }
      }
      {  // softmax (with a -inf entry as a causal mask makes) and silu_mul
        std::vector<float> s1 = uniform_floats(rng, n, -20.0f, 20.0f);
        if (n > 2) s1[1] = -INFINITY;
        std::vector<float> s2 = s1;
        f.softmax(s1.data(), n);
        r.softmax(s2.data(), n);
        float total = 0.0f;
        for (int i = 0; i < n; ++i) {
          CHECK(std::fabs(s1[size_t(i)] - s2[size_t(i)]) <= kMaxRelErrExp * 8 * (s2[size_t(i)] + 1e-7f));
          total += s1[size_t(i)];
        }
        CHECK(std::fabs(total - 1.0f) <= 1e-5f);
        if (n > 2) CHECK(s1[1] == 0.0f);
        std::vector<float> g1 = uniform_floats(rng, n, -30.0f, 30.0f), g2 = g1;
        f.silu_mul(g1.data(), b.data(), n);
        r.silu_mul(g2.data(), b.data(), n);
        for (int i = 0; i < n; ++i)
          CHECK(std::fabs(g1[size_t(i)] - g2[size_t(i)]) <= kMaxRelErrExp * 8 * (std::fabs(g2[size_t(i)]) + 1e-6f));
      }
    }
  }
}

TEST_CASE("rope (normal and NEOX) of every ISA matches the ref, including partial rotation") {
  const FloatKernels r = make_kernel_table(Isa::Ref).f;
  std::mt19937 rng(11);
  struct Shape {
    int n_heads, head_dim, n_rot;
  };
  for (Isa isa : available_isas()) {
    const FloatKernels f = make_kernel_table(isa).f;
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (Shape s : {Shape{1, 2, 2}, Shape{3, 64, 64}, Shape{2, 128, 128}, Shape{4, 64, 32}, Shape{2, 12, 6},
                    Shape{5, 80, 80}}) {
      CAPTURE(s.head_dim);
      CAPTURE(s.n_rot);
      std::vector<float> cs(static_cast<size_t>(s.n_rot));
      std::uniform_real_distribution<float> ang(-3.14f, 3.14f);
      for (int i = 0; i < s.n_rot / 2; ++i) {
        const float t = ang(rng);
        cs[size_t(2 * i)] = std::cos(t);
        cs[size_t(2 * i + 1)] = std::sin(t);
      }
      auto x1 = uniform_floats(rng, s.n_heads * s.head_dim, -2.0f, 2.0f);
      auto x2 = x1;
      const auto x0 = x1;
      f.rope(x1.data(), s.n_heads, s.head_dim, s.n_rot, cs.data());
      r.rope(x2.data(), s.n_heads, s.head_dim, s.n_rot, cs.data());
      for (size_t i = 0; i < x1.size(); ++i) {
        CHECK(std::fabs(x1[i] - x2[i]) <= kMaxAbsErrRope * 4);
        if (int(i % size_t(s.head_dim)) >= s.n_rot) CHECK(x1[i] == x0[i]);  // beyond n_rot: untouched
      }
      // NEOX: the same rotations applied to (x[i], x[i + n_rot/2]) = the normal form on the
      // permuted head [x0, x_half, x1, x_half+1, ...].
      auto n1 = x0;
      f.rope_neox(n1.data(), s.n_heads, s.head_dim, s.n_rot, cs.data());
      auto perm = x0;
      const int half = s.n_rot / 2;
      for (int h = 0; h < s.n_heads; ++h)
        for (int i = 0; i < half; ++i) {
          perm[size_t(h * s.head_dim + 2 * i)] = x0[size_t(h * s.head_dim + i)];
          perm[size_t(h * s.head_dim + 2 * i + 1)] = x0[size_t(h * s.head_dim + i + half)];
        }
      r.rope(perm.data(), s.n_heads, s.head_dim, s.n_rot, cs.data());
      for (int h = 0; h < s.n_heads; ++h)
        for (int d = 0; d < s.head_dim; ++d) {
          const size_t at = size_t(h * s.head_dim + d);
          const float want = d >= s.n_rot ? x0[at] : perm[size_t(h * s.head_dim) + size_t(d < half ? 2 * d : 2 * (d - half) + 1)];
          CHECK(std::fabs(n1[at] - want) <= kMaxAbsErrRope * 4);
        }
    }
  }
}

// Attention's small GEMM: shapes of score tiles (N = block of positions, K = head_dim) and of the
// output product (N = head_dim), odd sizes for the row/column tails, strided A/B/C, both modes.
TEST_CASE("gemm_f32 of every ISA matches the ref (strides, tails, accumulate)") {
  constexpr float kMaxRelErrGemm = 1e-5f;  // relative to sum |a_k b_kj|: FMA and order differ
  const FloatKernels r = make_kernel_table(Isa::Ref).f;
  std::mt19937 rng(17);
  struct Shape {
    int M, N, K;
  };
  for (Isa isa : available_isas()) {
    const FloatKernels f = make_kernel_table(isa).f;
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (Shape s : {Shape{1, 1, 1}, Shape{64, 16, 64}, Shape{64, 64, 16}, Shape{8, 7, 64}, Shape{5, 33, 3},
                    Shape{3, 128, 128}, Shape{13, 20, 9}, Shape{4, 8, 1}}) {
      for (bool acc : {false, true}) {
        CAPTURE(s.M);
        CAPTURE(s.N);
        CAPTURE(s.K);
        CAPTURE(acc);
        const int lda = s.K + 3, ldb = s.N + 5, ldc = s.N + 2;
        const auto A = uniform_floats(rng, s.M * lda, -2.0f, 2.0f), B = uniform_floats(rng, s.K * ldb, -2.0f, 2.0f), C0 = uniform_floats(rng, s.M * ldc, -2.0f, 2.0f);
        std::vector<float> c1 = C0, c2 = C0;
        f.gemm_f32(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, c1.data(), ldc, acc);
        r.gemm_f32(s.M, s.N, s.K, A.data(), lda, B.data(), ldb, c2.data(), ldc, acc);
        for (int m = 0; m < s.M; ++m)
          for (int j = 0; j < ldc; ++j) {
            const size_t at = size_t(m) * size_t(ldc) + size_t(j);
            if (j >= s.N) {  // padding columns of C are never written
              CHECK(c1[at] == C0[at]);
              continue;
            }
            float mag = acc ? std::fabs(C0[at]) : 0.0f;
            for (int k = 0; k < s.K; ++k) mag += std::fabs(A[size_t(m * lda + k)] * B[size_t(k * ldb + j)]);
            CHECK(close_rel(c1[at], c2[at], kMaxRelErrGemm, mag));
          }
      }
    }
  }
}

TEST_CASE("KV-cache row conversions (to_float of F16 and Q8_0) of every ISA are bit-exact with the ref") {
  const KernelTable r = make_kernel_table(Isa::Ref);
  std::mt19937 rng(11);
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (int n : {1, 7, 8, 9, 31, 32, 64, 100, 1024 + 5}) {
      CAPTURE(n);
      std::vector<float> v = uniform_floats(rng, n, -70000.0f, 70000.0f);  // beyond fp16's range: infinities
      for (int i = 0; i < n; i += 5) v[size_t(i)] *= 1e-6f;       // and subnormals
      const std::vector<uint16_t> h = to_f16(v);
      std::vector<float> got(size_t(n), -1.0f), want(size_t(n), -2.0f);
      t.of(DType::F16).to_float(h.data(), got.data(), n);
      r.of(DType::F16).to_float(h.data(), want.data(), n);
      CHECK(std::memcmp(got.data(), want.data(), sizeof(float) * size_t(n)) == 0);
      if (n % 32 != 0) continue;
      std::vector<uint8_t> q(dtype_row_bytes(DType::Q8_0, n));
      r.of(DType::Q8_0).from_float(uniform_floats(rng, n, -2.0f, 2.0f).data(), q.data(), n);
      t.of(DType::Q8_0).to_float(q.data(), got.data(), n);
      r.of(DType::Q8_0).to_float(q.data(), want.data(), n);
      CHECK(std::memcmp(got.data(), want.data(), sizeof(float) * size_t(n)) == 0);
    }
  }
}

TEST_CASE("transpose_f32 of every ISA is the ref's (tiles, edges, strides)") {
  std::mt19937 rng(13);
  for (Isa isa : available_isas()) {
    const FloatKernels f = make_kernel_table(isa).f;
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (int rows : {1, 3, 4, 8, 9, 16, 17, 33})
      for (int cols : {1, 4, 5, 8, 15, 16, 64, 65}) {
        CAPTURE(rows);
        CAPTURE(cols);
        const int lds = cols + 3, ldd = rows + 2;
        const std::vector<float> src = uniform_floats(rng, rows * lds, -2.0f, 2.0f);
        std::vector<float> got(size_t(cols) * size_t(ldd), -7.0f), want = got;
        f.transpose_f32(src.data(), rows, cols, lds, got.data(), ldd);
        transpose_f32_ref(src.data(), rows, cols, lds, want.data(), ldd);
        CHECK(got == want);  // padding between dst rows untouched (-7) in both
        CHECK(want[size_t(cols - 1) * size_t(ldd) + size_t(rows - 1)] == src[size_t(rows - 1) * size_t(lds) + size_t(cols - 1)]);
      }
  }
}
