// The architecture table: what differs between the model families edgellm runs (GGUF
// `general.architecture`). One entry per family says its RoPE form, its config keys and, row by
// row, the tensors of a layer: name, shape, required or optional, the LlamaLayerWeights field the
// forward pass reads it from and which matmul call reads it. Everything that walks a model's tensors derives from the
// rows (model/tensors.hpp): the loader (LlamaWeights), the matmul units the weight stream reads,
// the residency plan, the memory plan's tensor list, the synthetic model writer and the
// quantization mix (a row's field gives its category: model/tensors.hpp layer_mix_category). A new family
// whose layer is RMSNorm -> attention -> RMSNorm -> gated FFN is a new entry (built in below, or
// register_arch()) plus, where it computes something new, a few lines in LlamaModel::run.
#pragma once
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/model/layer_weights.hpp"

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

// A length of a tensor's shape, in terms of the model's hyper-parameters (LlamaConfig::dim).
enum class Dim {
  One,      // 1: the second dimension of a vector
  Embd,     // n_embd
  QDim,     // n_head * head_dim
  KvDim,    // n_head_kv * head_dim
  FF,       // n_ff
  HeadDim,  // head_dim
};

// What a tensor is (how the loader keeps it; how the synthetic writer fills it).
enum class TensorRole {
  Norm,    // RMSNorm weights: an F32 copy; synthetic: ones
  Bias,    // added after a projection: an F32 copy; synthetic: N(0, 0.25)
  Matrix,  // a matmul weight, read in place / repacked / streamed; synthetic: N(0, 1/sqrt(fan))
};

// The field of LlamaLayerWeights (model/layer_weights.hpp) a per-layer tensor fills: a matrix or
// a vector. Neither (kExtraTensor): a tensor the forward pass does not read (yet), loaded into
// LlamaLayerWeights::extra, planned and streamed like the others.
struct LayerField {
  MatmulWeight LlamaLayerWeights::*matrix = nullptr;
  std::vector<float> LlamaLayerWeights::*vector = nullptr;
  constexpr LayerField() = default;
  constexpr LayerField(MatmulWeight LlamaLayerWeights::*m) : matrix(m) {}        // NOLINT: implicit
  constexpr LayerField(std::vector<float> LlamaLayerWeights::*v) : vector(v) {}  // NOLINT: implicit
  constexpr bool extra() const { return !matrix && !vector; }
};
inline constexpr LayerField kExtraTensor{};

// The matmul calls of one layer of forward(), in the order it makes them; the matrices of a call
// are read (and streamed) together. A unit's key in the weight stream is layer * kUnitsPerLayer + unit.
enum MatmulUnit : int {
  kUnitNone = -1,    // not a matrix
  kUnitQKV = 0,      // Q, K, V projections (one matmul_multi)
  kUnitAttnOut = 1,  // attention output projection
  kUnitGateUp = 2,   // FFN gate and up (one matmul_multi)
  kUnitDown = 3,     // FFN down projection
};
inline constexpr int kUnitsPerLayer = 4;

// One row of a family's layer: tensor "blk.<N>.<name>" of shape [n_in] (a vector) or
// [n_in, n_out] (a matrix of n_out rows of n_in).
struct LayerTensor {
  const char* name;
  LayerField field;
  TensorRole role;
  Dim n_in;
  Dim n_out = Dim::One;
  Presence presence = Presence::Required;
  int unit = kUnitNone;  // MatmulUnit of a matrix
  Dim fan = Dim::Embd;   // synthetic matrices: N(0, 1/sqrt(fan))
};

