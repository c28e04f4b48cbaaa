// Tests for quant/mix.hpp: mix names, llama.cpp's per-tensor rules on hand-made layer lists, and
// the types of every tensor of the shared llama.cpp-made files (same mix -> same types).
#include <doctest/doctest.h>

#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/quant/mix.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {

std::vector<MixTensor> llama_tensors(int n_layer, int n_embd, int n_ff, bool tied) {
  std::vector<MixTensor> t;
  t.push_back({"token_embd.weight", 2, n_embd});
  for (int l = 0; l < n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* n : {"attn_norm.weight"}) t.push_back({p + n, 1, n_embd});
    for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) t.push_back({p + n, 2, n_embd});
    t.push_back({p + "ffn_norm.weight", 1, n_embd});
    t.push_back({p + "ffn_gate.weight", 2, n_embd});
    t.push_back({p + "ffn_up.weight", 2, n_embd});
    t.push_back({p + "ffn_down.weight", 2, n_ff});
  }
  t.push_back({"output_norm.weight", 1, n_embd});
  if (!tied) t.push_back({"output.weight", 2, n_embd});
  return t;
}

MixModelInfo dense_info(int n_layer, int n_head, int n_head_kv) {
  MixModelInfo info;
  info.n_layer = n_layer;
  info.n_head = n_head;
  info.n_head_kv = n_head_kv;
  return info;
}

DType type_of(const std::vector<MixTensor>& t, const std::vector<DType>& types, const std::string& name) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].name == name) return types[i];
  FAIL("no tensor ", name);
  return DType::F32;
}


}  // namespace

TEST_CASE("mix names, aliases and file types") {
  CHECK(quant_mix("Q4_K_M").file_type == 15);
  CHECK(quant_mix("q4_k_m").base == DType::Q4_K);
  CHECK(quant_mix("Q4_K").file_type == 15);
  CHECK(quant_mix("Q8_0").file_type == 7);
  CHECK(quant_mix("Q5_0").file_type == 8);
  CHECK(quant_mix("F16").file_type == 1);
  CHECK(quant_mix("BF16").file_type == 32);
  CHECK(quant_mix("Q2_K").file_type == 10);
  CHECK(quant_mix("Q3_K_S").file_type == 11);
  CHECK(quant_mix("Q6_K").file_type == 18);
  CHECK(find_quant_mix("Q7_K") == nullptr);
  CHECK_THROWS_WITH_AS(quant_mix("Q7_K"), doctest::Contains("unknown quantization type 'Q7_K'"), Error);
}

TEST_CASE("which tensors are quantized") {
  CHECK(is_quantizable_tensor("blk.0.attn_q.weight", 2));
  CHECK_FALSE(is_quantizable_tensor("blk.0.attn_norm.weight", 2));
  CHECK_FALSE(is_quantizable_tensor("blk.0.attn_norm.weight", 1));
  CHECK_FALSE(is_quantizable_tensor("rope_freqs.weight", 1));
  CHECK_FALSE(is_quantizable_tensor("blk.0.ffn_gate_inp.weight", 2));
  CHECK_FALSE(is_quantizable_tensor("blk.0.attn_q.bias", 2));
}

TEST_CASE("use_more_bits layers (hand-computed for 32 layers)") {
  // n/8 = 4, 7n/8 = 28: layers 0-3, 28-31, and 4 + 2, 4 + 5, ... (i - 4) % 3 == 2.
  std::vector<int> more;
  for (int i = 0; i < 32; ++i)
    if (MixPlanner::use_more_bits(i, 32)) more.push_back(i);
  const std::vector<int> expect = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  CHECK(more == expect);
}

