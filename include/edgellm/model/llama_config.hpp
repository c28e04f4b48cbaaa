// LlamaConfig: the hyper-parameters of a LLaMA-family model, read from GGUF `llama.*` metadata
// and checked against the tensors. Missing or inconsistent values throw Error naming the key.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"

namespace edgellm {

struct LlamaConfig {
  std::string arch = "llama";  // general.architecture (key prefix)
  std::string name;            // general.name
  int n_vocab = 0;             // rows of token_embd.weight
  int n_embd = 0;              // llama.embedding_length
  int n_layer = 0;             // llama.block_count
  int n_head = 0;              // llama.attention.head_count
  int n_head_kv = 0;           // llama.attention.head_count_kv (GQA / MQA); default n_head
  int head_dim = 0;            // llama.attention.key_length; default n_embd / n_head
  int n_ff = 0;                // llama.feed_forward_length
  int n_rot = 0;               // llama.rope.dimension_count; default head_dim
  int n_ctx_train = 0;         // llama.context_length
  float rms_eps = 1e-5f;       // llama.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.f;  // llama.rope.freq_base
  float rope_freq_scale = 1.f;     // 1 / llama.rope.scaling.factor for linear scaling
  bool has_rope_freqs = false;     // rope_freqs.weight present (Llama 3.1+ long-context scaling)
  bool tied_embeddings = false;    // no output.weight: the output projection is token_embd

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int n_gqa() const { return n_head / n_head_kv; }

  static LlamaConfig from_gguf(const GgufFile& f) {
    LlamaConfig c;
    c.arch = f.get_string_or("general.architecture", "");
    if (c.arch != "llama")
      throw_error("file ", f.path(), ": general.architecture is '", c.arch, "', expected 'llama'");
    const std::string p = c.arch + ".";
    c.name = f.get_string_or("general.name", "");
    auto get_pos = [&](const std::string& key) {
      const int64_t v = f.get_int(p + key);
      if (v <= 0 || v > (1 << 24)) throw_error("file ", f.path(), ": key '", p, key, "' = ", v, " is out of range");
      return static_cast<int>(v);
    };
    c.n_embd = get_pos("embedding_length");
    c.n_layer = get_pos("block_count");
    c.n_head = get_pos("attention.head_count");
    c.n_head_kv = f.has(p + "attention.head_count_kv") ? get_pos("attention.head_count_kv") : c.n_head;
    c.n_ff = get_pos("feed_forward_length");
    c.n_ctx_train = f.has(p + "context_length") ? get_pos("context_length") : 2048;
    c.head_dim = f.has(p + "attention.key_length") ? get_pos("attention.key_length") : c.n_embd / c.n_head;
    c.n_rot = f.has(p + "rope.dimension_count") ? get_pos("rope.dimension_count") : c.head_dim;
    c.rms_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
    c.rope_freq_base = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
    const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
    if (scaling == "linear") {
      const double factor = f.get_float_or(p + "rope.scaling.factor", 1.0);
      if (!(factor > 0)) throw_error("file ", f.path(), ": key '", p, "rope.scaling.factor' must be > 0");
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none" && scaling != "llama3") {
      throw_error("file ", f.path(), ": key '", p, "rope.scaling.type' = '", scaling,
                  "' is not supported (none, linear, llama3 via rope_freqs.weight)");
    }
    if (f.has(p + "attention.value_length") && f.get_int(p + "attention.value_length") != c.head_dim)
      throw_error("file ", f.path(), ": key '", p, "attention.value_length' differs from key_length");

    auto bad = [&](const std::string& what) { throw_error("file ", f.path(), ": ", what); };
    if (c.n_head % c.n_head_kv != 0)
      bad("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
    if (c.n_embd % c.n_head != 0 && !f.has(p + "attention.key_length"))
      bad("embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " + std::to_string(c.n_head));
    if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
      bad("rope.dimension_count " + std::to_string(c.n_rot) + " must be even and <= head dim " + std::to_string(c.head_dim));

    const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
    if (!emb) bad("tensor 'token_embd.weight' not found");
    if (emb->ne[0] != c.n_embd)
      bad("tensor 'token_embd.weight': expected " + std::to_string(c.n_embd) + " columns, got " + std::to_string(emb->ne[0]));
    c.n_vocab = static_cast<int>(emb->ne[1]);
    c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
    c.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
    return c;
  }
};

}  // namespace edgellm
