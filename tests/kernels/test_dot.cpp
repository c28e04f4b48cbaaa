// Every vec_dot / vec_dot_rows / activation quantizer of every ISA this CPU runs, against the scalar
// `_ref` kernels on random data; and the `_ref` dots against a float dot of dequantized rows.
// Written over the KernelTable only, so on arm64 it tests the NEON / dotprod variants.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref.hpp"
#include "q8_1_float_model.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

// Allowed |simd - ref| as a fraction of sum |w_i * a_i| (dequantized): only the order of float
// additions of block results may differ, integer sums are exact.
constexpr double kMaxDotErrLegacy = 2e-6;
constexpr double kMaxDotErrQ2K = 2e-6;
constexpr double kMaxDotErrQ3K = 2e-6;
constexpr double kMaxDotErrQ4K = 2e-6;
constexpr double kMaxDotErrQ5K = 2e-6;
constexpr double kMaxDotErrQ6K = 2e-6;
constexpr double kMaxDotErrFloat = 2e-6;
// |ref dot - float dot of the dequantized rows| / sum |w_i * a_i|: the ref applies scales after the
// integer sums (ggml's order), the float dot before, so only rounding differs. (Against Q8_1 the
// float dot takes the min term from the activation's s: q8_1_float_model.hpp.)
constexpr double kMaxRefVsDequantErr = 1e-5;
// A SIMD activation quantizer may differ from the ref by one quantization step per element.
constexpr double kMaxActQuantSteps = 1.001;

struct DotCase {
  DType type;
  double tol;
};
const DotCase kDotTypes[] = {
    {DType::Q4_0, kMaxDotErrLegacy}, {DType::Q4_1, kMaxDotErrLegacy}, {DType::Q5_0, kMaxDotErrLegacy},
    {DType::Q5_1, kMaxDotErrLegacy}, {DType::Q8_0, kMaxDotErrLegacy}, {DType::Q2_K, kMaxDotErrQ2K},
    {DType::Q3_K, kMaxDotErrQ3K},    {DType::Q4_K, kMaxDotErrQ4K},    {DType::Q5_K, kMaxDotErrQ5K},
    {DType::Q6_K, kMaxDotErrQ6K},    {DType::F32, kMaxDotErrFloat},   {DType::F16, kMaxDotErrFloat},
    {DType::BF16, kMaxDotErrFloat},
};

// Row lengths: one block, a few blocks, and a model-like length, per block size.
std::vector<int> lengths_for(DType t) {
  const int bs = int(dtype_block_size(t));
  if (bs == 1) return {1, 7, 16, 33, 256, 4096 + 24};
  if (bs == 32) return {32, 96, 32 * 17, 4096};
  return {256, 768, 4096};
}

// Quantized rows: w [nrows, row_bytes(n)] from random floats with a different spread per row.
std::vector<uint8_t> make_weights(std::mt19937& rng, DType t, int n, int nrows) {
  const size_t rb = dtype_row_bytes(t, n);
  std::vector<uint8_t> w(rb * size_t(nrows));
  for (int r = 0; r < nrows; ++r) {
    const float spread = 0.25f + 0.5f * float(r % 5);
    const auto f = uniform_floats(rng, n, -spread, spread);
    quantize_row(t, f.data(), w.data() + rb * size_t(r), n);
  }
  return w;
}

using edgellm_test::abs_dot_dequantized;

