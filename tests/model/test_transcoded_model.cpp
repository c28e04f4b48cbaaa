// The transcoded i-quant forms on real files (kernels/layouts/transcoded_iquants.hpp): every IQ3_S,
// IQ2_XXS, IQ2_XS, IQ2_S (nibble and 3-bit forms), IQ3_XXS, IQ4_XS, IQ1_S, IQ1_M and TQ1_0 block of the shared files
// transcodes exactly (the same dequantized floats and u8 GEMM form, or the file's bytes read back),
// and a model with those matrices transcoded at load (and IQ4_NL's and IQ4_XS's interleaved at load
// on x86) gives the logits of the matrices read in place bit for bit, prompt and decode steps; the
// memory plan counts the larger form. Skipped without the shared data, or where the kernel table has no
// transcoded form.
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
// A shared file and the type it has a transcoded form of.
struct TranscodedFile {
  std::string path;
  DType type;
  const char* form;  // its name in -v
  void (*pack)(const void*, size_t, int, int64_t, void*);
  size_t block_bytes;
  void (*dequantize_t)(const void* t, float* y, int64_t n);
  UnpackRowU8Fn unpack_u8;  // or, where the u8 GEMM reads the file's bytes back, to_file_row
  void (*to_file_row)(const void* row, int64_t n, int r, void* file) = nullptr;
  bool x86_only = false;  // IQ2's 3-bit forms (x86's tables), whose nibble forms are NEON's
};
void dequantize_iq2_xs_t(const void* t, float* y, int64_t n) {
  dequantize_row_iq2_xs_t(static_cast<const block_iq2_xs_t*>(t), y, n);
}
template <class T, void (*Dequantize)(const T*, float*, int64_t)>
void dequantize_t(const void* t, float* y, int64_t n) {
  Dequantize(static_cast<const T*>(t), y, n);
}
std::vector<TranscodedFile> transcoded_files() {
  return {{kData + "/iq/models/tiny-llama-256-IQ3_S-imat.gguf", DType::IQ3_S, "(iq3_s_t)", FormIQ3_S_T::pack,
           sizeof(block_iq3_s_t),
           [](const void* t, float* y, int64_t n) { dequantize_row_iq3_s_t(static_cast<const block_iq3_s_t*>(t), y, n); },
           unpack_u8_iq3_s_t},
          {kData + "/iq/models/tiny-llama-256-IQ2_XXS-imat.gguf", DType::IQ2_XXS, "(iq2_xxs_t)", FormIQ2_XXS_T::pack,
           sizeof(block_iq2_xxs_t),
           [](const void* t, float* y, int64_t n) { dequantize_row_iq2_xxs_t(static_cast<const block_iq2_xxs_t*>(t), y, n); },
           unpack_u8_iq2_xxs_t},
          {kData + "/iq/models/tiny-llama-256-IQ2_XS-imat.gguf", DType::IQ2_XS, "(iq2_xs_t)", FormIQ2_XS_T::pack,
           sizeof(block_iq2_xs_t), dequantize_iq2_xs_t, unpack_u8_iq2_xs_t},
          {kData + "/iq/models/tiny-llama-256-IQ2_M-imat.gguf", DType::IQ2_S, "(iq2_s_t)", FormIQ2_S_T::pack,
           sizeof(block_iq2_s_t), dequantize_iq2_xs_t, unpack_u8_iq2_xs_t},
          {kData + "/iq/models/tiny-llama-256-IQ2_XXS-imat.gguf", DType::IQ2_XXS, "(iq2_xxs_t3)", FormIQ2_XXS_T3::pack,
           sizeof(block_iq2_xxs_t3), dequantize_t<block_iq2_xxs_t3, dequantize_row_iq2_xxs_t3>, unpack_u8_iq2_xxs_t3,
           nullptr, true},
          {kData + "/iq/models/tiny-llama-256-IQ2_XS-imat.gguf", DType::IQ2_XS, "(iq2_xs_t3)", FormIQ2_XS_T3::pack,
           sizeof(block_iq2_xs_t3), dequantize_t<block_iq2_xs_t3, dequantize_row_iq2_xs_t3>, unpack_u8_iq2_xs_t3,
           nullptr, true},
          {kData + "/iq/models/tiny-llama-256-IQ2_M-imat.gguf", DType::IQ2_S, "(iq2_s_t3)", FormIQ2_S_T3::pack,
           sizeof(block_iq2_s_t3), dequantize_t<block_iq2_s_t3, dequantize_row_iq2_xs_t3>, unpack_u8_iq2_xs_t3,
           nullptr, true},
          {kData + "/iq/models/tiny-llama-256-IQ3_XXS-imat.gguf", DType::IQ3_XXS, "(iq3_xxs_t)", FormIQ3_XXS_T::pack,
           sizeof(block_iq3_xxs_t),
           [](const void* t, float* y, int64_t n) { dequantize_row_iq3_xxs_t(static_cast<const block_iq3_xxs_t*>(t), y, n); },
           unpack_u8_iq3_xxs_t},
          {kData + "/iq/models/tiny-llama-256-IQ4_XS-imat.gguf", DType::IQ4_XS, "(iq4_xs_t)", FormIQ4_XS_T::pack,
           sizeof(block_iq4_xs_t),
           [](const void* t, float* y, int64_t n) { dequantize_row_iq4_xs_t(static_cast<const block_iq4_xs_t*>(t), y, n); },
           nullptr, iq4_xs_t_to_file_row},
          {kData + "/iq/models/tiny-llama-256-IQ1_S-imat.gguf", DType::IQ1_S, "(iq1_s_t)", FormIQ1_S_T::pack,
           sizeof(block_iq1_s_t),
           dequantize_t<block_iq1_s_t, dequantize_row_iq1_s_t>, unpack_u8_iq1_s_t},
          {kData + "/iq/models/tiny-llama-256-IQ1_M-imat.gguf", DType::IQ1_M, "(iq1_m_t)", FormIQ1_M_T::pack,
           sizeof(block_iq1_m_t),
           dequantize_t<block_iq1_m_t, dequantize_row_iq1_m_t>, unpack_u8_iq1_m_t},
          {kData + "/iq/models/tiny-llama-256-TQ1_0-imat.gguf", DType::TQ1_0, "(tq1_0_t)", FormTQ1_0_T::pack,
           sizeof(block_tq1_0_t),
           [](const void* t, float* y, int64_t n) { dequantize_row_tq2_0(static_cast<const block_tq1_0_t*>(t), y, n); },
           unpack_u8_tq1_0_t}};
}
// The files whose logits the next test compares: the transcoded ones, and IQ4_NL's and IQ4_XS's
// row-interleaved forms (kernels/x86/packed-inl.hpp; where a table has one).
struct FormFile {
  std::string path;
  DType type;
  const char* form;
  size_t block_bytes;
};
std::vector<FormFile> form_files() {
  std::vector<FormFile> v;
  // x86 interleaves IQ4_XS's rows (iq4_xsx16 / iq4_xsx8); its IQ2 forms are the 3-bit ones
  const bool x86 = EDGELLM_HAS_X86_KERNELS != 0;
  for (const TranscodedFile& tf : transcoded_files()) {
    const bool iq2 = tf.type == DType::IQ2_XXS || tf.type == DType::IQ2_XS || tf.type == DType::IQ2_S;
    if (iq2 && tf.x86_only != x86) continue;
    v.push_back({tf.path, tf.type, tf.type == DType::IQ4_XS ? "(iq4_xs" : tf.form, tf.block_bytes});
  }
  v.push_back({kData + "/iq/models/tiny-llama-256-IQ4_NL-imat.gguf", DType::IQ4_NL, "(iq4_nlx", sizeof(block_iq4_nl)});
  return v;
}
}  // namespace

