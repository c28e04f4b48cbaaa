// The transcoded i-quant forms (kernels/layouts/transcoded_iquants.hpp,
// kernels/x86/transcoded_iquants-inl.hpp): the transcode is exact (the same weights and
// dequantized floats as the file's block, on random blocks covering every grid point), the scalar
// oracle is the file's reference dot bit for bit, and at every x86 level this CPU runs the
// PackedFormat's GEMM gives each token exactly the level's vec_dot of the file's row, with 1 or
// many tokens. (Real files' blocks: tests/model/test_transcoded_model.cpp.)
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/layouts/transcoded_iquants.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"
#include "../transcoded_check.hpp"

using namespace edgellm;
using edgellm_test::iq3_s_t_unpacks_as_file;
using edgellm_test::uniform_floats;

namespace {

// n / 256 IQ3_S blocks of random bytes (every byte pattern is a valid block), finite scales d.
std::vector<block_iq3_s> random_iq3_s_blocks(std::mt19937& rng, int64_t n) {
  std::vector<block_iq3_s> v(size_t(n / QK_K));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  for (block_iq3_s& b : v) {
    auto* p = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof b; ++i) p[i] = uint8_t(byte(rng));
    b.d = fp32_to_fp16_ref(d(rng));
  }
  return v;
}

std::vector<block_iq3_s_t> transcoded_iq3_s(const std::vector<block_iq3_s>& x) {
  std::vector<block_iq3_s_t> t(x.size());
  pack_iq3_s_t(x.data(), x.size() * sizeof(block_iq3_s), 1, int64_t(x.size()) * QK_K, t.data());
  return t;
}


std::vector<uint8_t> q8_K_rows(std::mt19937& rng, int64_t n, int ntok) {
  std::vector<uint8_t> a(act_bytes_q8_K_rows(n) * size_t(ntok));
  for (int t = 0; t < ntok; ++t) {
    const auto x = uniform_floats(rng, n, -3.0f, 3.0f);
    quantize_row_q8_K_ref(x.data(), reinterpret_cast<block_q8_K*>(a.data() + act_bytes_q8_K_rows(n) * size_t(t)), n);
  }
  return a;
}

}  // namespace

TEST_CASE("iq3_s_t: the transcode keeps every weight and dequantized float of the file's blocks") {
  std::mt19937 rng(47);
  // 64 blocks x 64 indexes: every one of the 512 grid points many times over
  const std::vector<block_iq3_s> x = random_iq3_s_blocks(rng, 64 * QK_K);
  const std::vector<block_iq3_s_t> t = transcoded_iq3_s(x);
  int differing = 0;
  for (size_t b = 0; b < x.size(); ++b) {
    int8_t qa[QK_K], qb[QK_K];
    unpack_iq3_s(x[b], qa);
    unpack_iq3_s_t(t[b], qb);
    differing += std::memcmp(qa, qb, QK_K) != 0;
  }
  CHECK(differing == 0);
  const int64_t n = int64_t(x.size()) * QK_K;
  std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
  dequantize_row_iq3_s(x.data(), fa.data(), n);
  dequantize_row_iq3_s_t(t.data(), fb.data(), n);
  CHECK(std::memcmp(fa.data(), fb.data(), sizeof(float) * size_t(n)) == 0);
  CHECK(iq3_s_t_unpacks_as_file(x.data(), t.data(), n));
  CHECK_THROWS_AS(transcode::odd_nibble(2), Error);
  CHECK_THROWS_AS(transcode::odd_nibble(-17), Error);
}

TEST_CASE("iq3_s_t: the scalar oracle is the file's reference dot bit for bit") {
  std::mt19937 rng(48);
  for (int64_t n : {256, 1280}) {
    const std::vector<block_iq3_s> x = random_iq3_s_blocks(rng, n);
    const std::vector<block_iq3_s_t> t = transcoded_iq3_s(x);
    const std::vector<uint8_t> a = q8_K_rows(rng, n, 3);
    float out[3];
    gemm_iq3_s_t_ref(n, t.data(), a.data(), 3, out, 1);
    for (int k = 0; k < 3; ++k) {
      const float want = vec_dot_iq3_s_q8_K_ref(int(n), x.data(), a.data() + act_bytes_q8_K_rows(n) * size_t(k));
      CHECK(std::memcmp(&want, &out[k], sizeof want) == 0);
    }
  }
}

TEST_CASE("iq3_s_t: every x86 level's GEMM gives each token the level's IQ3_S vec_dot, bit for bit") {
  std::mt19937 rng(49);
  int levels = 0;
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    const PackedFormat& pf = kt.packed_of(DType::IQ3_S);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    if (isa == Isa::Ref || isa == Isa::Neon || isa == Isa::Dotprod) {
      CHECK(pf.rows == 0);  // the transcoded forms are x86 only (for now)
      continue;
    }
    ++levels;
    REQUIRE(pf.rows == 1);
    CHECK(pf.resident_only);
    const VecDotFn dot = kt.of(DType::IQ3_S).vec_dot;
    for (int64_t n : {256, 768, 2048}) {  // 1, 3 (an odd block last) and 8 blocks
      CAPTURE(n);
      const std::vector<block_iq3_s> x = random_iq3_s_blocks(rng, n);
      REQUIRE(pf.group_bytes(n) == size_t(n / QK_K) * 134);
      std::vector<uint8_t> group(pf.group_bytes(n));
      pf.pack(x.data(), x.size() * sizeof(block_iq3_s), 1, n, group.data());
      // prepare_act is the level's Q8_K quantizer (vec_dot's activations)
      const size_t ab = pf.act_bytes(n);
      REQUIRE(ab == dtype_row_bytes(DType::Q8_K, n));
      for (int ntok : {1, 2, 3, 4, 5, 9}) {
        CAPTURE(ntok);
        std::vector<uint8_t> act(ab * size_t(ntok)), want_act(ab);
        int differing = 0;
        for (int t = 0; t < ntok; ++t) {
          const auto f = uniform_floats(rng, n, -3.0f, 3.0f);
          pf.prepare_act(f.data(), n, act.data() + ab * size_t(t));
          kt.of(DType::Q8_K).from_float(f.data(), want_act.data(), n);
          differing += std::memcmp(want_act.data(), act.data() + ab * size_t(t), ab) != 0;
        }
        CHECK(differing == 0);
        std::vector<float> out(size_t(2 * ntok), NAN);
        pf.gemm(n, group.data(), act.data(), ntok, out.data(), 2);  // out_stride 2: only even slots written
        for (int t = 0; t < ntok; ++t) {
          const float want = dot(int(n), x.data(), act.data() + ab * size_t(t));
          CHECK(std::memcmp(&want, &out[size_t(2 * t)], sizeof want) == 0);
          CHECK(std::isnan(out[size_t(2 * t + 1)]));
        }
      }
    }
  }
  if (EDGELLM_HAS_X86_KERNELS) CHECK(levels > 0);
}
