// The tensors of a model, from its architecture's table (model/arch.hpp) and its shape
// (LlamaConfig): the one list the loader, the residency and memory plans and the synthetic
// writer walk; and each tensor's quantization-mix category (quant/mix.hpp), from its row.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/model/arch.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/quant/mix.hpp"

namespace edgellm {

// What a tensor outside the layers is.
enum class GlobalRole { TokenEmbd, OutputNorm, Output };

struct ModelTensor {
  std::string name;
  int64_t n_in = 0;          // row length (ne[0])
  int64_t n_out = 1;         // rows (ne[1]); 1: a vector
  TensorRole role = TensorRole::Matrix;
  Presence presence = Presence::Required;
  int layer = -1;            // -1: outside the layers
  const LayerTensor* row = nullptr;  // the table's row (layer tensors)
  GlobalRole global = GlobalRole::TokenEmbd;  // (layer -1)
  int unit = kUnitNone;      // MatmulUnit of a layer matrix
  float synthetic_stddev = 0;  // the synthetic writer's N(0, stddev) (0: all ones)

  bool is_vector() const { return n_out == 1 && role != TensorRole::Matrix; }
};

// "blk.<l>.<name>"
inline std::string layer_tensor_name(int layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

// token_embd, output_norm, output (unless tied), then each layer's rows in table order: the file
// order of llama.cpp's converter and of our synthetic files. Optional rows only with
// `with_optional` (a file may or may not carry them); rope_freqs is never listed.
inline std::vector<ModelTensor> model_tensors(const LlamaConfig& c, bool with_optional = false) {
  const ArchSpec& a = c.arch_entry();
  const float embd_stddev = 1.0f / std::sqrt(float(c.n_embd));
  std::vector<ModelTensor> v;
  auto global = [&](const char* name, GlobalRole g, TensorRole role, int64_t n_out, float stddev) {
    ModelTensor t;
    t.name = name;
    t.n_in = c.n_embd;
    t.n_out = n_out;
    t.role = role;
    t.global = g;
    t.synthetic_stddev = stddev;
    v.push_back(std::move(t));
  };
  global(a.tensors.token_embd, GlobalRole::TokenEmbd, TensorRole::Matrix, c.n_vocab, 1.0f);
  global(a.tensors.output_norm, GlobalRole::OutputNorm, TensorRole::Norm, 1, 0.0f);
  if (!c.tied_embeddings) global(a.tensors.output, GlobalRole::Output, TensorRole::Matrix, c.n_vocab, embd_stddev);
  for (int l = 0; l < c.n_layer; ++l)
    for (const LayerTensor& r : a.layer) {
      if (r.presence == Presence::Absent || (r.presence == Presence::Optional && !with_optional)) continue;
      ModelTensor t;
      t.name = layer_tensor_name(l, r.name);
      t.n_in = c.dim(r.n_in);
      t.n_out = c.dim(r.n_out);
      t.role = r.role;
      t.presence = r.presence;
      t.layer = l;
      t.row = &r;
      t.unit = r.unit;
      t.synthetic_stddev = r.role == TensorRole::Matrix ? 1.0f / std::sqrt(float(c.dim(r.fan)))
                           : r.role == TensorRole::Bias ? 0.25f
                                                        : 0.0f;
      v.push_back(std::move(t));
    }
  return v;
}

// The mix category of a layer row: from the field it fills, whatever the file calls the tensor
// (the matrix the forward pass reads as its V projection gets llama-quantize's attn_v rules);
// vectors are Other. nullopt: a row with no field (kExtraTensor), which goes by its name.
inline std::optional<MixCategory> layer_mix_category(const LayerTensor& r) {
  using S = LlamaLayerWeights;
  using C = MixCategory;
  if (r.field.vector) return C::Other;
  static const std::pair<MatmulWeight S::*, C> by_field[] = {
      {&S::wq, C::AttnQ},         {&S::wk, C::AttnK},     {&S::wv, C::AttnV},         {&S::wo, C::AttnOutput},
      {&S::w_gate, C::FfnGate}, {&S::w_up, C::FfnUp}, {&S::w_down, C::FfnDown}};
  for (const auto& f : by_field)
    if (r.field.matrix == f.first) return f.second;
  return std::nullopt;
}

// The mix category of tensor `name` in a file of family `a` (nullptr: a family edgellm does not
// run): the global tensors by their role, "blk.<N>.<row>" by its row; nullopt for a tensor the
// table does not describe (the mix then classifies it by name, as llama-quantize does).
inline std::optional<MixCategory> arch_mix_category(const ArchSpec* a, const std::string& name) {
  if (!a) return std::nullopt;
  if (name == a->tensors.output) return MixCategory::Output;
  if (name == a->tensors.token_embd) return MixCategory::TokenEmbd;
  if (name == a->tensors.output_norm) return MixCategory::Other;
  if (name.compare(0, 4, "blk.") != 0) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || name.find_first_not_of("0123456789", 4) != dot) return std::nullopt;
  for (const LayerTensor& r : a->layer)
    if (name.compare(dot + 1, std::string::npos, r.name) == 0) return layer_mix_category(r);
  return std::nullopt;
}

// What the mix's rules need to know about a model of this shape (no experts, no imatrix).
inline MixModelInfo mix_model_info(const LlamaConfig& c) {
  MixModelInfo info;
  info.arch = c.arch;
  info.n_layer = c.n_layer;
  info.n_head = c.n_head;
  info.n_head_kv = c.n_head_kv;
  info.has_output = !c.tied_embeddings;
  return info;
}

// The planner's view of a tensor of a file of family `a` (quant/mix.hpp plan_quant_mix).
inline MixTensor mix_tensor(const ArchSpec* a, const std::string& name, int n_dims, int64_t ne0) {
  return MixTensor{name, n_dims, ne0, arch_mix_category(a, name)};
}

}  // namespace edgellm