TEST_CASE("transcoded i-quants: every block of the shared files of the transcoded types transcodes exactly") {
  for (const TranscodedFile& tf : transcoded_files()) {
    CAPTURE(tf.path);
    if (!path_exists(tf.path)) EDGELLM_SKIP(tf.path, " not found");
    const GgufFile f = GgufFile::open(tf.path);
    int tensors = 0;
    for (const auto& t : f.tensors()) {
      if (t.type != tf.type) continue;
      CAPTURE(t.name);
      ++tensors;
      const int64_t n = t.n_elements();
      std::vector<uint8_t> tc(size_t(n / QK_K) * tf.block_bytes);
      tf.pack(t.data, 0, 1, n, tc.data());
      std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
      dequantize_row(tf.type, t.data, fa.data(), n);
      tf.dequantize_t(tc.data(), fb.data(), n);
      CHECK(std::memcmp(fa.data(), fb.data(), sizeof(float) * size_t(n)) == 0);
      if (tf.unpack_u8) {
        CHECK(unpacks_as_file(tf.type, t.data, tf.unpack_u8, tc.data(), n));
      } else {
        std::vector<uint8_t> back(dtype_row_bytes(tf.type, n));
        tf.to_file_row(tc.data(), n, 0, back.data());
        CHECK(std::memcmp(back.data(), t.data, back.size()) == 0);
      }
    }
    CHECK(tensors > 0);
  }
}

