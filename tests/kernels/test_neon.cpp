// What only the NEON kernels (kernels/neon/) need beyond the per-ISA loops of test_dot /
// test_float_ops (which run the ARMv8.0 and dotprod tables on arm64): int16 sums at the extreme
// quants, matmul through the table, the vector scale unpackers, the q8 quantizers bit-exact, the
// exp polynomial, and the run-time choice of the table. Compiles to one platform check off arm64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/neon/register.hpp"
#include "edgellm/kernels/scalar/dot.hpp"
#include "edgellm/kernels/scalar/float_ops.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/thread_pool.hpp"
#include "edgellm/quant/scales.hpp"

using namespace edgellm;

namespace {

// Both sides sum exact integers per block; only the float combination of blocks differs.
constexpr double kMaxDotRelErr = 2e-6;      // times sum over blocks of |block result|
constexpr double kMaxFloatDotRelErr = 1e-5; // times sum of |a_i * b_i|
constexpr float kMaxExpRelErr = 1e-6f;      // softmax / silu through our exp polynomial
constexpr double kMaxMatmulRelErr = 1e-5;   // matmul outputs vs the ref table, times max |output| + 1

std::mt19937& rng() {
  static std::mt19937 g(1234);
  return g;
}
float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }

}  // namespace

TEST_CASE("neon: ARMv8.0 int16 pair sums stay exact at the extreme quants") {
  // DotV80 adds two products in int16: -128 weights (allowed in a q8_0 file) against +-127
  // activations, and q4_0's 16 * (q - 8) = -128, must not wrap.
  std::vector<block_q8_0> w(4), a(4);
  for (int b = 0; b < 4; ++b) {
    w[b].d = a[b].d = fp32_to_fp16(0.01f);
    for (int j = 0; j < 32; ++j) {
      w[b].qs[j] = -128;
      a[b].qs[j] = int8_t(b % 2 ? 127 : -127);
    }
  }
  // A wrapped pair would be off by 65536 * d * d ~ 6.6; float rounding is ~1e-6 of the magnitude.
  const double mag = 4 * 32 * 128.0 * 127.0 * 1e-4;
  CHECK(std::fabs(vec_dot_neon<neon::LegacyBody, neon::FmtQ8_0>(128, w.data(), a.data()) - vec_dot_q8_0_q8_0_ref(128, w.data(), a.data())) <=
        kMaxDotRelErr * mag);
  std::vector<block_q4_0> w4(4);
  for (auto& b : w4) {
    b.d = fp32_to_fp16(0.01f);
    std::memset(b.qs, 0x00, sizeof b.qs);  // every quant 0 -> q - 8 = -8
  }
  CHECK(std::fabs(vec_dot_neon<neon::LegacyBody, neon::FmtQ4_0>(128, w4.data(), a.data()) - vec_dot_q4_0_q8_0_ref(128, w4.data(), a.data())) <=
        kMaxDotRelErr * mag);
  float out[4];
  vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ8_0>(32, out, 4, w.data(), sizeof(block_q8_0), a.data());
  for (int r = 0; r < 4; ++r) CHECK(std::fabs(out[r] - vec_dot_q8_0_q8_0_ref(32, &w[r], a.data())) <= kMaxDotRelErr * mag);
}

TEST_CASE("neon: matmul through the NEON table (rows kernels) equals the reference table") {
  // What the model runs: GEMV (1 token, units of rows_per_call) and prefill (16-row tiles), with
  // n_out not a multiple of 4 or 2, 1 and 2 threads. Same quantized activations on both sides.
  const KernelTable ref = make_kernel_table(Isa::Ref);
  ThreadPool pool(2);
  for (Isa isa : {Isa::Neon, Isa::Dotprod}) {
    const KernelTable t = make_kernel_table(isa);
    for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
      const int64_t n_in = 512, n_out = 23;
      const size_t row_bytes = dtype_row_bytes(type, n_in);
      std::vector<float> wf(size_t(n_in * n_out));
      for (auto& v : wf) v = uniform(-1, 1);
      std::vector<uint8_t> wq(row_bytes * size_t(n_out));
      for (int64_t r = 0; r < n_out; ++r)
        quantize_row(type, wf.data() + r * n_in, wq.data() + size_t(r) * row_bytes, n_in);
      const MatmulWeight w{type, wq.data(), n_in, n_out, row_bytes};
      for (int64_t n_tok : {1, 3}) {
        std::vector<float> x(size_t(n_tok * n_in)), want(size_t(n_tok * n_out)), got(want.size());
        for (auto& v : x) v = uniform(-2, 2);
        matmul(ref, nullptr, w, x.data(), n_tok, want.data());
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
          std::fill(got.begin(), got.end(), -1.0f);
          matmul(t, p, w, x.data(), n_tok, got.data());
          CAPTURE(std::string(dtype_name(type)));
          CAPTURE(std::string(isa_name(t.isa)));
          CAPTURE(n_tok);
          double max_err = 0.0, max_mag = 0.0;
          for (size_t i = 0; i < got.size(); ++i) {
            max_err = std::max(max_err, double(std::fabs(got[i] - want[i])));
            max_mag = std::max(max_mag, double(std::fabs(want[i])));
          }
          CHECK(max_err <= kMaxMatmulRelErr * (max_mag + 1.0));
        }
      }
    }
  }
}