// GGUF names of the tensors outside the layers.
struct TensorNames {
  const char* token_embd = "token_embd.weight";    // [n_embd, n_vocab]
  const char* output_norm = "output_norm.weight";  // [n_embd]
  const char* output = "output.weight";            // [n_embd, n_vocab]; absent: tied to token_embd
  const char* rope_freqs = "rope_freqs.weight";    // [n_rot / 2], optional (Llama 3.1 scaling)
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

// One family.
struct ArchSpec {
  std::string name;                // general.architecture, and the prefix of the config keys
  RopeForm rope = RopeForm::Normal;
  std::vector<LayerTensor> layer;  // a layer's tensors, in file order
  TensorNames tensors{};
  ConfigKeys keys{};
};

// The layer of the llama family (llama.cpp's LLM_ARCH_LLAMA tensors, in its file order): the Q/K/V
// biases (qwen2) and per-head Q/K RMSNorms (qwen3) where `qkv_bias` / `qk_norm` are not Absent.
inline std::vector<LayerTensor> llama_layer_tensors(Presence qkv_bias, Presence qk_norm) {
  using D = Dim;
  using R = TensorRole;
  using S = LlamaLayerWeights;
  const Presence req = Presence::Required;
  std::vector<LayerTensor> v = {
      {"attn_norm.weight", &S::attn_norm, R::Norm, D::Embd},
      {"attn_q.weight", &S::wq, R::Matrix, D::Embd, D::QDim, req, kUnitQKV},
      {"attn_k.weight", &S::wk, R::Matrix, D::Embd, D::KvDim, req, kUnitQKV},
      {"attn_v.weight", &S::wv, R::Matrix, D::Embd, D::KvDim, req, kUnitQKV},
  };
  if (qkv_bias != Presence::Absent)
    v.insert(v.end(), {{"attn_q.bias", &S::bq, R::Bias, D::QDim, D::One, qkv_bias},
                       {"attn_k.bias", &S::bk, R::Bias, D::KvDim, D::One, qkv_bias},
                       {"attn_v.bias", &S::bv, R::Bias, D::KvDim, D::One, qkv_bias}});
  if (qk_norm != Presence::Absent)
    v.insert(v.end(), {{"attn_q_norm.weight", &S::q_norm, R::Norm, D::HeadDim, D::One, qk_norm},
                       {"attn_k_norm.weight", &S::k_norm, R::Norm, D::HeadDim, D::One, qk_norm}});
  v.insert(v.end(), {{"attn_output.weight", &S::wo, R::Matrix, D::QDim, D::Embd, req, kUnitAttnOut},
                     {"ffn_norm.weight", &S::ffn_norm, R::Norm, D::Embd},
                     {"ffn_gate.weight", &S::w_gate, R::Matrix, D::Embd, D::FF, req, kUnitGateUp},
                     {"ffn_up.weight", &S::w_up, R::Matrix, D::Embd, D::FF, req, kUnitGateUp},
                     {"ffn_down.weight", &S::w_down, R::Matrix, D::FF, D::Embd, req, kUnitDown, D::FF}});
  return v;
}

namespace detail {

// The families: the built-in ones, then those added by register_arch(). A deque: entries keep
// their address (LlamaConfig::spec points at one).
struct ArchRegistry {
  std::mutex mu;
  std::deque<ArchSpec> specs;
  ArchRegistry() {
    // llama.cpp reads Q/K/V biases of llama files when present (some fine-tunes have them).
    specs.push_back({"llama", RopeForm::Normal, llama_layer_tensors(Presence::Optional, Presence::Absent)});
    specs.push_back({"qwen2", RopeForm::Neox, llama_layer_tensors(Presence::Required, Presence::Absent)});
    specs.push_back({"qwen3", RopeForm::Neox, llama_layer_tensors(Presence::Absent, Presence::Required)});
  }
};

inline ArchRegistry& arch_registry() {
  static ArchRegistry r;
  return r;
}

}  // namespace detail

// Adds a family (a model whose layer is a new combination of the rows above, or a test's toy
// one); Error when the name is taken or a matrix row has no unit. Returns the stored entry.
inline const ArchSpec& register_arch(ArchSpec spec) {
  for (const LayerTensor& t : spec.layer) {
    EDGELLM_CHECK((t.role == TensorRole::Matrix) == (t.unit >= 0 && t.unit < kUnitsPerLayer), "architecture '", spec.name,
                  "': tensor '", t.name, "' must have a matmul unit exactly when it is a matrix");
    EDGELLM_CHECK(t.field.extra() || (t.role == TensorRole::Matrix) == (t.field.matrix != nullptr), "architecture '",
                  spec.name, "': tensor '", t.name, "' must fill a matrix field exactly when it is a matrix");
  }
  detail::ArchRegistry& r = detail::arch_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (const ArchSpec& a : r.specs) EDGELLM_CHECK(a.name != spec.name, "architecture '", spec.name, "' is already registered");
  r.specs.push_back(std::move(spec));
  return r.specs.back();
}

// The entry for `arch`, or nullptr.
inline const ArchSpec* find_arch_spec(const std::string& arch) {
  detail::ArchRegistry& r = detail::arch_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (const ArchSpec& a : r.specs)
    if (arch == a.name) return &a;
  return nullptr;
}

// The entry for `arch`, or Error naming it and the known ones (`where`: the file, for the message).
inline const ArchSpec& arch_spec(const std::string& arch, const std::string& where) {
  if (const ArchSpec* a = find_arch_spec(arch)) return *a;
  detail::ArchRegistry& r = detail::arch_registry();
  std::lock_guard<std::mutex> lk(r.mu);
  std::string known;
  for (const ArchSpec& a : r.specs) known += (known.empty() ? "'" : ", '") + a.name + "'";
  throw_error(where, ": general.architecture is '", arch, "', which edgellm does not run (known: ", known, ")");
}

}  // namespace edgellm
