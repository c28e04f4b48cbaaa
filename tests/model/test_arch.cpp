// The architecture table (model/arch.hpp) drives everything that walks a model's tensors: a toy
// architecture added with register_arch() (renamed tensors; an extra vector and an extra matrix per
// layer) is written by the synthetic writer, listed by the memory plan, loaded, planned and
// streamed, with no change to any of them; the quantization mix keys on a row's field, not its name.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "edgellm/model/arch.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/model/memory_plan.hpp"
#include "edgellm/model/residency.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/quant/mix.hpp"
#include "edgellm/tools/synthetic.hpp"
#include "model_fixtures.hpp"

using namespace edgellm;

namespace {

constexpr int kToyCtx = 32;

// llama's layer with every tensor renamed ("attention.wq.weight" ...): the same model under other names.
const ArchSpec& toy_renamed() {
  static const ArchSpec& a = [] () -> const ArchSpec& {
    ArchSpec s{"toy-renamed", RopeForm::Normal, llama_layer_tensors(Presence::Absent, Presence::Absent)};
    static const std::vector<std::string> names = {"attention_norm.weight", "attention.wq.weight", "attention.wk.weight",
                                                   "attention.wv.weight",   "attention.wo.weight", "ffn_norm2.weight",
                                                   "feed_forward.w1.weight", "feed_forward.w3.weight", "feed_forward.w2.weight"};
    REQUIRE(s.layer.size() == names.size());
    for (size_t i = 0; i < names.size(); ++i) s.layer[i].name = names[i].c_str();
    return register_arch(s);
  }();
  return a;
}

// llama plus, per layer, a vector and a matrix the forward pass does not read: the matrix is
// multiplied in the gate/up unit, so it is planned and streamed with that unit.
const ArchSpec& toy_extra() {
  static const ArchSpec& a = [] () -> const ArchSpec& {
    ArchSpec s{"toy-extra", RopeForm::Normal, llama_layer_tensors(Presence::Absent, Presence::Absent)};
    s.layer.push_back({"layer_scale.weight", kExtraTensor, TensorRole::Norm, Dim::Embd});
    s.layer.push_back({"ffn_extra.weight", kExtraTensor, TensorRole::Matrix, Dim::Embd, Dim::FF, Presence::Required,
                       kUnitGateUp});
    return register_arch(s);
  }();
  return a;
}

SyntheticSpec toy_spec(const std::string& arch) {
  SyntheticSpec s = synthetic_preset("tiny");
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layer = 3;
  s.arch = arch;
  return s;
}

// Logits of a 5-token prompt and 2 decode steps.
std::vector<float> toy_run(const LlamaModel& m) { return edgellm_test::prompt_and_steps_logits(m, {1, 17, 300, 4, 99, 250, 7}, 5, kToyCtx); }

LoadOptions toy_budget(uint64_t bytes) { return edgellm_test::budget_options(bytes, kToyCtx, 1); }

// The mix's types for `ts` (file order) with each tensor's category from `arch`'s table, or
// (arch nullptr) from its name alone.
std::vector<DType> toy_mix_plan(const QuantMix& mix, const LlamaConfig& c, const std::vector<GgufTensorInfo>& ts,
                                const ArchSpec* arch) {
  std::vector<MixTensor> mt;
  for (const GgufTensorInfo& t : ts) mt.push_back(mix_tensor(arch, t.name, int(t.n_dims), t.ne[0]));
  return plan_quant_mix(mix, mix_model_info(c), mt, std::vector<DType>(ts.size(), DType::F32), false);
}

DType toy_type_of(const std::vector<GgufTensorInfo>& ts, const std::vector<DType>& types, const std::string& name) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (ts[i].name == name) return types[i];
  FAIL("no tensor " << name);
  return DType::F32;
}

}  // namespace

