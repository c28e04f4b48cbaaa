// Row-interleaved K-quant groups (kernels/layouts/packed_kquants.hpp, kernels/x86/packed_kquants_x16-inl.hpp
// and packed_kquants_x8.hpp, kernels/neon/packed_kquants.hpp): the scalar layouts' GEMM and, when
// compiled in and the CPU has them, the AVX-512 VNNI (x16), other x86 levels' (x8) and NEON dotprod
// (x4) GEMMs against the per-row vec_dot_*_q8_K_ref on random rows, partial groups and several
// token counts; prepare_act's quantization against quantize_row_q8_K_ref.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/scalar/dot.hpp"
#include "edgellm/kernels/layouts/packed_kquants.hpp"
#include "edgellm/kernels/select.hpp"
#if EDGELLM_HAS_NEON
#include "edgellm/kernels/neon/packed_kquants.hpp"
#endif
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

// Allowed |packed - ref| as a fraction of sum |w_i * a_i| (dequantized): the integer sums per
// super-block are exact in both, only the float order (scale products, sum of super-blocks) differs.
constexpr double kMaxPackedErrQ2K = 1e-5;
constexpr double kMaxPackedErrQ3K = 1e-5;
constexpr double kMaxPackedErrQ4K = 1e-5;
constexpr double kMaxPackedErrQ5K = 1e-5;
constexpr double kMaxPackedErrQ6K = 1e-5;

using PrepareActFn = void (*)(const float* x, int64_t n_in, void* dst);

// One packed form to test: rows per group, its pack / gemm.
struct Form {
  int rows;
  size_t (*group_bytes)(int64_t);
  void (*pack)(const void*, size_t, int, int64_t, void*);
  void (*gemm)(int64_t, const void*, const void*, int, float*, size_t);
  std::string name;
};

struct KquantCase {
  DType type;
  VecDotFn ref_dot;
  double tol;
  std::vector<Form> forms;
};