TEST_CASE("neon: vector scale unpackers equal quant/scales.hpp") {
  for (int rep = 0; rep < 2000; ++rep) {
    uint8_t q[12];
    for (auto& b : q) b = uint8_t(rng()());
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(q, sc, mn);
    uint32_t u[4];
    neon::unpack_scales_mins_k4_words(q, u);
    uint8_t got[16];
    std::memcpy(got, u, 16);
    CHECK(std::memcmp(got, sc, 8) == 0);
    CHECK(std::memcmp(got + 8, mn, 8) == 0);
    int8_t s3[16], g3[16];
    unpack_scales_q3_K(q, s3);
    vst1q_s8(g3, neon::unpack_scales_q3_K_neon(q));
    CHECK(std::memcmp(s3, g3, 16) == 0);
  }
}

TEST_CASE("neon: float-weight dots match the reference") {
  for (int n : {1, 3, 4, 7, 8, 17, 64, 257}) {
    std::vector<float> wf(n), a(n);
    std::vector<uint16_t> wh(n), wb(n);
    double mag = 0.0;
    for (int i = 0; i < n; ++i) {
      wf[i] = uniform(-1, 1);
      a[i] = uniform(-1, 1);
      wh[i] = fp32_to_fp16(wf[i]);
      wb[i] = fp32_to_bf16(wf[i]);
      mag += std::fabs(wf[i] * a[i]);
    }
    const double tol = kMaxFloatDotRelErr * (mag + 1e-6);
    CAPTURE(n);
    CHECK(std::fabs(vec_dot_f32_f32_neon(n, wf.data(), a.data()) - vec_dot_f32_f32_ref(n, wf.data(), a.data())) <= tol);
    CHECK(std::fabs(vec_dot_f16_f32_neon(n, wh.data(), a.data()) - vec_dot_f16_f32_ref(n, wh.data(), a.data())) <= tol);
    CHECK(std::fabs(vec_dot_bf16_f32_neon(n, wb.data(), a.data()) - vec_dot_bf16_f32_ref(n, wb.data(), a.data())) <= tol);
  }
}

TEST_CASE("neon: q8_0 / q8_K quantizers are bit-identical to the reference") {
  for (int nb : {1, 2, 5}) {
    std::vector<float> x(size_t(nb) * QK_K);
    for (auto& v : x) v = uniform(-3, 3);
    x[5] = 0.5f;  // exact ties for roundf vs nearest-even after scaling are exercised below
    std::vector<block_q8_0> r0(nb * 8), g0(nb * 8);
    quantize_row_q8_0_ref(x.data(), r0.data(), int64_t(x.size()));
    quantize_row_q8_0_neon(x.data(), g0.data(), int64_t(x.size()));
    CHECK(std::memcmp(r0.data(), g0.data(), r0.size() * sizeof(block_q8_0)) == 0);
    std::vector<block_q8_K> rk(nb), gk(nb);
    quantize_row_q8_K_ref(x.data(), rk.data(), int64_t(x.size()));
    quantize_row_q8_K_neon(x.data(), gk.data(), int64_t(x.size()));
    CHECK(std::memcmp(rk.data(), gk.data(), rk.size() * sizeof(block_q8_K)) == 0);
  }
  // +m and -m in one block: the first one sets the sign; an all-zero block; integer grid values.
  std::vector<float> x(QK_K * 3, 0.0f);
  for (int i = 0; i < QK_K; ++i) x[i] = float(i % 9) - 4.0f;
  x[10] = -5.0f;
  x[20] = 5.0f;
  for (int i = 2 * QK_K; i < 3 * QK_K; ++i) x[i] = 0.25f * float(i % 11);
  std::vector<block_q8_K> rk(3), gk(3);
  quantize_row_q8_K_ref(x.data(), rk.data(), int64_t(x.size()));
  quantize_row_q8_K_neon(x.data(), gk.data(), int64_t(x.size()));
  CHECK(std::memcmp(rk.data(), gk.data(), rk.size() * sizeof(block_q8_K)) == 0);
  std::vector<block_q8_0> r0(24), g0(24);
  quantize_row_q8_0_ref(x.data(), r0.data(), int64_t(x.size()));
  quantize_row_q8_0_neon(x.data(), g0.data(), int64_t(x.size()));
  CHECK(std::memcmp(r0.data(), g0.data(), r0.size() * sizeof(block_q8_0)) == 0);
}

namespace {
bool close_rel(const std::vector<float>& a, const std::vector<float>& b, float rel) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= rel * (std::fabs(b[i]) + 1e-30f))) return false;
  return true;
}
}  // namespace

