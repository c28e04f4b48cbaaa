// LlamaWeights: typed, zero-copy views of a LLaMA model's tensors in the mapped GGUF file, each
// checked for name, type and shape at load time (Error says expected vs actual). Norm vectors are
// kept as F32 copies (tiny); everything else is read in place, whatever its type.
#pragma once
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/tensor.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/quant/ref.hpp"

namespace edgellm {

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [n_embd]
  MatmulWeight wq;               // [n_embd -> n_head * head_dim]
  MatmulWeight wk;               // [n_embd -> n_head_kv * head_dim]
  MatmulWeight wv;               // [n_embd -> n_head_kv * head_dim]
  MatmulWeight wo;               // [n_head * head_dim -> n_embd]
  std::vector<float> ffn_norm;   // [n_embd]
  MatmulWeight w_gate;           // [n_embd -> n_ff]
  MatmulWeight w_up;             // [n_embd -> n_ff]
  MatmulWeight w_down;           // [n_ff -> n_embd]
};

struct LlamaWeights {
  TensorView token_embd;           // [n_embd, n_vocab] (row t = embedding of token t)
  std::vector<float> output_norm;  // [n_embd]
  MatmulWeight output;             // [n_embd -> n_vocab]; token_embd when embeddings are tied
  std::vector<float> rope_freqs;   // [n_rot / 2] frequency divisors (Llama 3.1+), empty if absent
  std::vector<LlamaLayerWeights> layers;

  static LlamaWeights from_gguf(const GgufFile& f, const LlamaConfig& c, const KernelTable& kt) {
    LlamaWeights w;
    const GgufTensorInfo& emb = expect(f, "token_embd.weight", c.n_embd, c.n_vocab);
    EDGELLM_CHECK(can_dequantize(emb.type), "file ", f.path(), ": tensor 'token_embd.weight' has type ",
                  dtype_name(emb.type), ", which cannot be dequantized");
    w.token_embd = emb.view();
    w.output_norm = vector_f32(f, "output_norm.weight", c.n_embd);
    w.output = c.tied_embeddings ? matmul_weight(f, kt, "token_embd.weight", c.n_embd, c.n_vocab)
                                 : matmul_weight(f, kt, "output.weight", c.n_embd, c.n_vocab);
    if (c.has_rope_freqs) w.rope_freqs = vector_f32(f, "rope_freqs.weight", c.n_rot / 2);
    w.layers.resize(static_cast<size_t>(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
      L.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd);
      L.wq = matmul_weight(f, kt, p + "attn_q.weight", c.n_embd, c.q_dim());
      L.wk = matmul_weight(f, kt, p + "attn_k.weight", c.n_embd, c.kv_dim());
      L.wv = matmul_weight(f, kt, p + "attn_v.weight", c.n_embd, c.kv_dim());
      L.wo = matmul_weight(f, kt, p + "attn_output.weight", c.q_dim(), c.n_embd);
      L.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.n_embd);
      L.w_gate = matmul_weight(f, kt, p + "ffn_gate.weight", c.n_embd, c.n_ff);
      L.w_up = matmul_weight(f, kt, p + "ffn_up.weight", c.n_embd, c.n_ff);
      L.w_down = matmul_weight(f, kt, p + "ffn_down.weight", c.n_ff, c.n_embd);
    }
    return w;
  }

  // Embedding row of token `id` as floats (dequantized when the table is quantized).
  void embed(int32_t id, float* out) const {
    dequantize_row(token_embd.type(), token_embd.row(id), out, token_embd.ne(0));
  }

 private:
  static const GgufTensorInfo& expect(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) throw_error("file ", f.path(), ": tensor '", name, "' not found");
    const int64_t want_dims = ne1 > 1 ? 2 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1 ||
        (t->n_dims != want_dims && !(want_dims == 1 && t->n_dims == 1)))
      throw_error("file ", f.path(), ": tensor '", name, "': expected shape [", ne0, ne1 > 1 ? ", " + std::to_string(ne1) : "",
                  "], got ", t->shape().str());
    return *t;
  }
  static std::vector<float> vector_f32(const GgufFile& f, const std::string& name, int64_t n) {
    const GgufTensorInfo& t = expect(f, name, n, 1);
    EDGELLM_CHECK(can_dequantize(t.type), "file ", f.path(), ": tensor '", name, "' has unsupported type ", dtype_name(t.type));
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, v.data(), n);
    return v;
  }
  static MatmulWeight matmul_weight(const GgufFile& f, const KernelTable& kt, const std::string& name, int64_t n_in,
                                    int64_t n_out) {
    const GgufTensorInfo& t = expect(f, name, n_in, n_out);
    if (!kt.of(t.type).vec_dot)
      throw_error("file ", f.path(), ": tensor '", name, "' has type ", dtype_name(t.type),
                  ", which edgellm cannot multiply yet");
    MatmulWeight m;
    m.type = t.type;
    m.data = t.data;
    m.n_in = n_in;
    m.n_out = n_out;
    m.row_bytes = dtype_row_bytes(t.type, n_in);
    return m;
  }
};

}  // namespace edgellm
