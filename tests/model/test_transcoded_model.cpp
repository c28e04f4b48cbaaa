// The transcoded i-quant forms on a real file (kernels/layouts/transcoded_iquants.hpp): every IQ3_S
// block of the shared IQ3_S file transcodes exactly (the same dequantized floats, and back to the
// same bytes), and the model with its IQ3_S matrices transcoded at load gives the logits of the
// matrices read in place bit for bit, prompt and decode steps; the memory plan counts the larger
// form. Skipped without the shared data, or where the kernel table has no transcoded form.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include <edgellm/kernels/layouts/transcoded_iquants.hpp>
#include <edgellm/model/llama.hpp>

#include "model_fixtures.hpp"
#include "test_util.hpp"
#include "transcoded_check.hpp"

using namespace edgellm;
using namespace edgellm_test;

namespace {
const std::string kIq3sFile = kData + "/iq/models/tiny-llama-256-IQ3_S-imat.gguf";
}

TEST_CASE("iq3_s_t: every IQ3_S block of the shared file transcodes exactly") {
  EDGELLM_SKIP_WITHOUT(kIq3sFile);
  const GgufFile f = GgufFile::open(kIq3sFile);
  int tensors = 0;
  for (const auto& t : f.tensors()) {
    if (t.type != DType::IQ3_S) continue;
    CAPTURE(t.name);
    ++tensors;
    const int64_t n = t.n_elements();
    const auto* x = reinterpret_cast<const block_iq3_s*>(t.data);
    std::vector<block_iq3_s_t> tc(size_t(n / QK_K));
    pack_iq3_s_t(x, 0, 1, n, tc.data());
    std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
    dequantize_row_iq3_s(x, fa.data(), n);
    dequantize_row_iq3_s_t(tc.data(), fb.data(), n);
    CHECK(std::memcmp(fa.data(), fb.data(), sizeof(float) * size_t(n)) == 0);
    CHECK(iq3_s_t_unpacks_as_file(x, tc.data(), n));
  }
  CHECK(tensors > 0);
}

TEST_CASE("iq3_s_t: the transcoded model gives the in-place logits bit for bit, prompt and decode") {
  EDGELLM_SKIP_WITHOUT(kIq3sFile);
  // The process's table with only the transcoded form: the K-quant matrices of the file's mix stay
  // in place either way (their packed forms add in another float order, not what this tests).
  KernelTable kt = kernels();
  for (uint32_t id = 0; id < kDTypeCount; ++id)
    if (DType(id) != DType::IQ3_S) kt.packed[id] = PackedFormat{};
  if (kt.packed_of(DType::IQ3_S).rows == 0) EDGELLM_SKIP("no transcoded IQ3_S form on ", kt.f.variant);
  const LlamaModel plain(GgufFile::open(kIq3sFile), LoadOptions::all_resident(/*repack=*/false, &kt));
  const LlamaModel tc(GgufFile::open(kIq3sFile), LoadOptions::all_resident(/*repack=*/true, &kt));
  CHECK(tc.weights().describe_repack().find("(iq3_s_t)") != std::string::npos);
  // the plan counts 134 bytes per 256 weights instead of 110
  CHECK(tc.residency().weights > plain.residency().weights);
  const std::vector<int32_t> toks = {1, 17, 300, 4, 99, 250, 7, 480, 33, 5, 211, 64};
  // a 9-token prompt (the u8 GEMM over the file's rows) and a 3-token one (the transcoded GEMM against
  // the type's vec_dot), then single-token steps (the transcoded GEMV against vec_dot)
  for (int n_prompt : {9, 3}) {
    CAPTURE(n_prompt);
    CHECK(prompt_and_steps_logits(tc, toks, n_prompt, 64) == prompt_and_steps_logits(plain, toks, n_prompt, 64));
  }
}
