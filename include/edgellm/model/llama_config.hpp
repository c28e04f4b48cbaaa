// LlamaConfig: the hyper-parameters of a LLaMA-family model (llama, qwen2, qwen3: model/arch.hpp),
// read from GGUF `<arch>.*` metadata and checked against the tensors. Missing or inconsistent
// values throw Error naming the key.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/model/arch.hpp"

namespace edgellm {

struct LlamaConfig {
  std::string arch = "llama";  // general.architecture (key prefix; the keys below are <arch>.*)
  std::string name;            // general.name
  int n_vocab = 0;             // rows of token_embd.weight
  int n_embd = 0;              // <arch>.embedding_length
  int n_layer = 0;             // <arch>.block_count
  int n_head = 0;              // <arch>.attention.head_count
  int n_head_kv = 0;           // <arch>.attention.head_count_kv (GQA / MQA); default n_head
  int head_dim = 0;            // <arch>.attention.key_length; default n_embd / n_head
  int n_ff = 0;                // <arch>.feed_forward_length
  int n_rot = 0;               // <arch>.rope.dimension_count; default head_dim
  int n_ctx_train = 0;         // <arch>.context_length
  float rms_eps = 1e-5f;       // <arch>.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.f;  // <arch>.rope.freq_base
  float rope_freq_scale = 1.f;     // 1 / <arch>.rope.scaling.factor for linear scaling
  bool has_rope_freqs = false;     // rope_freqs.weight present (Llama 3.1+ long-context scaling)
  bool tied_embeddings = false;    // no output.weight: the output projection is token_embd
  const ArchSpec* spec = nullptr;  // the architecture table's entry (model/arch.hpp)

  RopeForm rope_form() const { return spec ? spec->rope : RopeForm::Normal; }

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int n_gqa() const { return n_head / n_head_kv; }

  // A shape length of the architecture table (model/arch.hpp).
  int64_t dim(Dim d) const {
    switch (d) {
      case Dim::One: return 1;
      case Dim::Embd: return n_embd;
      case Dim::QDim: return q_dim();
      case Dim::KvDim: return kv_dim();
      case Dim::FF: return n_ff;
      case Dim::HeadDim: return head_dim;
    }
    return 0;
  }
  // The table's entry: spec, or for a config made by hand (no spec) the entry named by arch.
  const ArchSpec& arch_entry() const { return spec ? *spec : arch_spec(arch.empty() ? "llama" : arch, "model config"); }

  static LlamaConfig from_gguf(const GgufFile& f) {
    LlamaConfig c;
    c.arch = f.get_string_or("general.architecture", "");
    c.spec = &arch_spec(c.arch, "file " + f.path());
    const ConfigKeys& k = c.spec->keys;
    const std::string p = c.arch + ".";
    c.name = f.get_string_or("general.name", "");
    auto get_pos = [&](const std::string& key) {
      const int64_t v = f.get_int(p + key);
      if (v <= 0 || v > (1 << 24)) throw_error("file ", f.path(), ": key '", p, key, "' = ", v, " is out of range");
      return static_cast<int>(v);
    };
    auto has = [&](const char* key) { return f.has(p + key); };
    c.n_embd = get_pos(k.embedding_length);
    c.n_layer = get_pos(k.block_count);
    c.n_head = get_pos(k.head_count);
    c.n_head_kv = has(k.head_count_kv) ? get_pos(k.head_count_kv) : c.n_head;
    c.n_ff = get_pos(k.feed_forward_length);
    c.n_ctx_train = has(k.context_length) ? get_pos(k.context_length) : 2048;
    c.head_dim = has(k.key_length) ? get_pos(k.key_length) : c.n_embd / c.n_head;
    c.n_rot = has(k.rope_dims) ? get_pos(k.rope_dims) : c.head_dim;
    c.rms_eps = static_cast<float>(f.get_float_or(p + k.rms_eps, 1e-5));
    c.rope_freq_base = static_cast<float>(f.get_float_or(p + k.rope_freq_base, 10000.0));
    const std::string scaling = f.get_string_or(p + k.rope_scaling_type, "none");
    if (scaling == "linear") {
      const double factor = f.get_float_or(p + k.rope_scaling_factor, 1.0);
      if (!(factor > 0)) throw_error("file ", f.path(), ": key '", p, k.rope_scaling_factor, "' must be > 0");
      c.rope_freq_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none" && scaling != "llama3") {
      throw_error("file ", f.path(), ": key '", p, k.rope_scaling_type, "' = '", scaling,
                  "' is not supported (none, linear, llama3 via rope_freqs.weight)");
    }
    if (has(k.value_length) && f.get_int(p + k.value_length) != c.head_dim)
      throw_error("file ", f.path(), ": key '", p, k.value_length, "' differs from ", k.key_length);

    auto bad = [&](const std::string& what) { throw_error("file ", f.path(), ": ", what); };
    if (c.n_head % c.n_head_kv != 0)
      bad("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
    if (c.n_embd % c.n_head != 0 && !has(k.key_length))
      bad("embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " + std::to_string(c.n_head));
    if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
      bad("rope.dimension_count " + std::to_string(c.n_rot) + " must be even and <= head dim " + std::to_string(c.head_dim));

    const TensorNames& t = c.spec->tensors;
    const GgufTensorInfo* emb = f.find_tensor(t.token_embd);
    if (!emb) bad(std::string("tensor '") + t.token_embd + "' not found");
    if (emb->ne[0] != c.n_embd)
      bad(std::string("tensor '") + t.token_embd + "': expected " + std::to_string(c.n_embd) + " columns, got " +
          std::to_string(emb->ne[0]));
    c.n_vocab = static_cast<int>(emb->ne[1]);
    c.tied_embeddings = f.find_tensor(t.output) == nullptr;
    c.has_rope_freqs = f.find_tensor(t.rope_freqs) != nullptr;
    return c;
  }
};

}  // namespace edgellm