// Random bytes in every field of every block, then sane F16 scales (random bits can be NaN or inf)
// and no -128 among q8_0 quants (ggml's quantizers never write it; test_neon's int16 case does).
// Reaches bit patterns quantizing floats rarely makes: every 6-bit scale, every high bit.
void set_half(uint8_t* blk, size_t offset, std::mt19937& rng, float lo, float hi) {
  const uint16_t h = fp32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
  std::memcpy(blk + offset, &h, sizeof h);
}
std::vector<uint8_t> random_block_rows(std::mt19937& rng, DType t, int n, int nrows, size_t stride) {
  std::vector<uint8_t> w(stride * size_t(nrows));
  for (auto& b : w) b = uint8_t(rng());
  const size_t bb = dtype_block_bytes(t), nb = size_t(n) / dtype_block_size(t);
  for (int r = 0; r < nrows; ++r) {
    for (size_t i = 0; i < nb; ++i) {
      uint8_t* blk = w.data() + stride * size_t(r) + bb * i;
      switch (t) {
        case DType::Q4_0: set_half(blk, offsetof(block_q4_0, d), rng, -0.1f, 0.1f); break;
        case DType::Q5_0: set_half(blk, offsetof(block_q5_0, d), rng, -0.1f, 0.1f); break;
        case DType::Q4_1:
          set_half(blk, offsetof(block_q4_1, d), rng, 0.0f, 0.1f);
          set_half(blk, offsetof(block_q4_1, m), rng, -1.0f, 1.0f);
          break;
        case DType::Q5_1:
          set_half(blk, offsetof(block_q5_1, d), rng, 0.0f, 0.1f);
          set_half(blk, offsetof(block_q5_1, m), rng, -1.0f, 1.0f);
          break;
        case DType::Q8_0: {
          set_half(blk, offsetof(block_q8_0, d), rng, -0.1f, 0.1f);
          int8_t* qs = reinterpret_cast<int8_t*>(blk + offsetof(block_q8_0, qs));
          for (int j = 0; j < 32; ++j) qs[j] = qs[j] == -128 ? int8_t(-127) : qs[j];
          break;
        }
        case DType::Q2_K:
          set_half(blk, offsetof(block_q2_K, d), rng, 0.0f, 0.1f);
          set_half(blk, offsetof(block_q2_K, dmin), rng, 0.0f, 0.1f);
          break;
        case DType::Q3_K: set_half(blk, offsetof(block_q3_K, d), rng, -0.1f, 0.1f); break;
        case DType::Q4_K:
          set_half(blk, offsetof(block_q4_K, d), rng, 0.0f, 0.1f);
          set_half(blk, offsetof(block_q4_K, dmin), rng, 0.0f, 0.1f);
          break;
        case DType::Q5_K:
          set_half(blk, offsetof(block_q5_K, d), rng, 0.0f, 0.1f);
          set_half(blk, offsetof(block_q5_K, dmin), rng, 0.0f, 0.1f);
          break;
        case DType::Q6_K: set_half(blk, offsetof(block_q6_K, d), rng, -0.1f, 0.1f); break;
        default: FAIL("random_block_rows: no sanitizer for ", dtype_name(t));
      }
    }
  }
  return w;
}

}  // namespace

TEST_CASE("ref dots match a float dot of the dequantized rows") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(1234);
  for (const DotCase& tc : kDotTypes) {
    const TypeKernels& k = ref.of(tc.type);
    REQUIRE(static_cast<bool>(k.vec_dot));
    REQUIRE(static_cast<bool>(ref.of(k.vec_dot_type).from_float));
    for (int n : lengths_for(tc.type)) {
      const std::string type_s = dtype_name(tc.type);
      CAPTURE(type_s);
      CAPTURE(n);
      const auto w = make_weights(rng, tc.type, n, 1);
      const auto x = uniform_floats(rng, n, -1.0f, 1.0f);
      std::vector<uint8_t> a(dtype_row_bytes(k.vec_dot_type, n));
      ref.of(k.vec_dot_type).from_float(x.data(), a.data(), n);
      double fdot = 0.0;
      const double scale = abs_dot_dequantized(tc.type, w.data(), k.vec_dot_type, a.data(), n, &fdot);
      const double got = k.vec_dot(n, w.data(), a.data());
      CHECK(std::fabs(got - fdot) <= kMaxRefVsDequantErr * scale + 1e-30);
    }
  }
}

TEST_CASE("every ISA's vec_dot and vec_dot_rows match the ref") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(99);
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (const DotCase& tc : kDotTypes) {
      const TypeKernels& k = t.of(tc.type);
      const TypeKernels& kr = ref.of(tc.type);
      REQUIRE(static_cast<bool>(k.vec_dot));
      REQUIRE(k.vec_dot_type == kr.vec_dot_type);
      const std::string type_s = dtype_name(tc.type);
      CAPTURE(type_s);
      const std::string variant_s = k.variant;
      CAPTURE(variant_s);
      for (int n : lengths_for(tc.type)) {
        CAPTURE(n);
        constexpr int kRows = 11;  // not a multiple of any unroll
        const auto w = make_weights(rng, tc.type, n, kRows);
        const size_t rb = dtype_row_bytes(tc.type, n);
        const auto x = uniform_floats(rng, n, -1.0f, 1.0f);
        std::vector<uint8_t> a(dtype_row_bytes(k.vec_dot_type, n));
        ref.of(k.vec_dot_type).from_float(x.data(), a.data(), n);
        std::vector<double> want(kRows), scale(kRows);
        for (int r = 0; r < kRows; ++r) {
          double unused = 0.0;
          want[size_t(r)] = kr.vec_dot(n, w.data() + rb * size_t(r), a.data());
          scale[size_t(r)] =
              abs_dot_dequantized(tc.type, w.data() + rb * size_t(r), k.vec_dot_type, a.data(), n, &unused);
          const double got = k.vec_dot(n, w.data() + rb * size_t(r), a.data());
          CHECK(std::fabs(got - want[size_t(r)]) <= tc.tol * scale[size_t(r)] + 1e-30);
        }
        if (!k.vec_dot_rows) continue;
        CHECK(k.rows_per_call >= 1);
        for (int nrows : {1, 2, 3, 4, 5, 7, 8, 9, kRows}) {
          CAPTURE(nrows);
          std::vector<float> out(size_t(nrows) + 1, -12345.0f);
          k.vec_dot_rows(n, out.data(), nrows, w.data(), rb, a.data());
          for (int r = 0; r < nrows; ++r)
            CHECK(std::fabs(out[size_t(r)] - want[size_t(r)]) <= tc.tol * scale[size_t(r)] + 1e-30);
          CHECK(out[size_t(nrows)] == -12345.0f);  // writes exactly nrows results
        }
      }
    }
  }
}