TEST_CASE("neon: float helpers match the reference") {
  for (int n : {1, 3, 4, 9, 64, 131}) {
    CAPTURE(n);
    std::vector<float> x(n), w(n), up(n);
    for (int i = 0; i < n; ++i) {
      x[i] = uniform(-20, 20);
      w[i] = uniform(-2, 2);
      up[i] = uniform(-2, 2);
    }
    std::vector<float> r = x, g = x;
    rmsnorm_ref(r.data(), x.data(), w.data(), n, 1e-5f);
    rmsnorm_neon(g.data(), x.data(), w.data(), n, 1e-5f);
    CHECK(close_rel(g, r, 1e-5f));
    r = x; g = x;
    softmax_ref(r.data(), n);
    softmax_neon(g.data(), n);
    CHECK(close_rel(g, r, 4 * kMaxExpRelErr));
    r = x; g = x;
    silu_mul_ref(r.data(), up.data(), n);
    silu_mul_neon(g.data(), up.data(), n);
    CHECK(close_rel(g, r, 4 * kMaxExpRelErr));
  }
  // softmax keeps exp() finite and maps -inf to 0; exp_f32 over a wide range
  std::vector<float> s = {-INFINITY, 0.0f, 1.0f, -100.0f, 88.0f};
  softmax_neon(s.data(), int(s.size()));
  CHECK(s[0] == 0.0f);
  CHECK(s[4] == doctest::Approx(1.0f));
  for (float v = -87.0f; v < 88.0f; v += 0.37f) {
    float e[4];
    vst1q_f32(e, neon::exp_f32(vdupq_n_f32(v)));
    CHECK(std::fabs(e[0] - std::exp(v)) <= kMaxExpRelErr * 2 * std::exp(v));
  }
  // rope: odd n_rot, partial rotation, several heads
  for (int n_rot : {2, 6, 16, 64}) {
    const int head_dim = 64, n_heads = 3;
    std::vector<float> v(head_dim * n_heads), cs(n_rot);
    for (auto& e : v) e = uniform(-3, 3);
    for (int i = 0; i < n_rot / 2; ++i) {
      const float th = uniform(0, 6.28f);
      cs[2 * i] = std::cos(th);
      cs[2 * i + 1] = std::sin(th);
    }
    std::vector<float> r = v, g = v;
    rope_ref(r.data(), n_heads, head_dim, n_rot, cs.data());
    rope_neon(g.data(), n_heads, head_dim, n_rot, cs.data());
    for (size_t i = 0; i < r.size(); ++i) CHECK(std::fabs(g[i] - r[i]) <= 1e-5f);
  }
}

TEST_CASE("neon: kernel table picks dotprod exactly when the CPU has it") {
  const bool hw_dp = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  const KernelTable t = make_kernel_table(Isa::Dotprod);
  MESSAGE("HWCAP asimddp=" << hw_dp << ", table: " << std::string(isa_name(t.isa)));
  CHECK(t.isa == (hw_dp ? Isa::Dotprod : Isa::Neon));
  CHECK(std::string(t.of(DType::Q4_K).variant) == (hw_dp ? "dotprod" : "neon"));
  CHECK(std::string(t.of(DType::F16).variant) == "neon");
  CHECK(std::string(t.f.variant) == "neon");
  CHECK(t.of(DType::Q2_K).vec_dot_type == DType::Q8_K);
  CHECK(t.of(DType::Q4_1).vec_dot_type == DType::Q8_1);
  // multi-row kernels of the same variant as vec_dot, with their group size
  const VecDotRowsFn q4_0_rows =
      hw_dp ? vec_dot_rows_dotprod<neon::LegacyBody, neon::FmtQ4_0> : vec_dot_rows_neon<neon::LegacyBody, neon::FmtQ4_0>;
  const VecDotRowsFn q6_K_rows =
      hw_dp ? vec_dot_rows_dotprod<neon::KQuantBody, neon::KQ6> : vec_dot_rows_neon<neon::KQuantBody, neon::KQ6>;
  CHECK(bool(t.of(DType::Q4_0).vec_dot_rows == q4_0_rows));
  CHECK(t.of(DType::Q4_0).rows_per_call == neon::kRowsLegacyNeon);
  CHECK(bool(t.of(DType::Q6_K).vec_dot_rows == q6_K_rows));
  CHECK(t.of(DType::Q6_K).rows_per_call == neon::kRowsKQuantNeon);
  CHECK(t.of(DType::F16).rows_per_call == 1);
  // The qemu CPU the test runs on (cortex-a53: ARMv8.0, cortex-a76: the A55's ISA with dotprod).
  if (const char* cpu = std::getenv("QEMU_CPU")) {
    if (std::string(cpu) == "cortex-a53") CHECK(t.isa == Isa::Neon);
    if (std::string(cpu) == "cortex-a76") CHECK(t.isa == Isa::Dotprod);
  }
  const KernelTable t80 = make_kernel_table(Isa::Neon);
  CHECK(std::string(t80.of(DType::Q6_K).variant) == "neon");
  CHECK(&kernels() != nullptr);
  CHECK(kernels().isa == t.isa);
}

#else  // not arm64

TEST_CASE("neon: not built off arm64") {
  CHECK(EDGELLM_HAS_NEON == 0);
  CHECK(EDGELLM_HAS_DOTPROD == 0);
}

#endif
