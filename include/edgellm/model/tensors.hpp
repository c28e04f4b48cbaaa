// The tensors of a model, from its architecture's table (model/arch.hpp) and its shape
// (LlamaConfig): the one list the loader, the residency and memory plans and the synthetic
// writer walk.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/model/arch.hpp"
#include "edgellm/model/llama_config.hpp"

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

}  // namespace edgellm