TEST_CASE("architecture table: a toy architecture with renamed tensors is written, loaded and run as llama") {
  const ArchSpec& toy = toy_renamed();
  CHECK(&arch_spec("toy-renamed", "test") == &toy);
  const auto llama_bytes = build_synthetic_gguf(toy_spec("llama"), DType::Q8_0);
  const auto toy_bytes = build_synthetic_gguf(toy_spec("toy-renamed"), DType::Q8_0);
  const GgufFile f = GgufFile::from_bytes(toy_bytes, "toy.gguf");
  CHECK(f.find_tensor("blk.2.feed_forward.w2.weight") != nullptr);
  CHECK(f.find_tensor("blk.0.ffn_down.weight") == nullptr);
  CHECK(f.get_string_or("general.architecture", "") == "toy-renamed");
  const LlamaModel m(GgufFile::from_bytes(toy_bytes, "toy.gguf"));
  CHECK(m.config().spec == &toy);
  const LlamaModel ref(GgufFile::from_bytes(llama_bytes, "llama.gguf"));
  CHECK(toy_run(m) == toy_run(ref));  // same weights (the writer's seeds follow the table's order), other names
  // The memory plan lists the toy's names.
  const std::vector<GgufTensorInfo> list = llama_tensor_list(m.config());
  CHECK(list.size() == f.tensors().size());
  bool found = false;
  for (const GgufTensorInfo& t : list) found |= t.name == "blk.1.attention.wq.weight";
  CHECK(found);
  // The observer (edgellm-imatrix) names the toy's matrices, one matmul unit at a time.
  LlamaContext ctx;
  std::vector<std::string> seen;
  ctx.set_matmul_observer([&](const std::string& w, const float*, int, int) { seen.push_back(w); });
  PagedKvCache kv(m.kv_params(kToyCtx));
  Batch b;
  b.add(1, 0, kv.create_sequence(), true);
  m.forward(ctx, kv, b);
  REQUIRE(seen.size() == size_t(3 * 7 + 1));
  CHECK(seen[0] == "blk.0.attention.wq.weight");
  CHECK(seen[2] == "blk.0.attention.wv.weight");
  CHECK(seen[6] == "blk.0.feed_forward.w2.weight");
  CHECK(seen.back() == "output.weight");
}