TEST_CASE("every ISA's vec_dot and vec_dot_rows match the ref on random block bytes and padded row strides") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(7);
  constexpr size_t kPad = 6;  // row stride not a multiple of the block size nor of 4 bytes (blocks stay 2-aligned)
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (const DotCase& tc : kDotTypes) {
      if (dtype_block_size(tc.type) == 1) continue;  // float weights: every bit pattern is not a test
      const TypeKernels& k = t.of(tc.type);
      const TypeKernels& kr = ref.of(tc.type);
      const std::string type_s = dtype_name(tc.type);
      CAPTURE(type_s);
      const int bs = int(dtype_block_size(tc.type));
      for (int nb : bs == 32 ? std::vector<int>{1, 2, 3, 7, 8, 9, 12, 33} : std::vector<int>{1, 2, 3, 5}) {
        const int n = nb * bs;
        CAPTURE(n);
        constexpr int kRows = 9;
        const size_t stride = dtype_row_bytes(tc.type, n) + kPad;
        const auto w = random_block_rows(rng, tc.type, n, kRows, stride);
        const auto x = uniform_floats(rng, n, -3.0f, 3.0f);
        std::vector<uint8_t> a(dtype_row_bytes(k.vec_dot_type, n));
        ref.of(k.vec_dot_type).from_float(x.data(), a.data(), n);
        std::vector<double> want(kRows), scale(kRows);
        for (int r = 0; r < kRows; ++r) {
          double unused = 0.0;
          const uint8_t* row = w.data() + stride * size_t(r);
          want[size_t(r)] = kr.vec_dot(n, row, a.data());
          scale[size_t(r)] = abs_dot_dequantized(tc.type, row, k.vec_dot_type, a.data(), n, &unused);
          CHECK(std::fabs(k.vec_dot(n, row, a.data()) - want[size_t(r)]) <= tc.tol * scale[size_t(r)] + 1e-30);
        }
        if (!k.vec_dot_rows) continue;
        for (int nrows : {1, 2, 3, 4, 5, 6, 7, 9}) {
          CAPTURE(nrows);
          std::vector<float> out(size_t(nrows) + 1, -12345.0f);
          k.vec_dot_rows(n, out.data(), nrows, w.data(), stride, a.data());
          for (int r = 0; r < nrows; ++r)
            CHECK(std::fabs(out[size_t(r)] - want[size_t(r)]) <= tc.tol * scale[size_t(r)] + 1e-30);
          CHECK(out[size_t(nrows)] == -12345.0f);
        }
      }
    }
  }
}

