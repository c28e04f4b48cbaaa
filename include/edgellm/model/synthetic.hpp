// Synthetic LLaMA models: a published shape (TinyLlama-1.1B, Llama-3.2-1B, Llama-2-7B,
// Llama-3.1-8B, or a tiny demo) with random weights, quantized to a chosen type and written as a
// real GGUF by our writer — tensor by tensor, so an 8B model never needs F32 in memory. Used by
// edgellm-bench --preset, edgellm-cli without -m, and tests. Random text in, random text out.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/gguf/writer.hpp"
#include "edgellm/quant/ref.hpp"

namespace edgellm {

struct SyntheticSpec {
  std::string name;
  int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  float rope_base;
  bool tied;  // no output.weight
};

inline std::vector<SyntheticSpec> synthetic_presets() {
  return {
      {"tiny", 512, 128, 2, 4, 2, 384, 2048, 10000.f, false},
      {"tinyllama-1.1b", 32000, 2048, 22, 32, 4, 5632, 2048, 10000.f, false},
      {"llama-3.2-1b", 128256, 2048, 16, 32, 8, 8192, 131072, 500000.f, true},
      {"llama-2-7b", 32000, 4096, 32, 32, 32, 11008, 4096, 10000.f, false},
      {"llama-3.1-8b", 128256, 4096, 32, 32, 8, 14336, 131072, 500000.f, false},
  };
}

inline SyntheticSpec synthetic_preset(const std::string& name) {
  std::string known;
  for (const auto& s : synthetic_presets()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw_error("unknown preset '", name, "' (known: ", known, ")");
}

// The per-tensor type a llama.cpp-style mix gives: `type` for the matrices, F32 for norms, and
// Q6_K for output.weight when `type` is a K-quant (as llama.cpp keeps the output higher).
inline DType synthetic_tensor_type(const std::string& name, DType type) {
  if (name.find("norm") != std::string::npos) return DType::F32;
  if (name == "output.weight" && dtype_block_size(type) == 256 && type != DType::Q6_K) return DType::Q6_K;
  return type;
}

// Writes the model to `path` (or returns it in memory when path is empty). progress(done, total)
// is called after each tensor.
inline std::vector<uint8_t> build_synthetic_gguf(const SyntheticSpec& s, DType type, uint64_t seed = 1234,
                                                 const std::string& path = "",
                                                 const std::function<void(size_t, size_t)>& progress = {}) {
  EDGELLM_CHECK(can_quantize(type), "synthetic model: cannot quantize to ", dtype_name(type));
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "synthetic-" + s.name);
  w.set_u32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(s.n_embd / s.n_head));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", s.rope_base);
  w.set_u32("general.file_type", 0);
  // SPM vocabulary: <unk> <s> </s>, the 256 byte tokens, then filler pieces.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(s.n_vocab));
  const char* hex = "0123456789ABCDEF";
  for (int i = 0; i < s.n_vocab; ++i) {
    if (i < 3) {
      tokens.push_back(i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
      types.push_back(i == 0 ? 2 : 3);
    } else if (i < 259) {
      const int b = i - 3;
      tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
      types.push_back(6);
    } else {
      tokens.push_back("\xE2\x96\x81t" + std::to_string(i));
      types.push_back(1);
    }
    scores.push_back(i < 259 ? 0.f : -static_cast<float>(i));
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_array_string("tokenizer.ggml.tokens", tokens);
  w.set_array_f32("tokenizer.ggml.scores", scores);
  w.set_array_i32("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);

  struct T {
    std::string name;
    int64_t n_in, n_out;
    float stddev;  // N(0, stddev) weights; norms are 1
  };
  std::vector<T> ts;
  const int hd = s.n_embd / s.n_head;
  ts.push_back({"token_embd.weight", s.n_embd, s.n_vocab, 1.0f});
  ts.push_back({"output_norm.weight", s.n_embd, 1, 0});
  if (!s.tied) ts.push_back({"output.weight", s.n_embd, s.n_vocab, 1.0f / std::sqrt(float(s.n_embd))});
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float si = 1.0f / std::sqrt(float(s.n_embd)), sf = 1.0f / std::sqrt(float(s.n_ff));
    ts.push_back({p + "attn_norm.weight", s.n_embd, 1, 0});
    ts.push_back({p + "attn_q.weight", s.n_embd, int64_t(s.n_head) * hd, si});
    ts.push_back({p + "attn_k.weight", s.n_embd, int64_t(s.n_head_kv) * hd, si});
    ts.push_back({p + "attn_v.weight", s.n_embd, int64_t(s.n_head_kv) * hd, si});
    ts.push_back({p + "attn_output.weight", int64_t(s.n_head) * hd, s.n_embd, si});
    ts.push_back({p + "ffn_norm.weight", s.n_embd, 1, 0});
    ts.push_back({p + "ffn_gate.weight", s.n_embd, s.n_ff, si});
    ts.push_back({p + "ffn_up.weight", s.n_embd, s.n_ff, si});
    ts.push_back({p + "ffn_down.weight", s.n_ff, s.n_embd, sf});
  }
  for (const T& t : ts) {
    const DType tt = synthetic_tensor_type(t.name, type);
    EDGELLM_CHECK(t.n_in % dtype_block_size(tt) == 0, "synthetic model: row of ", t.n_in, " for tensor '", t.name,
                  "' is not a whole number of ", dtype_name(tt), " blocks");
    w.add_tensor(t.name, tt, t.n_out == 1 ? Shape{t.n_in} : Shape{t.n_in, t.n_out});
  }

  auto provide = [&](size_t i, std::vector<uint8_t>& out) {
    const T& t = ts[i];
    const DType tt = synthetic_tensor_type(t.name, type);
    const size_t row_bytes = dtype_row_bytes(tt, t.n_in);
    out.resize(row_bytes * static_cast<size_t>(t.n_out));
    std::vector<float> row(static_cast<size_t>(t.n_in));
    uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * (i + 1));
    auto next = [&] {  // splitmix64
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (int64_t r = 0; r < t.n_out; ++r) {
      for (auto& v : row) {
        if (t.stddev == 0) {
          v = 1.0f;
          continue;
        }
        // Sum of 4 uniforms, rescaled: close enough to a normal for weights.
        float u = 0;
        for (int k = 0; k < 4; ++k) u += static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
        v = (u - 2.0f) * 1.7320508f * t.stddev;
      }
      quantize_row(tt, row.data(), out.data() + static_cast<size_t>(r) * row_bytes, t.n_in);
    }
    if (progress) progress(i + 1, ts.size());
  };
  if (!path.empty()) {
    w.write(path, provide);
    return {};
  }
  return w.to_bytes(provide);
}

}  // namespace edgellm
