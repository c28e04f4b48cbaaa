// The architecture table: what differs between the model families edgellm runs (GGUF
// `general.architecture`), read by LlamaConfig (config keys, rope form) and LlamaWeights (tensor
// names, optional and per-family tensors). A new family whose layer is RMSNorm -> attention ->
// RMSNorm -> gated FFN is a new entry here plus, where it computes something new, a few lines in
// LlamaModel::run; nothing else is copied.
#pragma once
#include <string>

#include "edgellm/core/error.hpp"

namespace edgellm {

// How RoPE pairs the dimensions of a head (ggml's rope modes).
enum class RopeForm {
  Normal,  // interleaved pairs (x[2i], x[2i+1]): llama
  Neox,    // halves (x[i], x[i + n_rot/2]): GPT-NeoX, qwen2, qwen3
};

// Whether a family's files carry a tensor.
enum class Presence {
  Absent,    // never read (a file that has it is read as if it had not)
  Optional,  // used when present
  Required,  // its absence is an Error naming it
};

// GGUF tensor names. Per-layer names are suffixes of "blk.<N>.".
struct TensorNames {
  const char* token_embd = "token_embd.weight";        // [n_embd, n_vocab]
  const char* output_norm = "output_norm.weight";      // [n_embd]
  const char* output = "output.weight";                // [n_embd, n_vocab]; absent: tied to token_embd
  const char* rope_freqs = "rope_freqs.weight";        // [n_rot / 2], optional (Llama 3.1 scaling)
  const char* attn_norm = "attn_norm.weight";          // [n_embd]
  const char* attn_q = "attn_q.weight";                // [n_embd -> n_head * head_dim]
  const char* attn_k = "attn_k.weight";                // [n_embd -> n_head_kv * head_dim]
  const char* attn_v = "attn_v.weight";                // [n_embd -> n_head_kv * head_dim]
  const char* attn_q_bias = "attn_q.bias";             // [n_head * head_dim]
  const char* attn_k_bias = "attn_k.bias";             // [n_head_kv * head_dim]
  const char* attn_v_bias = "attn_v.bias";             // [n_head_kv * head_dim]
  const char* attn_q_norm = "attn_q_norm.weight";      // [head_dim], RMSNorm of each query head
  const char* attn_k_norm = "attn_k_norm.weight";      // [head_dim], RMSNorm of each key head
  const char* attn_output = "attn_output.weight";      // [n_head * head_dim -> n_embd]
  const char* ffn_norm = "ffn_norm.weight";            // [n_embd]
  const char* ffn_gate = "ffn_gate.weight";            // [n_embd -> n_ff]
  const char* ffn_up = "ffn_up.weight";                // [n_embd -> n_ff]
  const char* ffn_down = "ffn_down.weight";            // [n_ff -> n_embd]
};

// Metadata keys, each prefixed by "<architecture>." (llama.embedding_length, qwen2.rope.freq_base).
struct ConfigKeys {
  const char* context_length = "context_length";
  const char* embedding_length = "embedding_length";
  const char* block_count = "block_count";
  const char* feed_forward_length = "feed_forward_length";
  const char* head_count = "attention.head_count";
  const char* head_count_kv = "attention.head_count_kv";
  const char* key_length = "attention.key_length";      // head_dim (default n_embd / n_head)
  const char* value_length = "attention.value_length";  // must equal key_length
  const char* rms_eps = "attention.layer_norm_rms_epsilon";
  const char* rope_dims = "rope.dimension_count";
  const char* rope_freq_base = "rope.freq_base";
  const char* rope_scaling_type = "rope.scaling.type";
  const char* rope_scaling_factor = "rope.scaling.factor";
};

// One family. The names are the same for the three families here (llama.cpp's GGUF conventions);
// a family with other names (Phi-3's fused attn_qkv) gets its own TensorNames.
struct ArchSpec {
  const char* name;       // general.architecture, and the prefix of the config keys
  RopeForm rope;
  Presence qkv_bias;      // blk.N.attn_{q,k,v}.bias, added after the projections
  Presence qk_norm;       // blk.N.attn_{q,k}_norm.weight: per-head RMSNorm of Q and K before RoPE
  TensorNames tensors{};
  ConfigKeys keys{};
};

inline const ArchSpec* arch_specs(size_t* n) {
  static const ArchSpec kArchs[] = {
      // llama.cpp reads Q/K/V biases of llama files when present (some fine-tunes have them).
      {"llama", RopeForm::Normal, Presence::Optional, Presence::Absent},
      {"qwen2", RopeForm::Neox, Presence::Required, Presence::Absent},
      {"qwen3", RopeForm::Neox, Presence::Absent, Presence::Required},
  };
  *n = sizeof kArchs / sizeof kArchs[0];
  return kArchs;
}

// The entry for `arch`, or Error naming it and the known ones (`where`: the file, for the message).
inline const ArchSpec& arch_spec(const std::string& arch, const std::string& where) {
  size_t n = 0;
  const ArchSpec* a = arch_specs(&n);
  std::string known;
  for (size_t i = 0; i < n; ++i) {
    if (arch == a[i].name) return a[i];
    known += (known.empty() ? "'" : ", '") + std::string(a[i].name) + "'";
  }
  throw_error(where, ": general.architecture is '", arch, "', which edgellm does not run (known: ", known, ")");
}

}  // namespace edgellm
