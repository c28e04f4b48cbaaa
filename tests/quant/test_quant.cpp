// Reference quantizers/dequantizers (quant/ref.hpp): exact F16/BF16, round-trip error per type,
// Q8 activation rules, dispatch errors, and agreement with llama.cpp's files in the shared data.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/quant/ref.hpp"

#include "test_util.hpp"

using namespace edgellm;

namespace {

// Round-trip RMSE / RMS of Gaussian data, per type: the worst of 20 seeds x {1, 3, 64} blocks
// (also with a mean offset) plus ~20%.
constexpr double kMaxRelRmseF16 = 3.0e-4;
constexpr double kMaxRelRmseBF16 = 2.5e-3;
constexpr double kMaxRelRmseQ8_0 = 7.5e-3;
constexpr double kMaxRelRmseQ8_1 = 7.5e-3;
constexpr double kMaxRelRmseQ8_K = 1.1e-2;
constexpr double kMaxRelRmseQ6_K = 2.4e-2;
constexpr double kMaxRelRmseQ5_0 = 6.0e-2;
constexpr double kMaxRelRmseQ5_1 = 5.0e-2;
constexpr double kMaxRelRmseQ5_K = 4.8e-2;
constexpr double kMaxRelRmseQ4_0 = 1.2e-1;
constexpr double kMaxRelRmseQ4_1 = 1.0e-1;
constexpr double kMaxRelRmseQ4_K = 9.0e-2;
constexpr double kMaxRelRmseQ3_K = 2.0e-1;
constexpr double kMaxRelRmseQ2_K = 3.9e-1;

// Our quantizer against llama.cpp's result on the same F32 tensor: allowed relative excess.
constexpr double kRmseSlackVsLlamaCpp = 1e-3;

struct TypeBound {
  DType type;
  double max_rel_rmse;
};

constexpr TypeBound kRoundTripBounds[] = {
    {DType::F16, kMaxRelRmseF16},   {DType::BF16, kMaxRelRmseBF16}, {DType::Q8_0, kMaxRelRmseQ8_0},
    {DType::Q8_1, kMaxRelRmseQ8_1}, {DType::Q8_K, kMaxRelRmseQ8_K}, {DType::Q6_K, kMaxRelRmseQ6_K},
    {DType::Q5_0, kMaxRelRmseQ5_0}, {DType::Q5_1, kMaxRelRmseQ5_1}, {DType::Q5_K, kMaxRelRmseQ5_K},
    {DType::Q4_0, kMaxRelRmseQ4_0}, {DType::Q4_1, kMaxRelRmseQ4_1}, {DType::Q4_K, kMaxRelRmseQ4_K},
    {DType::Q3_K, kMaxRelRmseQ3_K}, {DType::Q2_K, kMaxRelRmseQ2_K},
};

double bound_of(DType t) {
  for (const auto& b : kRoundTripBounds)
    if (b.type == t) return b.max_rel_rmse;
  return 0.0;
}

std::vector<float> gaussian(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Quantize then dequantize n values of type t.
std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(dtype_row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return fp32_to_bits(a) == fp32_to_bits(b);
}

bool shared_data_present() {
  std::ifstream f(std::string(EDGELLM_SHARED_DATA) + "/models/tiny-llama-256-f32.gguf");
  return f.good();
}

// A whole tensor (rows of ne[0] elements) dequantized to floats.
std::vector<float> dequantize_tensor(const GgufTensorInfo& t) {
  const int64_t row = t.ne[0], nrows = t.n_elements() / t.ne[0];
  const size_t row_bytes = dtype_row_bytes(t.type, row);
  std::vector<float> y(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < nrows; ++r) dequantize_row(t.type, t.data + r * row_bytes, y.data() + r * row, row);
  return y;
}

// The F32 tensor f quantized to type t by our quantizer, row by row.
std::vector<uint8_t> quantize_tensor(const GgufTensorInfo& f, DType t) {
  const int64_t row = f.ne[0], nrows = f.n_elements() / f.ne[0];
  const size_t row_bytes = dtype_row_bytes(t, row);
  std::vector<uint8_t> q(row_bytes * static_cast<size_t>(nrows));
  const float* x = reinterpret_cast<const float*>(f.data);
  for (int64_t r = 0; r < nrows; ++r) quantize_row(t, x + r * row, q.data() + r * row_bytes, row);
  return q;
}

const char* const kQuantizedFiles[] = {"F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                       "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"};

}  // namespace

TEST_CASE("F16: every half converts exactly, rows agree, and round-trips") {
  int mismatches = 0, roundtrip_fail = 0;
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = uint16_t(h);
  std::vector<float> row(65536);
  fp16_to_fp32_row(all.data(), row.data(), 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float ref = fp16_to_fp32_ref(uint16_t(h));
    if (!same_float(fp16_to_fp32(uint16_t(h)), ref) || !same_float(row[h], ref)) ++mismatches;
    if (!std::isnan(ref) && (fp32_to_fp16(ref) != h || fp32_to_fp16_ref(ref) != h)) ++roundtrip_fail;
  }
  CHECK(mismatches == 0);
  CHECK(roundtrip_fail == 0);
  // F32 -> F16 (hardware or not) equals the exact rounding on values between and around halves.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int to_half_mismatch = 0;
  for (int i = 0; i < 200000; ++i) {
    const float f = fp32_from_bits(bits(rng));
    if (std::isnan(f)) continue;
    if (fp32_to_fp16(f) != fp32_to_fp16_ref(f)) ++to_half_mismatch;
  }
  CHECK(to_half_mismatch == 0);
}

TEST_CASE("BF16: every value converts exactly and round-trips - F32 rounds to nearest even") {
  int fail = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(uint16_t(h));
    if (fp32_to_bits(f) != (h << 16)) ++fail;
    if (!std::isnan(f) && fp32_to_bf16(f) != h) ++fail;
  }
  CHECK(fail == 0);
  CHECK(fp32_to_bf16(fp32_from_bits(0x3f808000u)) == 0x3f80);  // tie, even stays
  CHECK(fp32_to_bf16(fp32_from_bits(0x3f818000u)) == 0x3f82);  // tie, odd rounds up
  CHECK(fp32_to_bf16(fp32_from_bits(0x3f808001u)) == 0x3f81);
  std::vector<float> x = {1.0f, -2.5f, 3.140625f};
  std::vector<uint16_t> b(3);
  std::vector<float> y(3);
  fp32_to_bf16_row(x.data(), b.data(), 3);
  bf16_to_fp32_row(b.data(), y.data(), 3);
  CHECK(y == x);
}

TEST_CASE("round trips of random data stay within each type's error bound") {
  for (const auto& b : kRoundTripBounds) {
    const int64_t bs = dtype_block_size(b.type) == 1 ? 32 : dtype_block_size(b.type);
    for (int64_t nblocks : {int64_t(1), int64_t(3), int64_t(64)}) {
      const int64_t n = bs * nblocks;
      const auto x = gaussian(n, uint32_t(1000 + nblocks + 17 * static_cast<uint32_t>(b.type)));
      const auto y = round_trip(b.type, x);
      const double rel = rmse(x.data(), y.data(), n) / rms(x.data(), n);
      INFO(std::string(dtype_name(b.type)), " n=", n, " relative rmse=", rel);
      CHECK(rel <= b.max_rel_rmse);
      CHECK(rel > 0.0);  // every listed type is lossy on random data
    }
  }
}

TEST_CASE("quantizers keep zeros, scale, offsets and signs sane") {
  for (const auto& b : kRoundTripBounds) {
    INFO(std::string(dtype_name(b.type)));
    const int64_t n = 512;
    const std::vector<float> zeros(n, 0.0f);
    const auto z = round_trip(b.type, zeros);
    CHECK(rmse(z.data(), zeros.data(), n) == 0.0);
    // A shifted, scaled row (non-zero mean, large magnitude) keeps the relative bound: the
    // asymmetric types track the offset, the symmetric ones at least do not blow up.
    auto x = gaussian(n, 99, 40.0f);
    for (auto& v : x) v = v + 3.0f;
    const auto y = round_trip(b.type, x);
    CHECK(rmse(x.data(), y.data(), n) / rms(x.data(), n) <= b.max_rel_rmse);
    // A constant positive row comes back close (exactly for the max-abs symmetric rules).
    const std::vector<float> c(n, 0.75f);
    const auto yc = round_trip(b.type, c);
    CHECK(rmse(c.data(), yc.data(), n) <= 0.75 * b.max_rel_rmse);
  }
}

TEST_CASE("Q8_0 / Q8_1: d = amax / 127 and q = round(x / d)") {
  const auto x = gaussian(64, 5);
  std::vector<block_q8_0> q(2);
  std::vector<block_q8_1> q1(2);
  quantize_row_q8_0_ref(x.data(), q.data(), 64);
  quantize_row_q8_1_ref(x.data(), q1.data(), 64);
  for (int b = 0; b < 2; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    CHECK(q[b].d == fp32_to_fp16(amax / 127));
    CHECK(q1[b].d == q[b].d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float v = x[32 * b + j] * (127 / amax);
      CHECK(std::abs(q[b].qs[j] - v) <= 0.5f + 1e-4f);
      CHECK(q1[b].qs[j] == q[b].qs[j]);
      sum += q[b].qs[j];
    }
    CHECK(q1[b].s == fp32_to_fp16(sum * (amax / 127)));
  }
}

TEST_CASE("Q8_K: signed max rule, nearest-even rounding, bsums are the sums of each 16") {
  auto x = gaussian(3 * QK_K, 11);
  x[37] = -9.0f;            // the largest |x| of block 0 is negative
  x[QK_K + 5] = 8.0f;       // and of block 1 positive
  std::fill(x.begin() + 2 * QK_K, x.end(), 0.0f);  // block 2 all zeros
  std::vector<block_q8_K> q(3);
  quantize_row_q8_K_ref(x.data(), q.data(), 3 * QK_K);
  // iscale = -127 / max maps the signed max to -127 and gives d the opposite sign of max.
  CHECK(q[0].qs[37] == -127);
  CHECK(q[0].d == 1 / (-127.f / -9.0f));
  CHECK(q[1].qs[5] == -127);
  CHECK(q[1].d == 1 / (-127.f / 8.0f));
  CHECK(q[2].d == 0.0f);
  for (int b = 0; b < 3; ++b) {
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += q[b].qs[16 * g + l];
      CHECK(q[b].bsums[g] == sum);
    }
  }
  // Ties round to even: with max = -127, iscale = 1, so 2.5 -> 2, 3.5 -> 4, -2.5 -> -2.
  std::vector<float> t(QK_K, 0.0f);
  t[0] = -127.0f;
  t[1] = 2.5f;
  t[2] = 3.5f;
  t[3] = -2.5f;
  block_q8_K qt;
  quantize_row_q8_K_ref(t.data(), &qt, QK_K);
  CHECK(qt.qs[0] == -127);
  CHECK(qt.qs[1] == 2);
  CHECK(qt.qs[2] == 4);
  CHECK(qt.qs[3] == -2);
}

