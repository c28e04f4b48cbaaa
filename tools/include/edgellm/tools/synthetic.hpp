// Synthetic models: a published shape (TinyLlama-1.1B, Llama-3.2-1B, Llama-3.2-3B, Llama-2-7B, Llama-3.1-8B,
// Qwen2.5-1.5B, Qwen3-1.7B, or a tiny demo) with random weights, quantized to a chosen type and written as a
// real GGUF by our writer — tensor by tensor, so an 8B model never needs F32 in memory. Used by
// edgellm-bench --preset, edgellm-cli without -m, and tests. Random text in, random text out.
// Mixes that llama-quantize refuses without an importance matrix (IQ1_S ... IQ3_XXS, IQ3_XS,
// Q2_K_S: mix_requires_imatrix) are quantized with a synthetic one (synthetic_imatrix). SyntheticBlocks::Tiled
// quantizes only a few rows per matrix and tiles their blocks, for files too large to quantize in full.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/gguf/writer.hpp"
#include "edgellm/model/arch.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/quant/mix.hpp"
#include "edgellm/quant/quantize_weighted.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/thread_pool.hpp"

namespace edgellm {

struct SyntheticSpec {
  std::string name;
  int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  float rope_base;
  bool tied;                   // no output.weight
  std::string arch = "llama";  // general.architecture (model/arch.hpp): its table says the tensors
  int head_dim = 0;            // 0: n_embd / n_head
  float rms_eps = 1e-5f;