TEST_CASE("every ISA's activation quantizers match the ref within one step") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(7);
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (DType at : {DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
      const std::string type_s = dtype_name(at);
      CAPTURE(type_s);
      REQUIRE(static_cast<bool>(t.of(at).from_float));
      const int bs = int(dtype_block_size(at));
      for (int n : {bs, 4 * bs, 4096}) {
        auto x = uniform_floats(rng, n, -3.0f, 3.0f);
        for (int i = 0; i < bs; ++i) x[size_t(i)] = 0.0f;  // an all-zero block
        if (n > bs) x[size_t(bs + 5)] = -7.0f, x[size_t(bs + 9)] = 7.0f;  // tie of signs
        const size_t bytes = dtype_row_bytes(at, n);
        std::vector<uint8_t> qa(bytes), qr(bytes);
        t.of(at).from_float(x.data(), qa.data(), n);
        ref.of(at).from_float(x.data(), qr.data(), n);
        std::vector<float> fa(static_cast<size_t>(n)), fr(static_cast<size_t>(n));
        dequantize_row(at, qa.data(), fa.data(), n);
        dequantize_row(at, qr.data(), fr.data(), n);
        for (int b = 0; b < n / bs; ++b) {
          float amax = 0.0f;
          for (int i = b * bs; i < (b + 1) * bs; ++i) amax = std::max(amax, std::fabs(x[size_t(i)]));
          const double step = amax / 127.0;
          for (int i = b * bs; i < (b + 1) * bs; ++i)
            CHECK(std::fabs(double(fa[size_t(i)]) - fr[size_t(i)]) <= kMaxActQuantSteps * step + 1e-12);
        }
        if (at == DType::Q8_1) {  // bit-exact with the ref (same rounding), s = fp16(sum(q) * unrounded d)
          CHECK(qa == qr);
          const auto* blocks = reinterpret_cast<const block_q8_1*>(qa.data());
          for (int b = 0; b < n / bs; ++b) {
            float amax = 0.0f;
            for (int i = b * bs; i < (b + 1) * bs; ++i) amax = std::max(amax, std::fabs(x[size_t(i)]));
            int s = 0;
            for (int l = 0; l < bs; ++l) s += blocks[b].qs[l];
            CHECK(blocks[b].s == fp32_to_fp16(float(s) * (amax / 127.0f)));
          }
        }
        if (at == DType::Q8_K) {  // bsums must be the sums of the stored quants
          const auto* blocks = reinterpret_cast<const block_q8_K*>(qa.data());
          for (int b = 0; b < n / bs; ++b)
            for (int g = 0; g < QK_K / 16; ++g) {
              int s = 0;
              for (int l = 0; l < 16; ++l) s += blocks[b].qs[16 * g + l];
              CHECK(blocks[b].bsums[g] == s);
            }
        }
      }
    }
  }
}

TEST_CASE("kernel tables describe their variants") {
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    CHECK(t.isa == isa);
    if (isa == Isa::Ref) CHECK(std::string(t.f.variant) == "ref");
    CHECK(std::string(t.of(DType::Q4_K).variant).size() > 0);
    CHECK(static_cast<bool>(t.f.rmsnorm));
    CHECK(t.of(DType::Q4_K).vec_dot_type == DType::Q8_K);
    CHECK(t.of(DType::Q4_0).vec_dot_type == DType::Q8_0);
    CHECK(t.of(DType::Q4_1).vec_dot_type == DType::Q8_1);
    CHECK(t.of(DType::Q5_1).vec_dot_type == DType::Q8_1);
    CHECK(t.of(DType::F16).vec_dot_type == DType::F32);
    CHECK(static_cast<bool>(t.of(DType::Q4_K).to_float));
  }
}

TEST_CASE("the process-wide table: the best ISA, or the x86 level EDGELLM_X86_LEVEL names") {
  const std::vector<Isa> isas = available_isas();
  CHECK(default_isa(nullptr) == isas.back());
  CHECK(default_isa("") == isas.back());
  CHECK(kernels().isa == default_isa(std::getenv("EDGELLM_X86_LEVEL")));
#if EDGELLM_HAS_X86_KERNELS
  for (Isa isa : isas) CHECK(default_isa(isa_name(isa)) == isa);
  CHECK_THROWS_WITH_AS(default_isa("avx3"), doctest::Contains("EDGELLM_X86_LEVEL=avx3"), Error);
  CHECK_THROWS_WITH_AS(default_isa("avx3"), doctest::Contains("available: ref"), Error);
  CHECK_THROWS_WITH_AS(default_isa("neon"), doctest::Contains("EDGELLM_X86_LEVEL=neon"), Error);
  // A compiled level this CPU does not run (dispatch build on a CPU without AVX-512 VNNI, say):
  // named in the error, never handed out.
  for (Isa level : x86_compiled_levels()) {
    if (x86_cpu_runs(level)) continue;
    const std::string name = isa_name(level);
    CAPTURE(name);
    const std::string env_msg = "EDGELLM_X86_LEVEL=" + name, table_msg = "x86 kernel level " + name;
    CHECK_THROWS_WITH_AS(default_isa(name.c_str()), doctest::Contains(env_msg.c_str()), Error);
    CHECK_THROWS_WITH_AS(make_kernel_table(level), doctest::Contains(table_msg.c_str()), Error);
  }
  // Every x86 table names its level in every variant it sets.
  for (Isa isa : isas) {
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    CHECK(std::string(t.f.variant) == isa_name(isa));
    CHECK(std::string(t.of(DType::Q4_0).variant) == isa_name(isa));
    CHECK(describe_kernels(t).rfind(std::string("kernels: ") + isa_name(isa) + ",", 0) == 0);
  }
#endif
}