TEST_CASE("dispatch: supported types, function pointers, and errors that name the type") {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::Q8_K}) {
    CHECK(can_dequantize(t));
    CHECK(can_quantize(t));
  }
  CHECK_FALSE(can_dequantize(DType::MXFP4));
  CHECK_FALSE(can_quantize(DType::I32));
  std::vector<float> x(256, 1.0f), y(256);
  std::vector<uint8_t> buf(4096);
  CHECK_THROWS_WITH_AS(quantize_row(DType::MXFP4, x.data(), buf.data(), 256),
                       doctest::Contains("mxfp4"), Error);
  CHECK_THROWS_WITH_AS(dequantize_row(DType::Q4_K, buf.data(), y.data(), 100),
                       doctest::Contains("q4_K"), Error);
  CHECK_THROWS_WITH_AS(quantize_row(DType::Q8_0, x.data(), buf.data(), 33), doctest::Contains("33"), Error);
  // F32 "quantization" is a copy.
  quantize_row(DType::F32, x.data(), buf.data(), 256);
  dequantize_row(DType::F32, buf.data(), y.data(), 256);
  CHECK(y == x);
}

TEST_CASE("shared files: llama.cpp's tensors dequantize within bounds, ours are no worse") {
  if (!shared_data_present()) EDGELLM_SKIP("no shared data at " EDGELLM_SHARED_DATA);
  const std::string dir = std::string(EDGELLM_SHARED_DATA) + "/models/";
  const GgufFile ref = GgufFile::open(dir + "tiny-llama-256-f32.gguf");
  int compared = 0, requantized = 0, identical = 0;
  for (const char* name : kQuantizedFiles) {
    const GgufFile f = GgufFile::open(dir + "tiny-llama-256-" + name + ".gguf");
    for (const GgufTensorInfo& t : f.tensors()) {
      const GgufTensorInfo* r = ref.find_tensor(t.name);
      INFO(std::string(name), " ", t.name, " ", std::string(dtype_name(t.type)));
      REQUIRE(r != nullptr);
      REQUIRE(r->type == DType::F32);
      REQUIRE(r->n_elements() == t.n_elements());
      REQUIRE(can_dequantize(t.type));
      const int64_t n = t.n_elements();
      const float* x = reinterpret_cast<const float*>(r->data);
      const std::vector<float> theirs = dequantize_tensor(t);
      const double their_rmse = rmse(x, theirs.data(), n);
      ++compared;
      if (t.type == DType::F32) {
        CHECK(their_rmse == 0.0);
        continue;
      }
      CHECK(their_rmse / rms(x, n) <= bound_of(t.type));
      if (!can_quantize(t.type)) continue;
      const std::vector<uint8_t> q = quantize_tensor(*r, t.type);
      REQUIRE(q.size() == t.nbytes);
      GgufTensorInfo ours_info = t;
      ours_info.data = q.data();
      const std::vector<float> ours = dequantize_tensor(ours_info);
      const double our_rmse = rmse(x, ours.data(), n);
      INFO("our rmse ", our_rmse, " llama.cpp rmse ", their_rmse);
      CHECK(our_rmse <= their_rmse * (1 + kRmseSlackVsLlamaCpp));
      ++requantized;
      if (std::memcmp(q.data(), t.data, q.size()) == 0) ++identical;
    }
  }
  MESSAGE(compared, " tensors compared, ", requantized, " re-quantized by us, ", identical,
          " of those byte-identical to llama.cpp's");
  CHECK(requantized > 0);
  // ggml's reference quantizers are deterministic and we follow their arithmetic (no FMA
  // contraction), so every tensor llama-quantize wrote is reproduced byte for byte.
  CHECK(identical == requantized);
}

