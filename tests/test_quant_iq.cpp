// The i-quant and ternary quantizers (quant/quantize_iq.hpp) against llama-quantize: every tensor
// of an i-quant / ternary type in the shared iq files (../shared/data/iq/models, made with the
// importance matrix iq/tiny-llama-256.imatrix.gguf) is quantized again here from the same tensor of
// tiny-llama-256-f32.gguf with the same per-column weights, and the bytes must be equal.
#include <doctest/doctest.h>

#include <cmath>
#include <ctime>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/quant/quantize_iq.hpp"

#include "test_util.hpp"

namespace test_quant_iq {

using namespace edgellm;
using QuantizeFn = size_t (*)(const float*, void*, int64_t, int64_t, const float*);

QuantizeFn quantizer_of(DType t) {
  switch (t) {
    case DType::IQ2_XXS: return quantize_iq2_xxs;
    case DType::IQ2_XS: return quantize_iq2_xs;
    case DType::IQ2_S: return quantize_iq2_s;
    case DType::IQ3_XXS: return quantize_iq3_xxs;
    case DType::IQ3_S: return quantize_iq3_s;
    case DType::IQ1_S: return quantize_iq1_s;
    case DType::IQ1_M: return quantize_iq1_m;
    case DType::IQ4_NL: return quantize_iq4_nl;
    case DType::IQ4_XS: return quantize_iq4_xs;
    case DType::TQ1_0: return quantize_tq1_0;
    case DType::TQ2_0: return quantize_tq2_0;
    default: return nullptr;
  }
}

const char* const kIqFiles[] = {"IQ1_S",  "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_S",
                                "IQ3_M",  "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "Q2_K_S", "Q4_K_M"};

// The per-column weights llama-quantize uses for each tensor: in_sum2 / counts of the GGUF
// imatrix (per expert; a zero count gives weights 1), as tools/quantize/quantize.cpp loads them.
std::map<std::string, std::vector<float>> load_imatrix_weights(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  std::map<std::string, std::vector<float>> out;
  const std::string suffix = ".in_sum2";
  for (const auto& t : f.tensors()) {
    if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string name = t.name.substr(0, t.name.size() - suffix.size());
    const GgufTensorInfo& c = f.tensor(name + ".counts");
    REQUIRE(t.type == DType::F32);
    REQUIRE(c.type == DType::F32);
    const int64_t ncounts = c.n_elements();
    const int64_t ne0 = t.n_elements() / ncounts;
    const float* sums = reinterpret_cast<const float*>(t.data);
    const float* counts = reinterpret_cast<const float*>(c.data);
    std::vector<float> e(static_cast<size_t>(t.n_elements()));
    for (int64_t j = 0; j < ncounts; ++j) {
      const float count = counts[j];
      for (int64_t i = 0; i < ne0; ++i) e[j * ne0 + i] = count > 0.0f ? sums[j * ne0 + i] / count : 1.0f;
    }
    out[name] = std::move(e);
  }
  return out;
}

// Every tensor of type `type` in the shared iq files quantized again and compared byte for byte.
void check_type_against_llama(DType type) {
  const std::string dir = edgellm_test::kData + "/iq/";
  const std::string f32_path = edgellm_test::kData + "/models/tiny-llama-256-f32.gguf";
  EDGELLM_SKIP_WITHOUT(dir + "tiny-llama-256.imatrix.gguf");
  EDGELLM_SKIP_WITHOUT(f32_path);
  const auto imatrix = load_imatrix_weights(dir + "tiny-llama-256.imatrix.gguf");
  const GgufFile src = GgufFile::open(f32_path);
  const QuantizeFn quantize = quantizer_of(type);
  REQUIRE(static_cast<bool>(quantize));
  int compared = 0, with_imatrix = 0;
  double seconds = 0;
  for (const char* ft : kIqFiles) {
    const std::string path = dir + "models/tiny-llama-256-" + ft + "-imat.gguf";
    if (!edgellm_test::path_exists(path)) continue;
    const GgufFile q = GgufFile::open(path);
    for (const auto& t : q.tensors()) {
      if (t.type != type) continue;
      INFO(ft, " ", t.name);
      const GgufTensorInfo& s = src.tensor(t.name);
      REQUIRE(s.type == DType::F32);
      REQUIRE(s.n_elements() == t.n_elements());
      const int64_t n_per_row = s.ne[0];
      const int64_t nrows = s.n_elements() / n_per_row;
      const auto it = imatrix.find(t.name);
      const float* w = nullptr;
      if (it != imatrix.end()) {
        REQUIRE(int64_t(it->second.size()) == n_per_row);
        w = it->second.data();
        ++with_imatrix;
      }
      std::vector<uint8_t> out(dtype_row_bytes(type, n_per_row) * size_t(nrows) + 1, 0xa5);
      const std::clock_t t0 = std::clock();  // CPU time: the machine may be shared
      const size_t n = quantize(reinterpret_cast<const float*>(s.data), out.data(), nrows, n_per_row, w);
      seconds += double(std::clock() - t0) / CLOCKS_PER_SEC;
      REQUIRE(n == t.nbytes);
      CHECK(out[n] == 0xa5);  // nothing written past the end
      size_t first_diff = n;
      for (size_t i = 0; i < n; ++i)
        if (out[i] != t.data[i]) {
          first_diff = i;
          break;
        }
      INFO("first differing byte ", first_diff, " of ", n, " (row ", first_diff / dtype_row_bytes(type, n_per_row), ")");
      CHECK(first_diff == n);
      ++compared;
    }
  }
  MESSAGE(std::string(dtype_name(type)), ": ", compared, " tensors compared (", with_imatrix, " with imatrix weights), ",
          seconds * 1e3 / (compared ? compared : 1), " ms CPU per tensor (the first includes building the grid map)");
  if (compared == 0) EDGELLM_SKIP("no ", dtype_name(type), " tensor in the shared iq files");
}

}  // namespace test_quant_iq

TEST_CASE("IQ4_NL quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ4_NL); }
TEST_CASE("IQ4_XS quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ4_XS); }
TEST_CASE("TQ2_0 quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::TQ2_0); }
TEST_CASE("TQ1_0 quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::TQ1_0); }
TEST_CASE("IQ2_XXS quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ2_XXS); }
TEST_CASE("IQ2_XS quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ2_XS); }
TEST_CASE("IQ3_XXS quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ3_XXS); }
TEST_CASE("IQ3_S quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ3_S); }
TEST_CASE("IQ2_S quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ2_S); }
TEST_CASE("IQ1_S quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ1_S); }
TEST_CASE("IQ1_M quantizer is byte-identical to llama-quantize") { test_quant_iq::check_type_against_llama(edgellm::DType::IQ1_M); }

TEST_CASE("i-quant quantizers: bad shapes and a missing importance matrix throw") {
  using namespace edgellm;
  std::vector<float> x(QK_K, 0.5f), w(QK_K, 1.0f);
  std::vector<uint8_t> out(1024);
  CHECK_THROWS_AS(quantize_iq4_xs(x.data(), out.data(), 1, 100, nullptr), Error);
  CHECK_THROWS_AS(quantize_iq2_xxs(x.data(), out.data(), 1, QK_K, nullptr), Error);
  CHECK_THROWS_AS(quantize_iq2_xs(x.data(), out.data(), 1, QK_K, nullptr), Error);
  CHECK_THROWS_AS(quantize_iq1_s(x.data(), out.data(), 1, QK_K, nullptr), Error);
  CHECK(quantize_iq2_xxs(x.data(), out.data(), 1, QK_K, w.data()) == sizeof(block_iq2_xxs));
  CHECK(quantize_iq1_m(x.data(), out.data(), 1, QK_K, nullptr) == sizeof(block_iq1_m));
}