TEST_CASE("architecture table: a toy architecture's extra tensors are written, listed, loaded, planned and streamed") {
  const ArchSpec& toy = toy_extra();
  const SyntheticSpec spec = toy_spec("toy-extra");
  const auto bytes = build_synthetic_gguf(spec, DType::Q8_0);
  const GgufFile f = GgufFile::from_bytes(bytes, "toy.gguf");
  REQUIRE(f.find_tensor("blk.1.ffn_extra.weight") != nullptr);
  CHECK(f.find_tensor("blk.1.ffn_extra.weight")->ne[1] == spec.n_ff);
  CHECK(f.find_tensor("blk.2.layer_scale.weight") != nullptr);

  const LlamaModel m(GgufFile::from_bytes(bytes, "toy.gguf"), LoadOptions::all_resident());
  CHECK(m.config().spec == &toy);
  const LlamaLayerWeights& L = m.weights().layers[1];
  REQUIRE(L.extra.size() == 2);
  CHECK(L.extra[0].name == "blk.1.layer_scale.weight");
  CHECK(L.extra[0].vector.size() == size_t(spec.n_embd));
  CHECK(L.extra[1].name == "blk.1.ffn_extra.weight");
  CHECK(L.extra[1].matrix.n_out == spec.n_ff);
  // The extra matrix sits in its layer's gate/up unit, after gate and up.
  const auto mats = const_cast<LlamaWeights&>(m.weights()).matrices(m.config().tied_embeddings);
  REQUIRE(mats.size() == size_t(spec.n_layer) * 8 + 1);
  CHECK(mats[6].name == "blk.0.ffn_extra.weight");
  CHECK(mats[6].unit_key == layer_unit(0, kUnitGateUp));
  CHECK(mats[7].name == "blk.0.ffn_down.weight");
  // The memory plan counts it: its bytes are in the matrices, and in the ring's largest unit.
  const LlamaConfig& c = m.config();
  const QuantMix q8 = quant_mix("Q8_0");
  LoadOptions po = toy_budget(0);
  po.mem_budget = uint64_t(1) << 50;  // fits: the plan still names its minimum
  const ResidencyPlan with = project_residency(c, q8, po);
  LlamaConfig plain = c;
  plain.spec = &arch_spec("llama", "test");
  plain.arch = "llama";
  const ResidencyPlan without = project_residency(plain, q8, po);
  const uint64_t extra = uint64_t(dtype_row_bytes(DType::Q8_0, spec.n_embd)) * uint64_t(spec.n_ff);
  CHECK(with.weights == without.weights + uint64_t(spec.n_layer) * extra);
  CHECK(with.minimum == without.minimum + uint64_t(kStreamSlots) * extra);  // gate/up/extra is the largest unit
  CHECK(llama_tensor_list(c).size() == f.tensors().size());
  // Resident and streamed give the same logits; the stream reads the extra matrices with their unit.
  const std::vector<float> want = toy_run(m);
  uint64_t lo = 1, hi = uint64_t(64) << 20;
  while (hi - lo > (uint64_t(64) << 10)) {
    const uint64_t mid = lo + (hi - lo) / 2;
    bool ok = true;
    try {
      LlamaModel t(GgufFile::from_bytes(bytes, "toy.gguf"), toy_budget(mid));
    } catch (const Error&) {
      ok = false;
    }
    (ok ? hi : lo) = ok ? mid : mid + 1;
  }
  const LlamaModel streamed(GgufFile::from_bytes(bytes, "toy.gguf"), toy_budget(hi));
  const ResidencyPlan& p = streamed.residency();
  REQUIRE(p.streaming);
  CHECK(p.weights == m.residency().weights);
  CHECK(toy_run(streamed) == want);
  bool extra_streamed = false;
  for (const StreamUnit& u : streamed.weight_stream()->units())
    for (const StreamPiece& pc : u.pieces)
      if (pc.w == &streamed.weights().layers[0].extra[1].matrix) {
        extra_streamed = true;
        CHECK(u.key == layer_unit(0, kUnitGateUp));
      }
  CHECK(extra_streamed);  // at the minimum budget the largest unit streams
}

TEST_CASE("architecture table: registering a taken name or a matrix without a unit is an Error") {
  CHECK_THROWS_AS(register_arch(ArchSpec{"llama", RopeForm::Normal, llama_layer_tensors(Presence::Absent, Presence::Absent)}),
                  Error);
  ArchSpec bad{"toy-bad", RopeForm::Normal, llama_layer_tensors(Presence::Absent, Presence::Absent)};
  bad.layer.push_back({"w.weight", kExtraTensor, TensorRole::Matrix, Dim::Embd, Dim::Embd});
  CHECK_THROWS_AS(register_arch(bad), Error);
  ArchSpec wrong{"toy-wrong-field", RopeForm::Normal, llama_layer_tensors(Presence::Absent, Presence::Absent)};
  REQUIRE(wrong.layer[1].field.matrix == &LlamaLayerWeights::wq);
  wrong.layer[1].field = &LlamaLayerWeights::attn_norm;  // a matrix row filling a vector field
  CHECK_THROWS_WITH_AS(register_arch(wrong), doctest::Contains("matrix field"), Error);
  try {
    arch_spec("toy-unknown", "file x.gguf");
    FAIL("an unknown architecture was found");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("'toy-unknown'") != std::string::npos);
  }
}

