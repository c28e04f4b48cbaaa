// LlamaLayerWeights: the tensors of one layer as the forward pass reads them. The rows of the
// architecture table (model/arch.hpp) point at these fields (LayerField): a tensor the forward
// pass reads is a field here and a row there; the loader, the stream's matrix list and the
// imatrix observer reach it through the row (model/llama_weights.hpp for_each_layer_tensor).
#pragma once
#include <string>
#include <vector>

#include "edgellm/kernels/matmul.hpp"

namespace edgellm {

struct LayerTensor;

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  MatmulWeight wq;               // [n_embd -> n_head * head_dim]
  MatmulWeight wk;               // [n_embd -> n_head_kv * head_dim]
  MatmulWeight wv;               // [n_embd -> n_head_kv * head_dim]
  std::vector<float> bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim] biases; empty when the file has none
  std::vector<float> q_norm;     // [head_dim] per-head RMSNorm of Q (qwen3); empty when absent
  std::vector<float> k_norm;     // [head_dim] per-head RMSNorm of K
  MatmulWeight wo;               // [n_head * head_dim -> n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  MatmulWeight w_gate;           // [n_embd -> n_ff]
  MatmulWeight w_up;             // [n_embd -> n_ff]
  MatmulWeight w_down;           // [n_ff -> n_embd]
  // Tensors of the architecture's table the forward pass does not read (rows with no field):
  // loaded, planned and streamed like the others.
  struct Extra {
    std::string name;
    const LayerTensor* row = nullptr;  // its row of the table
    MatmulWeight matrix;        // a matrix (role Matrix)
    std::vector<float> vector;  // or a vector
  };
  std::vector<Extra> extra;
};

}  // namespace edgellm
