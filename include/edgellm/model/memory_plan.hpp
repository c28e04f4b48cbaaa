// MemoryPlan: what a run will need — mapped weights, KV cache per token and at the chosen context,
// scratch — against the machine's RAM (MemTotal of /proc/meminfo), with the same formulas as
// PagedKvCache and LlamaModel; plus weight sizes of a LLaMA shape at a quantization mix (DEPLOY.md).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama_config.hpp"
#include "edgellm/model/tensors.hpp"
#include "edgellm/quant/mix.hpp"
#include "edgellm/runtime/memory_limit.hpp"

namespace edgellm {

// Kept free for the OS, other processes and allocator slack: at least 384 MiB, or a fifth of RAM.
inline constexpr uint64_t kMemoryPlanMinHeadroomBytes = uint64_t(384) << 20;
inline constexpr uint64_t kMemoryPlanHeadroomDivisor = 5;
// Tokenizer tables (strings, maps, merges) per vocabulary entry: a measured-order estimate.
inline constexpr uint64_t kMemoryPlanVocabBytesPerToken = 64;

struct MemoryPlanParams {
  int n_ctx = 2048;
  int n_batch = 512;           // prompt tokens per forward pass: sizes the activations
  int n_threads = 0;           // 0: std::thread::hardware_concurrency()
  DType kv_type = DType::F32;  // F32, F16 or Q8_0
  int kv_block_size = 16;      // KV is allocated in blocks of this many tokens
  int kv_recent_f32 = 0;       // F32 copy of the last N positions (with F16/Q8_0 storage)
  int n_sequences = 1;         // sequences decoded together, each with its own KV
};

// From any parameter struct with SessionParams' field names (keeps this header off engine/).
template <class P>
MemoryPlanParams memory_plan_params(const P& sp, int n_sequences = 1) {
  MemoryPlanParams p;
  p.n_ctx = sp.n_ctx;
  p.n_batch = sp.n_batch;
  p.n_threads = sp.n_threads;
  p.kv_type = sp.kv_type;
  p.kv_block_size = sp.kv_block_size;
  p.kv_recent_f32 = sp.kv_recent_f32;
  p.n_sequences = n_sequences;
  return p;
}

struct MemoryPlan {
  uint64_t weights = 0;       // model file (mapped: page cache, counted in full)
  uint64_t kv_per_token = 0;  // 2 * n_layer * n_kv_head * row bytes of head_dim elements
  uint64_t kv_at_ctx = 0;     // whole blocks covering n_ctx, every sequence, plus F32 copies
  uint64_t scratch = 0;       // activations of one n_batch pass, scores, logits, tokenizer
  uint64_t total = 0;         // weights + kv_at_ctx + scratch
  uint64_t machine_ram = 0;   // MemTotal; 0 when unknown (then fits stays true)
  uint64_t headroom = 0;      // left to the OS and other processes
  bool fits = true;           // total <= machine_ram - headroom
  int n_ctx = 0;
  DType kv_type = DType::F32;
};

// "MemTotal:  3884596 kB" of a /proc/meminfo text, in bytes; 0 when absent.
inline uint64_t parse_meminfo_total(std::string_view text) { return parse_meminfo_field(text, "MemTotal"); }

// This machine's RAM from /proc/meminfo (plain stdio: glibc, musl and OpenHarmony alike); 0 if unreadable.
inline uint64_t machine_ram_bytes() { return parse_meminfo_total(read_small_file("/proc/meminfo")); }

inline uint64_t memory_headroom_bytes(uint64_t ram) {
  return std::max(kMemoryPlanMinHeadroomBytes, ram / kMemoryPlanHeadroomDivisor);
}

// Bytes of one token's keys and values over all layers (PagedKvCache::bytes_per_token).
inline uint64_t kv_bytes_per_token(const LlamaConfig& c, DType kv_type) {
  check_kv_storage(kv_type, c.head_dim);
  return uint64_t(2) * uint64_t(c.n_layer) * uint64_t(c.n_head_kv) * dtype_row_bytes(kv_type, c.head_dim);
}

// KV bytes for n_ctx tokens: whole blocks, per sequence, plus the F32 copy of recent positions.
inline uint64_t kv_bytes_at_ctx(const LlamaConfig& c, const MemoryPlanParams& p) {
  const uint64_t bs = uint64_t(std::max(1, p.kv_block_size));
  const uint64_t blocks = (uint64_t(std::max(0, p.n_ctx)) + bs - 1) / bs;
  const uint64_t shadow = p.kv_type == DType::F32 ? 0
                          : uint64_t(std::max(0, p.kv_recent_f32)) * 2 * c.n_layer * uint64_t(c.kv_dim()) * sizeof(float);
  return uint64_t(std::max(1, p.n_sequences)) * (blocks * bs * kv_bytes_per_token(c, p.kv_type) + shadow);
}

// LlamaModel's per-pass buffers for min(n_batch, n_ctx) tokens: x, xn, tmp, q, k, v, gate, up,
// rope tables (fp32), quantized activation rows, one score row per thread, one logits row; plus
// the tokenizer's tables.
inline uint64_t scratch_bytes(const LlamaConfig& c, const MemoryPlanParams& p) {
  const uint64_t n = uint64_t(std::max(1, std::min(p.n_batch, std::max(1, p.n_ctx))));
  const uint64_t d = uint64_t(c.n_embd), qd = uint64_t(c.q_dim()), kvd = uint64_t(c.kv_dim()), ff = uint64_t(c.n_ff);
  const uint64_t per_token_f32 = d + std::max(d, qd) + d + qd + 2 * kvd + 2 * ff + uint64_t(c.n_rot);
  const uint64_t widest = std::max({d, qd, ff});
  const uint64_t quant_row = widest % 256 == 0 ? dtype_row_bytes(DType::Q8_K, int64_t(widest))
                                               : dtype_row_bytes(DType::F32, int64_t(widest));
  const unsigned hw = std::thread::hardware_concurrency();
  const uint64_t threads = uint64_t(p.n_threads > 0 ? p.n_threads : (hw ? int(hw) : 1));
  const uint64_t seqs = uint64_t(std::max(1, p.n_sequences));
  return n * per_token_f32 * sizeof(float) + n * quant_row + threads * uint64_t(std::max(0, p.n_ctx)) * sizeof(float) +
         seqs * (uint64_t(c.n_vocab) + d) * sizeof(float) + uint64_t(c.n_vocab) * kMemoryPlanVocabBytesPerToken;
}

// The plan; machine_ram 0 = unknown (nothing is judged).
inline MemoryPlan plan_memory(const LlamaConfig& c, uint64_t weight_bytes, const MemoryPlanParams& p,
                              uint64_t machine_ram) {
  EDGELLM_CHECK(c.n_layer > 0 && c.n_head_kv > 0 && c.head_dim > 0, "plan_memory: model shape not set (n_layer ",
                c.n_layer, ", n_head_kv ", c.n_head_kv, ", head_dim ", c.head_dim, ")");
  MemoryPlan m;
  m.weights = weight_bytes;
  m.kv_per_token = kv_bytes_per_token(c, p.kv_type);
  m.kv_at_ctx = kv_bytes_at_ctx(c, p);
  m.scratch = scratch_bytes(c, p);
  m.total = m.weights + m.kv_at_ctx + m.scratch;
  m.machine_ram = machine_ram;
  m.headroom = machine_ram ? memory_headroom_bytes(machine_ram) : 0;
  m.fits = machine_ram == 0 || m.total + m.headroom <= machine_ram;
  m.n_ctx = p.n_ctx;
  m.kv_type = p.kv_type;
  return m;
}

inline MemoryPlan plan_memory(const LlamaConfig& c, uint64_t weight_bytes, const MemoryPlanParams& p) {
  return plan_memory(c, weight_bytes, p, machine_ram_bytes());
}

// Largest context (whole KV blocks, at most n_ctx_train when known) whose plan fits machine_ram;
// 0 when not even one block fits.
inline int max_context_that_fits(const LlamaConfig& c, uint64_t weight_bytes, MemoryPlanParams p, uint64_t machine_ram) {
  const int bs = std::max(1, p.kv_block_size);
  const int cap = c.n_ctx_train > 0 ? c.n_ctx_train : (1 << 20);
  int lo = 0, hi = cap / bs;  // in blocks; fitting is monotonic in the context
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    p.n_ctx = mid * bs;
    if (plan_memory(c, weight_bytes, p, machine_ram).fits) lo = mid; else hi = mid - 1;
  }
  return lo * bs;
}