TEST_CASE("architecture table: the quantization mix takes a tensor's category from its row, so renamed tensors keep their rules") {
  const ArchSpec& toy = toy_renamed();
  const QuantMix& q4km = quant_mix("Q4_K_M");
  const LlamaConfig tc = synthetic_config(toy_spec("toy-renamed"));
  const LlamaConfig lc = synthetic_config(toy_spec("llama"));
  const std::vector<GgufTensorInfo> toy_list = llama_tensor_list(tc);
  // 3 layers: use_more_bits picks layer 2, whose V and down projections Q4_K_M makes q6_K.
  const std::vector<DType> by_row = toy_mix_plan(q4km, tc, toy_list, &toy);
  CHECK(toy_type_of(toy_list, by_row, "blk.2.attention.wv.weight") == DType::Q6_K);
  CHECK(toy_type_of(toy_list, by_row, "blk.0.attention.wv.weight") == DType::Q4_K);
  CHECK(toy_type_of(toy_list, by_row, "blk.2.feed_forward.w2.weight") == DType::Q6_K);
  CHECK(toy_type_of(toy_list, by_row, "output.weight") == DType::Q6_K);
  // By the names alone ("attention.wv" is no attn_v to llama-quantize) the bumps are lost.
  const std::vector<DType> by_name = toy_mix_plan(q4km, tc, toy_list, nullptr);
  CHECK(toy_type_of(toy_list, by_name, "blk.2.attention.wv.weight") == DType::Q4_K);
  CHECK(toy_type_of(toy_list, by_name, "blk.2.feed_forward.w2.weight") == DType::Q4_K);
  // The memory plan and the synthetic writer see the renamed model as llama, for every mix.
  for (const QuantMix& mix : quant_mixes()) {
    CAPTURE(mix.name);
    CHECK(mix_tensor_bytes(toy_list, tc, mix) == mix_tensor_bytes(llama_tensor_list(lc), lc, mix));
    CHECK(synthetic_mix_types(toy_spec("toy-renamed"), mix) == synthetic_mix_types(toy_spec("llama"), mix));
  }
  // A tensor the table does not describe goes by its name.
  CHECK(arch_mix_category(&toy, "blk.1.attention.wv.weight") == MixCategory::AttnV);
  CHECK_FALSE(arch_mix_category(&toy, "blk.1.attn_v.weight").has_value());
  CHECK_FALSE(arch_mix_category(&toy, "blk.x.attention.wv.weight").has_value());
  CHECK_FALSE(arch_mix_category(nullptr, "blk.1.attn_v.weight").has_value());
  CHECK_FALSE(arch_mix_category(&toy_extra(), "blk.0.ffn_extra.weight").has_value());  // no field: its name
  CHECK(mix_category(mix_tensor(&toy, "blk.1.attn_v.weight", 2, 64)) == MixCategory::AttnV);
}

TEST_CASE("architecture table: every tensor of the built-in families has the category llama-quantize gives its name") {
  for (const char* name : {"llama", "qwen2", "qwen3"}) {
    CAPTURE(name);
    const ArchSpec& a = arch_spec(name, "test");
    for (const LayerTensor& r : a.layer) {
      const std::string t = layer_tensor_name(11, r.name);
      CAPTURE(t);
      const std::optional<MixCategory> c = arch_mix_category(&a, t);
      REQUIRE(c.has_value());
      CHECK(*c == mix_category(t));
    }
    for (const char* g : {a.tensors.token_embd, a.tensors.output_norm, a.tensors.output}) {
      CAPTURE(g);
      REQUIRE(arch_mix_category(&a, g).has_value());
      CHECK(*arch_mix_category(&a, g) == mix_category(g));
    }
    // So every mix plans a model of the family as by the names (tied embeddings too).
    for (bool tied : {false, true}) {
      SyntheticSpec s = toy_spec(name);
      s.tied = tied;
      const LlamaConfig c = synthetic_config(s);
      const std::vector<GgufTensorInfo> list = llama_tensor_list(c);
      for (const QuantMix& mix : quant_mixes()) {
        CAPTURE(mix.name);
        CHECK(toy_mix_plan(mix, c, list, &a) == toy_mix_plan(mix, c, list, nullptr));
      }
    }
  }
}
