// Every ISA's vec_dot / vec_dot_rows of the i-quant and ternary types against the scalar `_ref`
// kernels (kernels/scalar/dot_iquants.hpp), on blocks of random bytes: every grid index, sign
// pattern, scale and shift bit a file can hold, so no quantizer is needed. Over the KernelTable, so
// it checks whatever each ISA registers (x86 levels: kernels/x86/dot_iquants.inl).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

// Allowed |simd - ref| as a fraction of sum |w_i * a_i| (dequantized weights and activations): the
// integer sums are exact in both (every partial sum of a block fits an int32 and converts to float
// exactly below 2^24), only the float rounding of the scale products and the order of their
// additions differ: a few float epsilons (1.2e-7) per block, as for the K-quants (test_dot.cpp).
constexpr double kMaxDotErrIQuant = 2e-6;

const DType kTypes[] = {DType::IQ4_XS,  DType::IQ3_S, DType::IQ2_XS, DType::IQ4_NL, DType::IQ2_XXS, DType::IQ2_S,
                        DType::IQ3_XXS, DType::IQ1_S, DType::IQ1_M,  DType::TQ2_0,  DType::TQ1_0};

void set_half(uint8_t* p, std::mt19937& rng, float lo, float hi) {
  const uint16_t h = fp32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
  std::memcpy(p, &h, sizeof h);
}

// Random bytes, then a sane F16 block scale (random bits can be NaN or inf). IQ1_M keeps its scale
// in the top nibbles of its four scale words.
std::vector<uint8_t> random_rows(std::mt19937& rng, DType t, int n, int nrows, size_t stride) {
  std::vector<uint8_t> w(stride * size_t(nrows));
  for (auto& b : w) b = uint8_t(rng());
  const size_t nb = size_t(n) / dtype_block_size(t);
  for (size_t i = 0; i < nb * size_t(nrows); ++i) {  // block i % nb of row i / nb
    uint8_t* blk = w.data() + stride * (i / nb) + dtype_block_bytes(t) * (i % nb);
    if (t == DType::TQ1_0) {
      set_half(blk + offsetof(block_tq1_0, d), rng, -0.1f, 0.1f);
    } else if (t == DType::TQ2_0) {
      set_half(blk + offsetof(block_tq2_0, d), rng, -0.1f, 0.1f);
    } else if (t == DType::IQ1_M) {
      const uint16_t h = fp32_to_fp16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
      uint16_t sc[4];
      std::memcpy(sc, blk + offsetof(block_iq1_m, scales), sizeof sc);
      for (int k = 0; k < 4; ++k) sc[k] = uint16_t((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
      std::memcpy(blk + offsetof(block_iq1_m, scales), sc, sizeof sc);
    } else {
      set_half(blk, rng, -0.1f, 0.1f);  // d first in every other block
    }
  }
  return w;
}

double abs_dot_dequantized(DType wt, const void* w, DType at, const void* a, int n) {
  std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
  dequantize_row(wt, w, fw.data(), n);
  dequantize_row(at, a, fa.data(), n);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::fabs(double(fw[size_t(i)]) * fa[size_t(i)]);
  return s;
}

}  // namespace

TEST_CASE("every ISA's i-quant vec_dot and vec_dot_rows match the ref on random blocks") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(2026);
  constexpr size_t kPad = 6;  // row stride not a multiple of the block size nor of 4 bytes (blocks 2-aligned)
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (DType type : kTypes) {
      const TypeKernels& k = t.of(type);
      const TypeKernels& kr = ref.of(type);
      const std::string type_s = dtype_name(type);
      CAPTURE(type_s);
      const std::string variant_s = k.variant;
      CAPTURE(variant_s);
      REQUIRE(static_cast<bool>(kr.vec_dot));
      REQUIRE(static_cast<bool>(k.vec_dot));
      REQUIRE(k.vec_dot_type == kr.vec_dot_type);
      const int bs = int(dtype_block_size(type));
      for (int nb : bs == 32 ? std::vector<int>{1, 2, 3, 8, 9, 64, 128} : std::vector<int>{1, 2, 3, 5, 8, 16}) {
        const int n = nb * bs;
        CAPTURE(n);
        for (size_t pad : {size_t(0), kPad}) {
          constexpr int kRows = 11;  // not a multiple of any unroll
          const size_t stride = dtype_row_bytes(type, n) + pad;
          const auto w = random_rows(rng, type, n, kRows, stride);
          const auto x = uniform_floats(rng, n, -3.0f, 3.0f);
          std::vector<uint8_t> a(dtype_row_bytes(k.vec_dot_type, n));
          ref.of(k.vec_dot_type).from_float(x.data(), a.data(), n);
          std::vector<double> want(kRows), scale(kRows);
          for (int r = 0; r < kRows; ++r) {
            const uint8_t* row = w.data() + stride * size_t(r);
            want[size_t(r)] = kr.vec_dot(n, row, a.data());
            scale[size_t(r)] = abs_dot_dequantized(type, row, k.vec_dot_type, a.data(), n);
            REQUIRE(std::isfinite(want[size_t(r)]));
            CHECK(std::fabs(k.vec_dot(n, row, a.data()) - want[size_t(r)]) <= kMaxDotErrIQuant * scale[size_t(r)] + 1e-30);
          }
          if (!k.vec_dot_rows) continue;
          CHECK(k.rows_per_call >= 1);
          for (int nrows : {1, 2, 3, 4, 5, 7, 8, 9, kRows}) {
            CAPTURE(nrows);
            std::vector<float> out(size_t(nrows) + 1, -12345.0f);
            k.vec_dot_rows(n, out.data(), nrows, w.data(), stride, a.data());
            for (int r = 0; r < nrows; ++r)
              CHECK(std::fabs(out[size_t(r)] - want[size_t(r)]) <= kMaxDotErrIQuant * scale[size_t(r)] + 1e-30);
            CHECK(out[size_t(nrows)] == -12345.0f);  // writes exactly nrows results
          }
        }
      }
    }
  }
}

#if EDGELLM_HAS_X86_KERNELS
TEST_CASE("the x86 levels this CPU runs register their own i-quant kernels") {
  for (Isa isa : available_isas()) {
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    for (DType type : kTypes) {
      const std::string type_s = dtype_name(type);
      CAPTURE(type_s);
      CHECK(std::string(t.of(type).variant) == isa_name(isa));
      CHECK(static_cast<bool>(t.of(type).vec_dot_rows));
    }
  }
}
#endif