inline std::string format_bytes(uint64_t b) {
  char s[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(s, sizeof s, "%.2f GiB", double(b) / double(uint64_t(1) << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(s, sizeof s, "%.1f MiB", double(b) / double(uint64_t(1) << 20));
  else std::snprintf(s, sizeof s, "%.1f KiB", double(b) / 1024.0);
  return s;
}

// One "memory plan:" line, and a "warning:" line naming the numbers when the plan does not fit.
inline std::string format_memory_plan(const MemoryPlan& m) {
  std::string s = "memory plan: weights " + format_bytes(m.weights) + " (mapped) + KV " + dtype_name(m.kv_type) + " " +
                  format_bytes(m.kv_per_token) + "/token = " + format_bytes(m.kv_at_ctx) + " at -c " +
                  std::to_string(m.n_ctx) + " + scratch " + format_bytes(m.scratch) + " = " + format_bytes(m.total);
  s += m.machine_ram ? "; RAM " + format_bytes(m.machine_ram) + " (MemTotal), " + format_bytes(m.headroom) + " kept free\n"
                     : "; RAM unknown (no /proc/meminfo)\n";
  if (!m.fits)
    s += "warning: the model does not fit this machine: " + format_bytes(m.total) + " needed (weights " +
         format_bytes(m.weights) + ", KV " + format_bytes(m.kv_at_ctx) + " at -c " + std::to_string(m.n_ctx) +
         ", scratch " + format_bytes(m.scratch) + ") but RAM " + format_bytes(m.machine_ram) + " minus " +
         format_bytes(m.headroom) + " for the system leaves " +
         format_bytes(m.machine_ram > m.headroom ? m.machine_ram - m.headroom : 0) +
         "; use a smaller quant type, a smaller -c or --kv-type q8_0\n";
  return s;
}

// ---- weight bytes of a LLaMA shape at a mix, without a file (DEPLOY.md's table) ----

namespace detail {

// model_tensors(c) (the architecture table's required rows) as GGUF tensor infos with their
// F16/F32 source types, and the order llama.cpp writes them in (indices into the first).
inline std::vector<GgufTensorInfo> tensor_infos(const std::vector<ModelTensor>& mt) {
  std::vector<GgufTensorInfo> ts;
  for (const ModelTensor& m : mt) {
    GgufTensorInfo t;
    t.name = m.name;
    t.n_dims = m.n_out > 1 ? 2 : 1;
    t.ne[0] = m.n_in;
    t.ne[1] = m.n_out;
    t.type = t.n_dims == 2 ? DType::F16 : DType::F32;
    ts.push_back(t);
  }
  return ts;
}
inline std::vector<size_t> tensor_file_order(const std::vector<GgufTensorInfo>& ts) {
  std::vector<std::string> names;
  for (const auto& t : ts) names.push_back(t.name);
  return llama_tensor_order(names);
}

}  // namespace detail

// The tensors a GGUF of this shape and architecture holds (model_tensors: the table's rows, the
// families' biases and Q/K norms included), in llama.cpp's order, with their F16/F32 source types.
inline std::vector<GgufTensorInfo> llama_tensor_list(const LlamaConfig& c) {
  const std::vector<GgufTensorInfo> ts = detail::tensor_infos(model_tensors(c));
  std::vector<GgufTensorInfo> ordered;
  for (size_t i : detail::tensor_file_order(ts)) ordered.push_back(ts[i]);
  return ordered;
}

// The type of each of `tensors` (source types as given) after quantizing with `mix`, by the
// per-tensor rules of edgellm-quantize (quant/mix.hpp).
inline std::vector<DType> mix_tensor_types(const std::vector<GgufTensorInfo>& tensors, const LlamaConfig& c,
                                           const QuantMix& mix) {
  std::vector<MixTensor> mt;
  std::vector<DType> cur;
  for (const auto& t : tensors) {
    mt.push_back(mix_tensor(&c.arch_entry(), t.name, int(t.n_dims), t.ne[0]));
    cur.push_back(t.type);
  }
  return plan_quant_mix(mix, mix_model_info(c), mt, cur, false);
}

// Sum of tensor bytes after quantizing `tensors` with `mix` (mix_tensor_types). The file adds
// metadata (vocabulary) on top.
inline uint64_t mix_tensor_bytes(const std::vector<GgufTensorInfo>& tensors, const LlamaConfig& c, const QuantMix& mix) {
  const std::vector<DType> types = mix_tensor_types(tensors, c, mix);
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i)
    total += uint64_t(dtype_row_bytes(types[i], tensors[i].ne[0])) * uint64_t(tensors[i].n_elements() / tensors[i].ne[0]);
  return total;
}

inline uint64_t llama_weight_bytes(const LlamaConfig& c, const QuantMix& mix) {
  return mix_tensor_bytes(llama_tensor_list(c), c, mix);
}

}  // namespace edgellm
