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
  for (const char* name : {"F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    const std::string path = dir + "tiny-llama-256-" + name + ".gguf";
    if (!path_exists(path)) continue;
    ++files;
    const GgufFile ref = GgufFile::open(path);
    const QuantMix& mix = quant_mix(name);
    CHECK(ref.get_int("general.file_type") == mix.file_type);
    const auto types = plan_quant_mix(mix, info, tensors, cur, false);
    REQUIRE(ref.tensors().size() == tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      CHECK(ref.tensors()[i].name == tensors[i].name);  // llama-quantize's order
      const GgufTensorInfo* r = ref.find_tensor(tensors[i].name);
      REQUIRE(r != nullptr);
      INFO(name, " ", tensors[i].name);
      CHECK(dtype_name(types[i]) == std::string(dtype_name(r->type)));
    }
  }
  CHECK(files > 0);
}