TEST_CASE("Q4_K_M on a 32-layer GQA model: attn_v / ffn_down q6_K on the use_more_bits layers, output q6_K") {
  const auto t = llama_tensors(32, 4096, 14336, false);
  MixModelInfo info;
  info.n_layer = 32;
  info.n_head = 32;
  info.n_head_kv = 8;
  std::vector<DType> cur(t.size(), DType::F16);
  const auto types = plan_quant_mix(quant_mix("Q4_K_M"), info, t, cur, false);
  CHECK(type_of(t, types, "output.weight") == DType::Q6_K);
  CHECK(type_of(t, types, "token_embd.weight") == DType::Q4_K);
  CHECK(type_of(t, types, "blk.0.attn_v.weight") == DType::Q6_K);
  CHECK(type_of(t, types, "blk.4.attn_v.weight") == DType::Q4_K);
  CHECK(type_of(t, types, "blk.6.ffn_down.weight") == DType::Q6_K);
  CHECK(type_of(t, types, "blk.7.ffn_down.weight") == DType::Q4_K);
  CHECK(type_of(t, types, "blk.7.attn_q.weight") == DType::Q4_K);
  CHECK(type_of(t, types, "blk.7.attn_norm.weight") == DType::F16);  // left as it was
  const auto pure = plan_quant_mix(quant_mix("Q4_K_M"), info, t, cur, true);
  CHECK(type_of(t, pure, "output.weight") == DType::Q4_K);
  CHECK(type_of(t, pure, "blk.0.attn_v.weight") == DType::Q4_K);
}

