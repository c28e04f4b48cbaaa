// The NEON i-quant / ternary kernels (kernels/neon/dot_iquants.hpp), both
// variants (ARMv8.0 and, where the CPU runs sdot, dotprod), called directly
// against the scalar references of kernels/scalar/dot_iquants.hpp: random bytes
// in every field (every grid index, sign pattern, scale and shift bit),
// activations from the Q8_K / Q8_0 quantizer and at the int8 extremes
// (-128 / 127: the ARMv8.0 int16 pair sums), and the registration in the NEON
// tables. Compiles to one platform check off arm64.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
// The references first, as select.hpp does: g++ 12's "GCC push_options"
// (EDGELLM_EXACT_FP_BEGIN) after a function with a dotprod target attribute
// keeps that target for the references, which then contain sdot and stop on an
// ARMv8.0 CPU.
#include "edgellm/kernels/scalar/dot_iquants.hpp"
#include "edgellm/kernels/select.hpp"
// (select.hpp brings kernels/neon/dot_iquants.hpp through neon/register.hpp)
#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref.hpp"

// Everything in one named namespace: the kernels group compiles all its test files as one unit.
namespace neon_iquants_test {

using namespace edgellm;


// Allowed |neon - ref| as a fraction of sum |w_i * a_i| (dequantized). Both
// sides sum each super-block's (IQ4_NL: block's) integer products exactly; only
// the float combination differs: the same steps for most types (fused
// multiply-adds may round differently), sub-blocks in float for IQ4_XS's
// reference, four blocks per vector for IQ4_NL. Float rounding of ~n/32 terms:
// well below 1e-6 of the absolute sum at these lengths.
constexpr double kMaxNeonIqDotErr = 2e-6;

struct IqCase {
  DType type;
  VecDotFn ref, v80, dp;
};
const IqCase kCases[] = {
    {DType::IQ4_XS, vec_dot_iq4_xs_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ4XS>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ4XS>},
    {DType::IQ4_NL, vec_dot_iq4_nl_q8_0_ref, vec_dot_neon<neon::Iq4NlBody, neon::FmtIQ4_NL>,
     vec_dot_dotprod<neon::Iq4NlBody, neon::FmtIQ4_NL>},
    {DType::IQ2_XXS, vec_dot_iq2_xxs_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ2XXS>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ2XXS>},
    {DType::IQ2_XS, vec_dot_iq2_xs_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ2XS>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ2XS>},
    {DType::IQ2_S, vec_dot_iq2_s_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ2S>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ2S>},
    {DType::IQ3_XXS, vec_dot_iq3_xxs_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ3XXS>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ3XXS>},
    {DType::IQ3_S, vec_dot_iq3_s_q8_K_ref, vec_dot_neon<neon::PickedBody, neon::IQ3S>,
     vec_dot_dotprod<neon::PickedBody, neon::IQ3S>},
    {DType::IQ1_S, vec_dot_iq1_s_q8_K_ref, vec_dot_neon<neon::DeferredBody, neon::IQ1S>,
     vec_dot_dotprod<neon::DeferredBody, neon::IQ1S>},
    {DType::IQ1_M, vec_dot_iq1_m_q8_K_ref, vec_dot_neon<neon::DeferredBody, neon::IQ1M>,
     vec_dot_dotprod<neon::DeferredBody, neon::IQ1M>},
    {DType::TQ2_0, vec_dot_tq2_0_q8_K_ref, vec_dot_neon<neon::DeferredBody, neon::TQ2>,
     vec_dot_dotprod<neon::DeferredBody, neon::TQ2>},
    {DType::TQ1_0, vec_dot_tq1_0_q8_K_ref, vec_dot_neon<neon::DeferredBody, neon::TQ1>,
     vec_dot_dotprod<neon::DeferredBody, neon::TQ1>},
};

DType act_type(DType t) { return t == DType::IQ4_NL ? DType::Q8_0 : DType::Q8_K; }

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random bytes everywhere, then a sane F16 scale where the type keeps it
// (random bits can be NaN or inf). IQ1_M spreads its scale over the top nibbles
// of its four 16-bit scale words. TQ1_0's base-3 bytes are all < 243 in real
// files (5 trits); random bytes above decode too, the same on both sides.
std::vector<uint8_t> random_rows(std::mt19937& rng, DType t, int n, int nrows) {
  const size_t bb = dtype_block_bytes(t), nb = size_t(n) / dtype_block_size(t);
  std::vector<uint8_t> w(bb * nb * size_t(nrows));
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  for (size_t i = 0; i < nb * size_t(nrows); ++i) {
    uint8_t* blk = w.data() + bb * i;
    switch (t) {
      case DType::IQ1_M: {
        uint16_t sc[4], h = fp32_to_fp16(d(rng));
        std::memcpy(sc, blk + offsetof(block_iq1_m, scales), 8);
        for (int k = 0; k < 4; ++k) sc[k] = uint16_t((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
        std::memcpy(blk + offsetof(block_iq1_m, scales), sc, 8);
        break;
      }
      case DType::TQ1_0:
        put_half(blk + offsetof(block_tq1_0, d), d(rng));
        break;
      case DType::TQ2_0:
        put_half(blk + offsetof(block_tq2_0, d), d(rng));
        break;
      default:
        put_half(blk, d(rng));
        break;  // every other i-quant opens with its F16 d
    }
  }
  return w;
}

// Activations: quantized random floats, or every quant at an extreme (-128 /
// 127 alternating per 8, the Q8_K bsums kept consistent).
std::vector<uint8_t> activations(std::mt19937& rng, DType at, int n, bool extreme) {
  std::vector<uint8_t> a(dtype_row_bytes(at, n));
  std::vector<float> x(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : x) v = u(rng);
  quantize_row(at, x.data(), a.data(), n);
  if (!extreme) return a;
  if (at == DType::Q8_K) {
    auto* y = reinterpret_cast<block_q8_K*>(a.data());
    for (int b = 0; b < n / QK_K; ++b) {
      for (int j = 0; j < QK_K; ++j) y[b].qs[j] = int8_t((j / 8 + b) % 2 ? 127 : -128);
      for (int g = 0; g < QK_K / 16; ++g) {
        int s = 0;
        for (int j = 0; j < 16; ++j) s += y[b].qs[16 * g + j];
        y[b].bsums[g] = int16_t(s);
      }
    }
  } else {
    auto* y = reinterpret_cast<block_q8_0*>(a.data());
    for (int b = 0; b < n / QK8_0; ++b)
      for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = int8_t((j / 8 + b) % 2 ? 127 : -128);
  }
  return a;
}

double abs_dot(DType wt, const void* w, DType at, const void* a, int n) {
  std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
  dequantize_row(wt, w, fw.data(), n);
  dequantize_row(at, a, fa.data(), n);
  double s = 0.0;
  for (size_t i = 0; i < fw.size(); ++i) s += std::fabs(double(fw[i]) * fa[i]);
  return s;
}

// IQ4_NL: 32 * 23 runs every loop of its one-row driver (16 blocks per step with dotprod, then 4,
// then single blocks).
std::vector<int> lengths(DType t) {
  return t == DType::IQ4_NL ? std::vector<int>{32, 96, 32 * 17, 32 * 23, 4096} : std::vector<int>{256, 768, 4096};
}

TEST_CASE("neon i-quants: ARMv8.0 and dotprod vec_dot equal the reference") {
  std::mt19937 rng(20261127);
  const bool dp = cpu_has_dotprod();
  for (const IqCase& c : kCases) {
    const std::string type_s = dtype_name(c.type);
    CAPTURE(type_s);
    const DType at = act_type(c.type);
    for (int n : lengths(c.type)) {
      CAPTURE(n);
      for (bool extreme : {false, true}) {
        CAPTURE(extreme);
        constexpr int kRows = 5;
        const auto w = random_rows(rng, c.type, n, kRows);
        const auto a = activations(rng, at, n, extreme);
        const size_t rb = dtype_row_bytes(c.type, n);
        for (int r = 0; r < kRows; ++r) {
          const void* wr = w.data() + rb * size_t(r);
          const double want = c.ref(n, wr, a.data());
          const double tol = kMaxNeonIqDotErr * abs_dot(c.type, wr, at, a.data(), n) + 1e-30;
          CHECK(std::fabs(c.v80(n, wr, a.data()) - want) <= tol);
          if (dp) CHECK(std::fabs(c.dp(n, wr, a.data()) - want) <= tol);
        }
      }
    }
  }
}

TEST_CASE("neon i-quants: IQ4_NL four-row kernels equal the reference per row") {
  std::mt19937 rng(7);
  const int n = 32 * 13;
  constexpr int kRows = 7;  // one group of four and three single rows
  const auto w = random_rows(rng, DType::IQ4_NL, n, kRows);
  const auto a = activations(rng, DType::Q8_0, n, false);
  const size_t rb = dtype_row_bytes(DType::IQ4_NL, n);
  float out80[kRows], outdp[kRows];
  vec_dot_rows_neon<neon::Iq4NlBody, neon::FmtIQ4_NL>(n, out80, kRows, w.data(), rb, a.data());
  if (cpu_has_dotprod()) vec_dot_rows_dotprod<neon::Iq4NlBody, neon::FmtIQ4_NL>(n, outdp, kRows, w.data(), rb, a.data());
  for (int r = 0; r < kRows; ++r) {
    const void* wr = w.data() + rb * size_t(r);
    const double want = vec_dot_iq4_nl_q8_0_ref(n, wr, a.data());
    const double tol = kMaxNeonIqDotErr * abs_dot(DType::IQ4_NL, wr, DType::Q8_0, a.data(), n) + 1e-30;
    CHECK(std::fabs(out80[r] - want) <= tol);
    if (cpu_has_dotprod()) CHECK(std::fabs(outdp[r] - want) <= tol);
  }
}

TEST_CASE("neon i-quants: the NEON tables carry every i-quant kernel") {
  for (Isa isa : {Isa::Neon, Isa::Dotprod}) {
    if (isa == Isa::Dotprod && !cpu_has_dotprod()) continue;
    const KernelTable t = make_kernel_table(isa);
    for (const IqCase& c : kCases) {
      const std::string type_s = dtype_name(c.type);
      CAPTURE(type_s);
      CHECK((t.of(c.type).vec_dot == (isa == Isa::Dotprod ? c.dp : c.v80)));
      CHECK(t.of(c.type).vec_dot_type == act_type(c.type));
    }
  }
}

}  // namespace neon_iquants_test

#else
TEST_CASE("neon i-quants: not an arm64 build") { CHECK(!EDGELLM_HAS_NEON); }
#endif