// The scalar layouts at 16 rows (the AVX-512 width) and at 5 (a width no kernel assumes).
#define EDGELLM_PACKED_REF_FORMS(q)                                                              \
  {{16, group_bytes_##q##_packed<16>, pack_##q##_packed<16>, gemm_##q##_packed_ref<16>, "ref x16"}, \
   {5, group_bytes_##q##_packed<5>, pack_##q##_packed<5>, gemm_##q##_packed_ref<5>, "ref x5"}}
std::vector<KquantCase> type_cases() {
  std::vector<KquantCase> cases = {
      {DType::Q2_K, vec_dot_q2_K_q8_K_ref, kMaxPackedErrQ2K, EDGELLM_PACKED_REF_FORMS(q2_K)},
      {DType::Q3_K, vec_dot_q3_K_q8_K_ref, kMaxPackedErrQ3K, EDGELLM_PACKED_REF_FORMS(q3_K)},
      {DType::Q4_K, vec_dot_q4_K_q8_K_ref, kMaxPackedErrQ4K, EDGELLM_PACKED_REF_FORMS(q4_K)},
      {DType::Q5_K, vec_dot_q5_K_q8_K_ref, kMaxPackedErrQ5K, EDGELLM_PACKED_REF_FORMS(q5_K)},
      {DType::Q6_K, vec_dot_q6_K_q8_K_ref, kMaxPackedErrQ6K, EDGELLM_PACKED_REF_FORMS(q6_K)},
  };
#if EDGELLM_HAS_X86_KERNELS
  // every x86 level this CPU runs: the x16 forms of the AVX-512 VNNI levels, the x8 of the others
  for (Isa isa : available_isas()) {
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    const int want_rows = isa == Isa::Avx512Vnni ? 16 : 8;
    for (KquantCase& tc : cases) {
      const PackedFormat& pf = t.packed_of(tc.type);
      REQUIRE(pf.rows == want_rows);
      tc.forms.push_back({pf.rows, pf.group_bytes, pf.pack, pf.gemm, pf.name});
    }
  }
#endif
#if EDGELLM_HAS_NEON
  if (cpu_has_dotprod()) {  // the x4 dotprod forms: sdot would trap on an ARMv8.0 CPU
    KernelTable nt;
    register_neon_packed_kquants(nt);
    for (KquantCase& tc : cases) {
      const PackedFormat& pf = nt.packed_of(tc.type);
      REQUIRE(pf.rows == 4);
      tc.forms.push_back({pf.rows, pf.group_bytes, pf.pack, pf.gemm, pf.name});
    }
  }
#endif
  return cases;
}

// sum |w_i * a_i| of the dequantized row and activation: the scale of the allowed error.
double abs_dot_scale(DType wt, const void* w, const PackedActQ8K* a, int64_t n) {
  std::vector<float> fw(static_cast<size_t>(n));
  dequantize_row(wt, w, fw.data(), n);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(double(fw[size_t(i)]) * a[i / QK_K].q.d * a[i / QK_K].q.qs[i % QK_K]);
  return s;
}

}  // namespace

TEST_CASE("packed K-quant GEMMs match the per-row ref dots") {
  std::mt19937 rng(2024);
  for (const KquantCase& tc : type_cases()) {
    const std::string type_s = dtype_name(tc.type);
    CAPTURE(type_s);
    for (int64_t n : {256, 512, 2048, 5632}) {
      CAPTURE(n);
      const size_t rb = dtype_row_bytes(tc.type, n);
      const size_t ab = packed_act_q8_K_bytes(n);
      for (int nrows : {1, 5, 16, 37}) {
        CAPTURE(nrows);
        std::vector<uint8_t> w(rb * size_t(nrows));
        for (int r = 0; r < nrows; ++r) {
          const float spread = 0.25f + 0.5f * float(r % 5);
          const auto f = uniform_floats(rng, n, -spread, spread);
          quantize_row(tc.type, f.data(), w.data() + rb * size_t(r), n);
        }
        for (int ntok : {1, 3, 7, 64}) {
          CAPTURE(ntok);
          std::vector<uint8_t> act(ab * size_t(ntok));
          for (int t = 0; t < ntok; ++t) {
            const auto x = uniform_floats(rng, n, -2.0f, 2.0f);
            prepare_act_q8_K_packed_ref(x.data(), n, act.data() + ab * size_t(t));
          }
          // want[t][r], scale[t][r] from the per-row ref on the activation's block_q8_K part.
          std::vector<double> want(size_t(ntok) * size_t(nrows)), scale(want.size());
          for (int t = 0; t < ntok; ++t) {
            const auto* a = reinterpret_cast<const PackedActQ8K*>(act.data() + ab * size_t(t));
            std::vector<block_q8_K> q(size_t(n / QK_K));
            for (size_t b = 0; b < q.size(); ++b) q[b] = a[b].q;
            for (int r = 0; r < nrows; ++r) {
              want[size_t(t) * size_t(nrows) + size_t(r)] = tc.ref_dot(int(n), w.data() + rb * size_t(r), q.data());
              scale[size_t(t) * size_t(nrows) + size_t(r)] = abs_dot_scale(tc.type, w.data() + rb * size_t(r), a, n);
            }
          }
          for (const Form& f : tc.forms) {
            CAPTURE(f.name);
            const size_t stride = size_t(f.rows) + 3;  // not the group width: the stride is honoured
            std::vector<uint8_t> group(f.group_bytes(n));
            for (int r0 = 0; r0 < nrows; r0 += f.rows) {
              const int count = std::min(f.rows, nrows - r0);
              std::memset(group.data(), 0xA5, group.size());  // pack must overwrite every byte
              f.pack(w.data() + rb * size_t(r0), rb, count, n, group.data());
              std::vector<float> out(size_t(ntok) * stride, -12345.0f);
              f.gemm(n, group.data(), act.data(), ntok, out.data(), stride);
              for (int t = 0; t < ntok; ++t) {
                for (int r = 0; r < f.rows; ++r) {
                  const float got = out[size_t(t) * stride + size_t(r)];
                  if (r >= count) {  // zero rows of a partial group give exactly 0
                    CHECK(got == 0.0f);
                    continue;
                  }
                  const size_t i = size_t(t) * size_t(nrows) + size_t(r0 + r);
                  CHECK(std::fabs(double(got) - want[i]) <= tc.tol * scale[i] + 1e-30);
                }
                for (size_t r = size_t(f.rows); r < stride; ++r) CHECK(out[size_t(t) * stride + r] == -12345.0f);
              }
            }
          }
        }
      }
    }
  }
}

// Prefill and decode are the same sums in the same order: a token's outputs from a multi-token call
// (the ISA's token tiles, or NEON's unpacked 4-token path from kUnpackMinTokens tokens, partial tiles
// included) equal, bit for bit, a one-token call on that token. A change of the per-super-block
// float order in one path fails here even when it stays within the ref tolerance above.
TEST_CASE("packed K-quant GEMMs give each token the same bits with 1 or many tokens") {
  std::mt19937 rng(77);
  for (const KquantCase& tc : type_cases()) {
    const std::string type_s = dtype_name(tc.type);
    CAPTURE(type_s);
    const int64_t n = 1024;
    const size_t rb = dtype_row_bytes(tc.type, n), ab = packed_act_q8_K_bytes(n);
    for (const Form& f : tc.forms) {
      CAPTURE(f.name);
      std::vector<uint8_t> w(rb * size_t(f.rows));
      for (int r = 0; r < f.rows; ++r) {
        const auto x = uniform_floats(rng, n, -1.0f, 1.0f);
        quantize_row(tc.type, x.data(), w.data() + rb * size_t(r), n);
      }
      std::vector<uint8_t> group(f.group_bytes(n));
      f.pack(w.data(), rb, f.rows, n, group.data());
      for (int ntok : {2, 4, 5, 9, 70}) {
        CAPTURE(ntok);
        std::vector<uint8_t> act(ab * size_t(ntok));
        for (int t = 0; t < ntok; ++t) {
          const auto x = uniform_floats(rng, n, -3.0f, 3.0f);
          prepare_act_q8_K_packed_ref(x.data(), n, act.data() + ab * size_t(t));
        }
        std::vector<float> all(size_t(ntok) * size_t(f.rows)), one(size_t(f.rows));
        f.gemm(n, group.data(), act.data(), ntok, all.data(), size_t(f.rows));
        int differing = 0;
        for (int t = 0; t < ntok; ++t) {
          f.gemm(n, group.data(), act.data() + ab * size_t(t), 1, one.data(), size_t(f.rows));
          differing += std::memcmp(one.data(), all.data() + size_t(t) * size_t(f.rows), sizeof(float) * size_t(f.rows)) != 0;
        }
        CHECK(differing == 0);
      }
    }
  }
}

TEST_CASE("packed K-quant packers reject a row length that is not a multiple of 256") {
  std::vector<uint8_t> src(4096), dst(group_bytes_q6_K_packed<16>(512));
  CHECK_THROWS_WITH_AS(pack_q4_K_packed<16>(src.data(), 144, 1, 288, dst.data()), doctest::Contains("q4_K"), Error);
  CHECK_THROWS_WITH_AS(pack_q6_K_packed<16>(src.data(), 210, 1, 32, dst.data()), doctest::Contains("q6_K"), Error);
  CHECK_THROWS_WITH_AS(pack_q2_K_packed<16>(src.data(), 84, 1, 100, dst.data()), doctest::Contains("q2_K"), Error);
  CHECK_THROWS_WITH_AS(pack_q3_K_packed<16>(src.data(), 110, 1, 128, dst.data()), doctest::Contains("q3_K"), Error);
  CHECK_THROWS_WITH_AS(pack_q5_K_packed<16>(src.data(), 176, 1, 0, dst.data()), doctest::Contains("q5_K"), Error);
  CHECK_THROWS_WITH_AS(pack_q4_K_packed<16>(src.data(), 144, 17, 256, dst.data()), doctest::Contains("count"), Error);
}

TEST_CASE("packed K-quant activations are quantize_row_q8_K_ref's blocks plus their sums per 32") {
  std::mt19937 rng(5);
  std::vector<PrepareActFn> preps = {prepare_act_q8_K_packed_ref};
#if EDGELLM_HAS_X86_KERNELS
  for (Isa isa : available_isas())
    if (isa != Isa::Ref)
      preps.push_back(make_kernel_table(isa).packed_of(DType::Q2_K).prepare_act);
#endif
#if EDGELLM_HAS_NEON
  preps.push_back(prepare_act_q8_K_packed_neon);  // plain NEON: runs on every arm64 CPU
#endif
  for (int64_t n : {256, 1024, 5632}) {
    CAPTURE(n);
    auto x = uniform_floats(rng, n, -3.0f, 3.0f);
    for (int i = 0; i < QK_K; ++i) x[size_t(i)] = 0.0f;              // an all-zero block
    if (n > QK_K) x[size_t(QK_K + 5)] = -7.0f, x[size_t(QK_K + 9)] = 7.0f;  // tie of signs
    std::vector<block_q8_K> want(size_t(n / QK_K));
    quantize_row_q8_K_ref(x.data(), want.data(), n);
    for (size_t k = 0; k < preps.size(); ++k) {
      CAPTURE(k);
      std::vector<uint8_t> act(packed_act_q8_K_bytes(n), 0xA5);
      preps[k](x.data(), n, act.data());
      const auto* a = reinterpret_cast<const PackedActQ8K*>(act.data());
      for (size_t b = 0; b < want.size(); ++b) {
        CHECK(std::memcmp(&a[b].q, &want[b], sizeof(block_q8_K)) == 0);
        for (int s = 0; s < 8; ++s) CHECK(a[b].bsums32[s] == want[b].bsums[2 * s] + want[b].bsums[2 * s + 1]);
      }
    }
  }
}