// The i-quant / ternary files of ../shared/data/iq (llama-quantize with an importance matrix, from
// tiny-llama-256-f32.gguf): every tensor dequantizes to within the relative RMSE its type reaches
// there. A misread bit field (a wrong grid index, sign or scale) gives >= 1; the bounds are the worst
// tensor of each type over the 15 files (EPYC: iq1_m 0.470, iq1_s 0.500, iq2_xxs 0.351, iq2_xs 0.308,
// iq2_s 0.255, iq3_xxs 0.188, iq3_s 0.166, iq4_nl 0.076, iq4_xs 0.077, tq1_0 / tq2_0 0.811: this
// model's weights are not ternary) plus ~10%.
TEST_CASE("shared iq files: llama.cpp's i-quant and ternary tensors dequantize within bounds") {
  if (!shared_data_present()) EDGELLM_SKIP("no shared data at " EDGELLM_SHARED_DATA);
  const std::string dir = std::string(EDGELLM_SHARED_DATA) + "/iq/models/";
  EDGELLM_SKIP_WITHOUT(dir);
  const TypeBound bounds[] = {{DType::IQ1_M, 0.52}, {DType::IQ1_S, 0.55},  {DType::IQ2_XXS, 0.39}, {DType::IQ2_XS, 0.34},
                              {DType::IQ2_S, 0.28}, {DType::IQ3_XXS, 0.21}, {DType::IQ3_S, 0.18},  {DType::IQ4_NL, 0.084},
                              {DType::IQ4_XS, 0.085}, {DType::TQ1_0, 0.89}, {DType::TQ2_0, 0.89}};
  const GgufFile ref = GgufFile::open(std::string(EDGELLM_SHARED_DATA) + "/models/tiny-llama-256-f32.gguf");
  int compared = 0;
  for (const char* name : {"IQ1_M", "IQ1_S", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ3_M", "IQ3_S", "IQ3_XXS", "IQ4_NL",
                           "IQ4_XS", "Q2_K_S", "Q4_K_M", "TQ1_0", "TQ2_0"}) {
    const GgufFile f = GgufFile::open(dir + "tiny-llama-256-" + name + "-imat.gguf");
    for (const GgufTensorInfo& t : f.tensors()) {
      double bound = 0.0;
      for (const TypeBound& b : bounds)
        if (b.type == t.type) bound = b.max_rel_rmse;
      if (bound == 0.0) continue;  // the mixes' K-quant and F32 tensors: the case above
      const GgufTensorInfo* r = ref.find_tensor(t.name);
      INFO(std::string(name), " ", t.name, " ", std::string(dtype_name(t.type)));
      REQUIRE(r != nullptr);
      REQUIRE(r->n_elements() == t.n_elements());
      const float* x = reinterpret_cast<const float*>(r->data);
      const std::vector<float> y = dequantize_tensor(t);
      CHECK(rmse(x, y.data(), t.n_elements()) / rms(x, t.n_elements()) <= bound);
      ++compared;
    }
  }
  CHECK(compared > 0);
}