TEST_CASE("transcoded i-quants: the transcoded model gives the in-place logits bit for bit, prompt and decode") {
  for (const FormFile& tf : form_files()) {
    CAPTURE(tf.path);
    if (!path_exists(tf.path)) EDGELLM_SKIP(tf.path, " not found");
    // The process's table with only the transcoded form: the K-quant matrices of the file's mix
    // stay in place either way (their packed forms add in another float order, not what this tests).
    KernelTable kt = kernels();
    for (uint32_t id = 0; id < kDTypeCount; ++id)
      if (DType(id) != tf.type) kt.packed[id] = PackedFormat{};
    if (kt.packed_of(tf.type).rows == 0) {
      MESSAGE("no form of ", dtype_name(tf.type), " on ", kt.f.variant);
      continue;
    }
    const LlamaModel plain(GgufFile::open(tf.path), LoadOptions::all_resident(/*repack=*/false, &kt));
    const LlamaModel tc(GgufFile::open(tf.path), LoadOptions::all_resident(/*repack=*/true, &kt));
    CHECK(tc.weights().describe_repack().find(tf.form) != std::string::npos);
    if (tf.block_bytes > dtype_row_bytes(tf.type, QK_K))
      CHECK(tc.residency().weights > plain.residency().weights);  // the plan counts the larger form
    const std::vector<int32_t> toks = {1, 17, 300, 4, 99, 250, 7, 480, 33, 5, 211, 64};
    // a 9-token prompt (the u8 GEMM over the transcoded rows, unpack_u8) and a 3-token one (the
    // transcoded GEMM against the type's vec_dot), then single-token steps (the transcoded GEMV)
    for (int n_prompt : {9, 3}) {
      CAPTURE(n_prompt);
      CHECK(prompt_and_steps_logits(tc, toks, n_prompt, 64) == prompt_and_steps_logits(plain, toks, n_prompt, 64));
    }
  }
}

TEST_CASE("transcoded i-quants: a budget the file's forms fit and the transcoded ones do not keeps the file's forms") {
  const TranscodedFile tf = transcoded_files().front();
  if (!path_exists(tf.path)) EDGELLM_SKIP(tf.path, " not found");
  const KernelTable& kt = kernels();
  if (kt.packed_of(tf.type).rows == 0) EDGELLM_SKIP("no transcoded form on ", kt.f.variant);
  KernelTable kt_file = kt;  // the same table without the transcoded form
  kt_file.packed_of(tf.type) = PackedFormat{};
  const LlamaModel plain(GgufFile::open(tf.path), LoadOptions::all_resident(/*repack=*/true, &kt));
  const LlamaModel file_forms(GgufFile::open(tf.path), LoadOptions::all_resident(/*repack=*/true, &kt_file));
  const ResidencyPlan& with = plain.residency();
  const ResidencyPlan& without = file_forms.residency();
  REQUIRE(with.weights > without.weights);
  // Between the two: every matrix fits in the file's forms, not transcoded.
  LoadOptions opt = LoadOptions::all_resident(/*repack=*/true, &kt);
  opt.mem_budget = without.kv + without.scratch + without.weights + (with.weights - without.weights) / 2;
  const LlamaModel fit(GgufFile::open(tf.path), opt);
  CHECK_FALSE(fit.residency().streaming);
  CHECK(fit.residency().weights == without.weights);
  CHECK(fit.weights().describe_repack().find(tf.form) == std::string::npos);
  const std::vector<int32_t> toks = {1, 17, 300, 4, 99, 250, 7};
  CHECK(prompt_and_steps_logits(fit, toks, 4, 64) == prompt_and_steps_logits(file_forms, toks, 4, 64));
  // With room for them, the transcoded forms.
  opt.mem_budget = with.kv + with.scratch + with.weights + (uint64_t(1) << 20);
  const LlamaModel roomy(GgufFile::open(tf.path), opt);
  CHECK_FALSE(roomy.residency().streaming);
  CHECK(roomy.weights().describe_repack().find(tf.form) != std::string::npos);
}