TEST_CASE("Q2_K / Q3_K_M / Q4_K_S rules") {
  const auto t = llama_tensors(16, 2048, 5632, true);
  MixModelInfo info;
  info.n_layer = 16;
  info.n_head = 32;
  info.n_head_kv = 4;  // gqa 8
  info.has_output = false;
  std::vector<DType> cur(t.size(), DType::F32);
  auto q2 = plan_quant_mix(quant_mix("Q2_K"), info, t, cur, false);
  CHECK(type_of(t, q2, "token_embd.weight") == DType::Q6_K);  // tied: the embeddings are the output
  CHECK(type_of(t, q2, "blk.3.attn_v.weight") == DType::Q4_K);
  CHECK(type_of(t, q2, "blk.3.ffn_down.weight") == DType::Q3_K);
  CHECK(type_of(t, q2, "blk.3.attn_output.weight") == DType::Q3_K);
  CHECK(type_of(t, q2, "blk.3.ffn_up.weight") == DType::Q2_K);
  auto q3 = plan_quant_mix(quant_mix("Q3_K_M"), info, t, cur, false);
  CHECK(type_of(t, q3, "blk.0.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, q3, "blk.1.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, q3, "blk.2.attn_v.weight") == DType::Q4_K);
  CHECK(type_of(t, q3, "blk.0.ffn_down.weight") == DType::Q5_K);  // 0 < 16/16
  CHECK(type_of(t, q3, "blk.5.ffn_down.weight") == DType::Q4_K);
  CHECK(type_of(t, q3, "blk.5.attn_output.weight") == DType::Q4_K);
  auto q4s = plan_quant_mix(quant_mix("Q4_K_S"), info, t, cur, false);
  CHECK(type_of(t, q4s, "blk.3.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, q4s, "blk.4.attn_v.weight") == DType::Q4_K);
  CHECK(type_of(t, q4s, "blk.1.ffn_down.weight") == DType::Q5_K);
  CHECK(type_of(t, q4s, "blk.2.ffn_down.weight") == DType::Q4_K);
}

TEST_CASE("llama-quantize tensor order: non-layer tensors by name, then layers numerically") {
  const std::vector<std::string> names = {"token_embd.weight", "blk.10.attn_q.weight", "blk.2.ffn_up.weight", "output.weight",
                                          "blk.2.attn_k.weight", "output_norm.weight"};
  const std::vector<size_t> order = llama_tensor_order(names);
  const std::vector<size_t> expect = {3, 5, 0, 4, 2, 1};
  CHECK(order == expect);
}

TEST_CASE("Q3_K_L / Q3_K_S / Q5_K_S / Q2_K_S / F16 / BF16 rules") {
  const auto t = llama_tensors(8, 2048, 5632, false);
  MixModelInfo info;
  info.n_layer = 8;
  info.n_head = 16;
  info.n_head_kv = 16;  // no GQA
  std::vector<DType> cur(t.size(), DType::F32);
  auto l = plan_quant_mix(quant_mix("Q3_K_L"), info, t, cur, false);
  CHECK(type_of(t, l, "blk.5.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, l, "blk.5.ffn_down.weight") == DType::Q5_K);
  CHECK(type_of(t, l, "blk.5.attn_output.weight") == DType::Q5_K);
  CHECK(type_of(t, l, "blk.5.ffn_gate.weight") == DType::Q3_K);
  auto s3 = plan_quant_mix(quant_mix("Q3_K_S"), info, t, cur, false);
  CHECK(type_of(t, s3, "blk.0.attn_v.weight") == DType::Q3_K);
  CHECK(type_of(t, s3, "blk.0.ffn_down.weight") == DType::Q3_K);
  CHECK(type_of(t, s3, "output.weight") == DType::Q6_K);
  auto s5 = plan_quant_mix(quant_mix("Q5_K_S"), info, t, cur, false);
  CHECK(type_of(t, s5, "blk.0.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, s5, "output.weight") == DType::Q6_K);
  auto s2 = plan_quant_mix(quant_mix("Q2_K_S"), info, t, cur, false);
  CHECK(type_of(t, s2, "blk.0.attn_v.weight") == DType::Q2_K);  // GQA 1 < 4
  CHECK(type_of(t, s2, "blk.0.ffn_down.weight") == DType::Q4_K);  // layer 0 < 8/8
  CHECK(type_of(t, s2, "blk.1.ffn_down.weight") == DType::Q2_K);
  auto q2 = plan_quant_mix(quant_mix("Q2_K"), info, t, cur, false);
  CHECK(type_of(t, q2, "blk.1.attn_v.weight") == DType::Q3_K);  // GQA 1 < 4
  for (const char* m : {"F16", "BF16"}) {
    auto f = plan_quant_mix(quant_mix(m), info, t, cur, false);
    const DType want = quant_mix(m).base;
    CHECK(type_of(t, f, "output.weight") == want);  // no mix rules for float types
    CHECK(type_of(t, f, "token_embd.weight") == want);
    CHECK(type_of(t, f, "blk.0.attn_v.weight") == want);
    CHECK(type_of(t, f, "blk.0.ffn_norm.weight") == DType::F32);
  }
}

TEST_CASE("rows that do not fit K-quant blocks fall back") {
  const std::vector<MixTensor> t = {{"blk.0.attn_q.weight", 2, 96}, {"blk.0.ffn_up.weight", 2, 80}, {"output.weight", 2, 96}};
  MixModelInfo info;
  info.n_layer = 1;
  std::vector<DType> cur(t.size(), DType::F32);
  const auto q4 = plan_quant_mix(quant_mix("Q4_K_M"), info, t, cur, false);
  CHECK(q4[0] == DType::Q5_0);
  CHECK(q4[1] == DType::F16);  // 80 is not a multiple of 32 either
  CHECK(q4[2] == DType::Q8_0);
  const auto f = plan_quant_mix(quant_mix("F32"), info, t, std::vector<DType>(3, DType::F16), false);
  CHECK(f[0] == DType::F32);
}

TEST_CASE("our mix types equal llama.cpp's on the shared tiny-llama-256 files") {
  const std::string dir = std::string(EDGELLM_SHARED_DATA) + "/models/";
  EDGELLM_SKIP_WITHOUT(dir + "tiny-llama-256-f32.gguf");
  const GgufFile src = GgufFile::open(dir + "tiny-llama-256-f32.gguf");
  MixModelInfo info;
  info.n_layer = static_cast<int>(src.get_int("llama.block_count"));
  info.n_head = static_cast<int>(src.get_int("llama.attention.head_count"));
  info.n_head_kv = static_cast<int>(src.get_int_or("llama.attention.head_count_kv", info.n_head));
  info.has_output = src.find_tensor("output.weight") != nullptr;
  std::vector<std::string> names;
  for (const auto& ti : src.tensors()) names.push_back(ti.name);
  std::vector<MixTensor> tensors;
  std::vector<DType> cur;
  for (size_t i : llama_tensor_order(names)) {
    const auto& ti = src.tensors()[i];
    tensors.push_back({ti.name, static_cast<int>(ti.n_dims), ti.ne[0]});
    cur.push_back(ti.type);
  }
  int files = 0;
  // The K-quant mixes (build 4748) without a matrix; the shared iq/ files (v0.5.0) with one.
  auto check_file = [&](const std::string& path, const char* name, bool imatrix) {
    if (!path_exists(path)) return;
    ++files;
    const GgufFile ref = GgufFile::open(path);
    const QuantMix& mix = quant_mix(name);
    CHECK(ref.get_int("general.file_type") == mix.file_type);
    MixModelInfo mi = info;
    mi.has_imatrix = imatrix;
    const auto types = plan_quant_mix(mix, mi, tensors, cur, false);
    REQUIRE(ref.tensors().size() == tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      CHECK(ref.tensors()[i].name == tensors[i].name);  // llama-quantize's order
      const GgufTensorInfo* r = ref.find_tensor(tensors[i].name);
      REQUIRE(r != nullptr);
      INFO(name, " ", tensors[i].name);
      CHECK(dtype_name(types[i]) == std::string(dtype_name(r->type)));
    }
  };
  for (const char* name : {"F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"})
    check_file(dir + "tiny-llama-256-" + name + ".gguf", name, false);
  CHECK(files == 11);
  for (const char* name : {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_S", "IQ3_M", "IQ4_NL",
                           "IQ4_XS", "TQ1_0", "TQ2_0", "Q2_K_S", "Q4_K_M"})
    check_file(std::string(EDGELLM_SHARED_DATA) + "/iq/models/tiny-llama-256-" + name + "-imat.gguf", name, true);
  CHECK((files == 11 || files == 26));  // the iq/ folder is newer: it may be absent
}

TEST_CASE("i-quant mixes on a 32-layer GQA-8 model (llama.cpp v0.5.0's llama_tensor_get_type)") {
  const auto t = llama_tensors(32, 4096, 14336, false);
  MixModelInfo info = dense_info(32, 32, 4);  // gqa 8
  info.has_imatrix = true;
  const std::vector<DType> cur(t.size(), DType::F16);
  auto plan = [&](const char* m) { return plan_quant_mix(quant_mix(m), info, t, cur, false); };
  const auto xxs = plan("IQ2_XXS");
  CHECK(type_of(t, xxs, "output.weight") == DType::Q5_K);
  CHECK(type_of(t, xxs, "token_embd.weight") == DType::Q2_K);
  CHECK(type_of(t, xxs, "blk.9.attn_v.weight") == DType::Q4_K);      // gqa >= 4
  CHECK(type_of(t, xxs, "blk.3.ffn_down.weight") == DType::Q2_K);    // first eighth
  CHECK(type_of(t, xxs, "blk.4.ffn_down.weight") == DType::IQ2_XXS);
  CHECK(type_of(t, xxs, "blk.4.attn_output.weight") == DType::IQ2_XXS);
  const auto m2 = plan("IQ2_M");
  CHECK(type_of(t, m2, "blk.9.attn_q.weight") == DType::IQ2_S);
  CHECK(type_of(t, m2, "blk.0.ffn_down.weight") == DType::IQ3_S);
  CHECK(type_of(t, m2, "blk.9.attn_output.weight") == DType::IQ3_S);
  CHECK(type_of(t, m2, "token_embd.weight") == DType::IQ3_S);
  const auto s1 = plan("IQ1_S");
  CHECK(type_of(t, s1, "blk.9.attn_output.weight") == DType::IQ2_XXS);
  CHECK(type_of(t, s1, "blk.9.ffn_up.weight") == DType::IQ1_S);
  const auto x3 = plan("IQ3_XS");
  CHECK(type_of(t, x3, "blk.9.attn_q.weight") == DType::IQ3_XXS);
  CHECK(type_of(t, x3, "blk.9.attn_v.weight") == DType::Q4_K);
  CHECK(type_of(t, x3, "blk.3.ffn_gate.weight") == DType::IQ3_S);    // outside [n/8, 7n/8)
  CHECK(type_of(t, x3, "blk.4.ffn_up.weight") == DType::IQ3_XXS);
  CHECK(type_of(t, x3, "blk.28.ffn_up.weight") == DType::IQ3_S);
  CHECK(type_of(t, x3, "output.weight") == DType::Q6_K);
  const auto m3 = plan("IQ3_M");
  CHECK(type_of(t, m3, "blk.9.attn_output.weight") == DType::Q4_K);
  CHECK(type_of(t, m3, "blk.3.ffn_down.weight") == DType::Q4_K);
  CHECK(type_of(t, m3, "blk.4.ffn_down.weight") == DType::IQ3_S);
  CHECK(type_of(t, plan("IQ4_XS"), "blk.9.attn_v.weight") == DType::Q5_K);
  CHECK(type_of(t, plan("TQ1_0"), "token_embd.weight") == DType::Q4_K);
  // Rules that depend on the matrix: IQ3_XXS attn_v / ffn_down, IQ4 ffn_down, Q4_0 ffn_down.
  MixModelInfo gqa1 = info;
  gqa1.n_head_kv = 32;
  auto with = [&](const char* m, bool imatrix) {
    gqa1.has_imatrix = imatrix;
    return plan_quant_mix(quant_mix(m), gqa1, t, cur, false);
  };
  CHECK(type_of(t, with("IQ3_XXS", true), "blk.9.attn_v.weight") == DType::IQ3_XXS);
  CHECK(type_of(t, with("IQ3_XXS", false), "blk.9.attn_v.weight") == DType::IQ3_S);
  CHECK(type_of(t, with("IQ3_XXS", false), "blk.3.ffn_down.weight") == DType::Q4_K);
  CHECK(type_of(t, with("IQ3_XXS", false), "blk.9.ffn_down.weight") == DType::Q3_K);
  CHECK(type_of(t, with("IQ3_XXS", true), "blk.9.ffn_down.weight") == DType::IQ3_XXS);
  CHECK(type_of(t, with("IQ4_NL", false), "blk.3.ffn_down.weight") == DType::Q5_K);
  CHECK(type_of(t, with("IQ4_NL", true), "blk.3.ffn_down.weight") == DType::IQ4_NL);
  CHECK(type_of(t, with("Q4_0", true), "blk.3.ffn_down.weight") == DType::Q4_1);
  CHECK(type_of(t, with("Q5_0", true), "blk.3.ffn_down.weight") == DType::Q5_1);
  CHECK(type_of(t, with("Q4_0", false), "blk.3.ffn_down.weight") == DType::Q4_0);
  CHECK(type_of(t, with("IQ2_S", true), "blk.9.attn_v.weight") == DType::IQ3_S);  // gqa 1
  CHECK(type_of(t, with("IQ2_XS", true), "blk.9.attn_v.weight") == DType::Q2_K);
}

TEST_CASE("i-quant rows that do not fit 256-blocks fall back, and which types need a matrix") {
  const std::vector<MixTensor> t = {{"blk.0.attn_q.weight", 2, 96}, {"blk.0.ffn_up.weight", 2, 80}};
  MixModelInfo info;
  info.n_layer = 1;
  info.has_imatrix = true;
  const std::vector<DType> cur(t.size(), DType::F32);
  auto plan = [&](const char* m) { return plan_quant_mix(quant_mix(m), info, t, cur, false); };
  CHECK(plan("IQ2_XXS")[0] == DType::IQ4_NL);
  CHECK(plan("IQ2_XXS")[1] == DType::F16);  // 80 does not fit IQ4_NL's 32 either
  CHECK(plan("TQ1_0")[0] == DType::Q4_0);
  CHECK(plan("IQ4_NL")[0] == DType::IQ4_NL);
  CHECK(plan("IQ4_NL")[1] == DType::F16);
  CHECK(plan("Q2_K")[0] == DType::Q4_0);
  const QuantMix& q2ks = quant_mix("Q2_K_S");
  CHECK(mix_requires_imatrix(q2ks, {"blk.0.attn_q.weight"}, DType::Q2_K));
  CHECK_FALSE(mix_requires_imatrix(quant_mix("Q2_K"), {"blk.0.attn_q.weight"}, DType::Q2_K));
  CHECK_FALSE(mix_requires_imatrix(q2ks, {"token_embd.weight"}, DType::Q2_K));
  CHECK_FALSE(mix_requires_imatrix(q2ks, {"output.weight"}, DType::Q2_K));
  CHECK(mix_requires_imatrix(quant_mix("IQ3_XS"), {"blk.0.ffn_up.weight"}, DType::IQ3_XXS));
  CHECK_FALSE(mix_requires_imatrix(quant_mix("IQ3_XS"), {"blk.0.ffn_up.weight"}, DType::IQ3_S));
  CHECK(mix_requires_imatrix(quant_mix("IQ1_M"), {"blk.0.attn_q.weight"}, DType::IQ1_M));
  CHECK_FALSE(mix_requires_imatrix(quant_mix("TQ1_0"), {"blk.0.attn_q.weight"}, DType::TQ1_0));
  CHECK(quant_mix("IQ2_S").base == DType::IQ2_XS);  // llama.cpp's default types of the mixes
  CHECK(quant_mix("IQ2_M").base == DType::IQ2_S);
  CHECK(quant_mix("IQ3_M").base == DType::IQ3_S);
  CHECK(quant_mix("iq4_xs").file_type == 30);
  CHECK(quant_mix("TQ2_0").file_type == 37);
}