  int head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

inline std::vector<SyntheticSpec> synthetic_presets() {
  return {
      {"tiny", 512, 128, 2, 4, 2, 384, 2048, 10000.f, false},
      // rows of 256 and 512: every matrix fits the 256-weight i-quant / K-quant blocks (no fallback types)
      {"tiny-256", 512, 256, 2, 4, 2, 512, 2048, 10000.f, false},
      {"llama-160m", 32000, 768, 12, 12, 12, 3072, 2048, 10000.f, false},  // JackFram/llama-160m's shape
      {"tinyllama-1.1b", 32000, 2048, 22, 32, 4, 5632, 2048, 10000.f, false},
      {"llama-3.2-1b", 128256, 2048, 16, 32, 8, 8192, 131072, 500000.f, true},
      {"llama-3.2-3b", 128256, 3072, 28, 24, 8, 8192, 131072, 500000.f, true},  // meta-llama/Llama-3.2-3B's shape
      {"llama-2-7b", 32000, 4096, 32, 32, 32, 11008, 4096, 10000.f, false},
      {"llama-3.1-8b", 128256, 4096, 32, 32, 8, 14336, 131072, 500000.f, false},
      {"qwen2.5-1.5b", 151936, 1536, 28, 12, 2, 8960, 32768, 1000000.f, true, "qwen2", 128, 1e-6f},
      {"qwen3-1.7b", 151936, 2048, 28, 16, 8, 6144, 40960, 1000000.f, true, "qwen3", 128, 1e-6f},
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

// The per-tensor type of the simple rule used with a plain DType: `type` for the matrices, F32 for
// norms and biases, and Q6_K for output.weight when `type` is a K-quant.
inline DType synthetic_tensor_type(const std::string& name, DType type) {
  if (name.find("norm") != std::string::npos || name.find(".bias") != std::string::npos) return DType::F32;
  if (name == "output.weight" && dtype_block_size(type) == 256 && type != DType::Q6_K) return DType::Q6_K;
  return type;
}

// One tensor of a synthetic model: n_out rows of n_in N(0, stddev) values (stddev 0: all ones);
// n_out 1 is a vector (norm, bias).
struct SyntheticTensor {
  std::string name;
  int64_t n_in, n_out;
  float stddev;
};

// The model's shape as a LlamaConfig (the architecture's table entry included).
inline LlamaConfig synthetic_config(const SyntheticSpec& s) {
  LlamaConfig c;
  c.arch = s.arch;
  c.spec = &arch_spec(s.arch, "synthetic model '" + s.name + "'");
  c.name = s.name;
  c.n_vocab = s.n_vocab;
  c.n_embd = s.n_embd;
  c.n_layer = s.n_layer;
  c.n_head = s.n_head;
  c.n_head_kv = s.n_head_kv;
  c.head_dim = s.head_size();
  c.n_ff = s.n_ff;
  c.n_rot = s.head_size();
  c.n_ctx_train = s.n_ctx;
  c.rms_eps = s.rms_eps;
  c.rope_freq_base = s.rope_base;
  c.tied_embeddings = s.tied;
  return c;
}

// The tensors of a model of this shape and architecture (model_tensors: the table's required
// rows), in llama.cpp's file order.
inline std::vector<SyntheticTensor> synthetic_tensors(const SyntheticSpec& s) {
  std::vector<SyntheticTensor> ts;
  for (const ModelTensor& t : model_tensors(synthetic_config(s))) ts.push_back({t.name, t.n_in, t.n_out, t.synthetic_stddev});
  return ts;
}

// Per-tensor types of a llama.cpp mix (Q4_K_M, Q2_K, Q8_0 ...) for this shape, by the same rules
// as llama-quantize (quant/mix.hpp), so a synthetic Q4_K_M file has llama.cpp's Q4_K_M layout.
inline std::vector<DType> synthetic_mix_types(const SyntheticSpec& s, const QuantMix& mix) {
  const std::vector<SyntheticTensor> ts = synthetic_tensors(s);
  std::vector<std::string> names;
  for (const auto& t : ts) names.push_back(t.name);
  const std::vector<size_t> order = llama_tensor_order(names);
  const LlamaConfig c = synthetic_config(s);
  std::vector<MixTensor> planned;
  for (size_t i : order) planned.push_back(mix_tensor(c.spec, ts[i].name, ts[i].n_out == 1 ? 1 : 2, ts[i].n_in));
  const std::vector<DType> in_order =
      plan_quant_mix(mix, mix_model_info(c), planned, std::vector<DType>(planned.size(), DType::F32), false);
  std::vector<DType> types(ts.size());
  for (size_t k = 0; k < order.size(); ++k) types[order[k]] = in_order[k];
  return types;
}

namespace detail {

// splitmix64 step: the whole generator state is one counter, so any row can be generated on
// its own (rows are quantized in parallel, the file is the same for any thread count).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// row: [t.n_in] values of row r of tensor i.
inline void synthetic_row(const SyntheticTensor& t, uint64_t seed, size_t i, int64_t r, float* row) {
  if (t.stddev == 0) {
    std::fill_n(row, t.n_in, 1.0f);
    return;
  }
  uint64_t state = seed ^ (0x9E3779B97F4A7C15ull * (i + 1)) ^ (0xD1B54A32D192ED03ull * uint64_t(r + 1));
  for (int64_t j = 0; j < t.n_in; ++j) {
    // Sum of 4 uniforms, rescaled: close enough to a normal for weights.
    float u = 0;
    for (int k = 0; k < 4; ++k) u += static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
    row[j] = (u - 2.0f) * 1.7320508f * t.stddev;
  }
}

// The synthetic importance matrix of tensor i (n_in values), what llama-imatrix would record as the
// mean square of each input column over a calibration text: the activations are taken to be
// N(0, v_j) per column j, and the entry is v_j itself (the expected mean square, no sampling), with
// v_j log-uniform in [e^-2, e^2] and one column in 64 an outlier at 16 v_j, like the few large
// channels of real activations. Deterministic from the seed and the tensor index.
inline std::vector<float> synthetic_imatrix_row(int64_t n_in, uint64_t seed, size_t i) {
  std::vector<float> v(static_cast<size_t>(n_in));
  uint64_t state = seed ^ 0x5851F42D4C957F2Dull ^ (0x9E3779B97F4A7C15ull * (i + 1));
  for (auto& x : v) {
    const uint64_t z = splitmix64(state);
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    x = std::exp(4.0f * u - 2.0f) * ((z & 63) == 0 ? 16.0f : 1.0f);
  }
  return v;
}

inline void set_synthetic_metadata(GgufWriter& w, const SyntheticSpec& s, int32_t file_type) {
  const ConfigKeys& k = arch_spec(s.arch, "synthetic model '" + s.name + "'").keys;
  const std::string p = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "synthetic-" + s.name);
  w.set_u32(p + k.context_length, static_cast<uint32_t>(s.n_ctx));
  w.set_u32(p + k.embedding_length, static_cast<uint32_t>(s.n_embd));
  w.set_u32(p + k.block_count, static_cast<uint32_t>(s.n_layer));
  w.set_u32(p + k.feed_forward_length, static_cast<uint32_t>(s.n_ff));
  w.set_u32(p + k.head_count, static_cast<uint32_t>(s.n_head));
  w.set_u32(p + k.head_count_kv, static_cast<uint32_t>(s.n_head_kv));
  if (s.head_size() * s.n_head != s.n_embd) {
    w.set_u32(p + k.key_length, static_cast<uint32_t>(s.head_size()));
    w.set_u32(p + k.value_length, static_cast<uint32_t>(s.head_size()));
  }
  w.set_u32(p + k.rope_dims, static_cast<uint32_t>(s.head_size()));
  w.set_f32(p + k.rms_eps, s.rms_eps);
  w.set_f32(p + k.rope_freq_base, s.rope_base);
  w.set_u32("general.file_type", static_cast<uint32_t>(file_type));
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
}

}  // namespace detail

// The synthetic importance matrix for tensor i of synthetic_tensors(s), or empty for the tensors
// llama-imatrix records nothing for (token_embd, output, norms and biases: only the matrices of the
// layers are multiplied by an activation it sees).
inline std::vector<float> synthetic_imatrix(const SyntheticSpec& s, uint64_t seed, size_t i) {
  const std::vector<SyntheticTensor> ts = synthetic_tensors(s);
  EDGELLM_CHECK(i < ts.size(), "synthetic_imatrix: tensor ", i, " of ", ts.size());
  const SyntheticTensor& t = ts[i];
  if (t.n_out == 1 || t.name.compare(0, 4, "blk.") != 0) return {};
  return detail::synthetic_imatrix_row(t.n_in, seed, i);
}

// Whether the synthetic file of this mix is quantized with the synthetic importance matrix: when
// llama-quantize would refuse one of its tensors without a matrix (mix_requires_imatrix).
inline bool synthetic_mix_uses_imatrix(const SyntheticSpec& s, const QuantMix& mix, const std::vector<DType>& types) {
  const std::vector<SyntheticTensor> ts = synthetic_tensors(s);
  const ArchSpec* arch = synthetic_config(s).spec;
  for (size_t i = 0; i < ts.size() && i < types.size(); ++i) {
    const MixTensor t = mix_tensor(arch, ts[i].name, ts[i].n_out == 1 ? 1 : 2, ts[i].n_in);
    if (mix_requires_imatrix(mix, t, types[i])) return true;
  }
  return false;
}

// How the blocks of a synthetic matrix are made.
//   Quantized: every row is a random F32 row quantized by the type's quantizer (with the synthetic
//     importance matrix where the mix needs one) — what llama-quantize would write from those weights.
//   Tiled: only the first kSyntheticPoolRows rows of each matrix are quantized so; every later row is
//     made of whole blocks copied from those rows, block column by block column (block j of a later
//     row is block j of a pool row drawn at random from the seed, the row and j). Every block is one
//     the quantizer wrote, so each is a valid block of its type with finite scales, and the file has
//     the mix's types and sizes exactly; it is written at storage speed (an 8B i-quant file in minutes
//     instead of hours of grid search). The values repeat across rows, so its logits are not those of
//     the Quantized file: for speed and memory measurements (the kernels do not depend on the values).
enum class SyntheticBlocks { Quantized, Tiled };
constexpr int64_t kSyntheticPoolRows = 32;

// Writes the model with the given per-tensor types (one per synthetic_tensors(s) entry) to `path`
// (or returns it in memory when path is empty). progress(done, total) is called after each
// tensor; rows are generated and quantized in parallel on `pool` when given. use_imatrix: the layers'
// matrices are quantized with synthetic_imatrix (as llama-quantize --imatrix).
inline std::vector<uint8_t> build_synthetic_gguf(const SyntheticSpec& s, const std::vector<DType>& types,
                                                 int32_t file_type, uint64_t seed, const std::string& path,
                                                 const std::function<void(size_t, size_t)>& progress,
                                                 ThreadPool* pool, bool use_imatrix = false,
                                                 SyntheticBlocks blocks = SyntheticBlocks::Quantized) {
  const std::vector<SyntheticTensor> ts = synthetic_tensors(s);
  EDGELLM_CHECK(types.size() == ts.size(), "synthetic model: ", types.size(), " tensor types for ", ts.size(),
                " tensors");
  GgufWriter w;
  detail::set_synthetic_metadata(w, s, file_type);
  for (size_t i = 0; i < ts.size(); ++i) {
    const SyntheticTensor& t = ts[i];
    EDGELLM_CHECK(can_quantize_chunk(types[i]), "synthetic model: cannot quantize to ", dtype_name(types[i]));
    EDGELLM_CHECK(t.n_in % dtype_block_size(types[i]) == 0, "synthetic model: row of ", t.n_in, " for tensor '",
                  t.name, "' is not a whole number of ", dtype_name(types[i]), " blocks");
    w.add_tensor(t.name, types[i], t.n_out == 1 ? Shape{t.n_in} : Shape{t.n_in, t.n_out});
  }
  auto provide = [&](size_t i, std::vector<uint8_t>& out) {
    const SyntheticTensor& t = ts[i];
    const DType tt = types[i];
    const size_t row_bytes = dtype_row_bytes(tt, t.n_in);
    out.resize(row_bytes * static_cast<size_t>(t.n_out));
    const std::vector<float> imatrix = use_imatrix ? synthetic_imatrix(s, seed, i) : std::vector<float>{};
    // Without a matrix the plain row quantizer where there is one (the bytes of earlier versions).
    const bool chunk = !imatrix.empty() || !can_quantize(tt);
    auto rows = [&](int64_t r0, int64_t r1, int) {
      std::vector<float> row(static_cast<size_t>(t.n_in));  // one F32 row at a time
      for (int64_t r = r0; r < r1; ++r) {
        detail::synthetic_row(t, seed, i, r, row.data());
        uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
        if (chunk) quantize_chunk(tt, row.data(), dst, 1, t.n_in, imatrix.empty() ? nullptr : imatrix.data());
        else quantize_row(tt, row.data(), dst, t.n_in);
      }
    };
    // Tiled: quantize the pool rows, then copy their blocks into the others.
    const int64_t n_quantized = blocks == SyntheticBlocks::Tiled ? std::min(t.n_out, kSyntheticPoolRows) : t.n_out;
    if (pool) pool->parallel_for(n_quantized, rows);
    else rows(0, n_quantized, 0);
    if (n_quantized < t.n_out) {
      const size_t block_bytes = dtype_row_bytes(tt, dtype_block_size(tt));
      const int64_t n_blocks = t.n_in / dtype_block_size(tt);
      auto tile = [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
          uint64_t state = seed ^ 0xA0761D6478BD642Full ^ (0x9E3779B97F4A7C15ull * (i + 1)) ^
                           (0xD1B54A32D192ED03ull * uint64_t(r + 1));
          uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
          for (int64_t j = 0; j < n_blocks; ++j) {
            const uint64_t from = detail::splitmix64(state) % uint64_t(n_quantized);
            std::memcpy(dst + size_t(j) * block_bytes, out.data() + from * row_bytes + size_t(j) * block_bytes,
                        block_bytes);
          }
        }
      };
      if (pool) pool->parallel_for(t.n_out - n_quantized, [&](int64_t a, int64_t b, int w) {
        tile(a + n_quantized, b + n_quantized, w);
      });
      else tile(n_quantized, t.n_out, 0);
    }
    if (progress) progress(i + 1, ts.size());
  };
  if (!path.empty()) {
    w.write(path, provide);
    return {};
  }
  return w.to_bytes(provide);
}

// A llama.cpp mix (Q4_K_M, Q2_K, Q8_0 ...): the per-tensor types llama-quantize would choose.
inline std::vector<uint8_t> build_synthetic_gguf(const SyntheticSpec& s, const QuantMix& mix, uint64_t seed = 1234,
                                                 const std::string& path = "",
                                                 const std::function<void(size_t, size_t)>& progress = {},
                                                 ThreadPool* pool = nullptr,
                                                 SyntheticBlocks blocks = SyntheticBlocks::Quantized) {
  const std::vector<DType> types = synthetic_mix_types(s, mix);
  return build_synthetic_gguf(s, types, mix.file_type, seed, path, progress, pool,
                              synthetic_mix_uses_imatrix(s, mix, types), blocks);
}

// One type for every matrix (synthetic_tensor_type's rule).
inline std::vector<uint8_t> build_synthetic_gguf(const SyntheticSpec& s, DType type, uint64_t seed = 1234,
                                                 const std::string& path = "",
                                                 const std::function<void(size_t, size_t)>& progress = {},
                                                 ThreadPool* pool = nullptr) {
  EDGELLM_CHECK(can_quantize(type), "synthetic model: cannot quantize to ", dtype_name(type));
  std::vector<DType> types;
  for (const auto& t : synthetic_tensors(s)) types.push_back(t.n_out == 1 ? DType::F32 : synthetic_tensor_type(t.name, type));
  return build_synthetic_gguf(s, types, 0, seed, path, progress, pool);
}

}  // namespace edgellm
