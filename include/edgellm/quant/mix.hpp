// Quantization mixes: llama.cpp-compatible names (Q4_K_M, Q3_K_S, Q8_0, F16 ...) -> general.file_type
// and the type of every tensor, chosen by the same rules as llama-quantize (output and some attn_v /
// ffn_down kept at more bits). Pure planning: no tensor data is touched here. Includes core/ only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"

namespace edgellm {

// A mix: its name, the general.file_type value llama.cpp writes (enum llama_ftype) and the type
// most tensors get.
struct QuantMix {
  const char* name;
  int32_t file_type;
  DType base;
  const char* description;
};

inline const std::vector<QuantMix>& quant_mixes() {
  static const std::vector<QuantMix> mixes = {
      {"F32", 0, DType::F32, "no quantization"},
      {"F16", 1, DType::F16, "2-D weights as fp16"},
      {"BF16", 32, DType::BF16, "2-D weights as bf16"},
      {"Q4_0", 2, DType::Q4_0, "4.5 bpw, output q6_K"},
      {"Q4_1", 3, DType::Q4_1, "5.0 bpw, output q6_K"},
      {"Q5_0", 8, DType::Q5_0, "5.5 bpw, output q6_K"},
      {"Q5_1", 9, DType::Q5_1, "6.0 bpw, output q6_K"},
      {"Q8_0", 7, DType::Q8_0, "8.5 bpw"},
      {"Q2_K", 10, DType::Q2_K, "q2_K, attn_v q3_K/q4_K, ffn_down and attn_output q3_K"},
      {"Q2_K_S", 21, DType::Q2_K, "q2_K, attn_v q4_K with GQA >= 4"},
      {"Q3_K_S", 11, DType::Q3_K, "q3_K everywhere but the output"},
      {"Q3_K_M", 12, DType::Q3_K, "q3_K, attn_v q5_K/q4_K, attn_output and ffn_down q4_K"},
      {"Q3_K_L", 13, DType::Q3_K, "q3_K, attn_v, attn_output and ffn_down q5_K"},
      {"Q4_K_S", 14, DType::Q4_K, "q4_K, first attn_v and ffn_down q5_K"},
      {"Q4_K_M", 15, DType::Q4_K, "q4_K, half of attn_v and ffn_down q6_K"},
      {"Q5_K_S", 16, DType::Q5_K, "q5_K everywhere but the output"},
      {"Q5_K_M", 17, DType::Q5_K, "q5_K, half of attn_v and ffn_down q6_K"},
      {"Q6_K", 18, DType::Q6_K, "q6_K"},
  };
  return mixes;
}

namespace detail {
inline bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'a' && x <= 'z') x = char(x - 'a' + 'A');
    if (y >= 'a' && y <= 'z') y = char(y - 'a' + 'A');
    if (x != y) return false;
  }
  return true;
}
inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
}  // namespace detail

// The mix called `name` (case-insensitive; Q3_K / Q4_K / Q5_K mean their _M mix as in llama-quantize),
// or nullptr.
inline const QuantMix* find_quant_mix(std::string_view name) {
  if (detail::iequal(name, "Q3_K")) name = "Q3_K_M";
  if (detail::iequal(name, "Q4_K")) name = "Q4_K_M";
  if (detail::iequal(name, "Q5_K")) name = "Q5_K_M";
  for (const auto& m : quant_mixes())
    if (detail::iequal(name, m.name)) return &m;
  return nullptr;
}

inline const QuantMix& quant_mix(std::string_view name) {
  const QuantMix* m = find_quant_mix(name);
  if (!m) {
    std::string names;
    for (const auto& x : quant_mixes()) names += std::string(names.empty() ? "" : ", ") + x.name;
    throw_error("unknown quantization type '", std::string(name), "' (expected one of ", names, ")");
  }
  return *m;
}

// Whether a tensor is a weight matrix a mix converts: 2-D or more, named "*weight", not a norm,
// not an expert router (llama.cpp keeps those in their original type).
inline bool is_quantizable_tensor(const std::string& name, int n_dims) {
  const std::string_view n = name;
  if (n.size() < 6 || n.substr(n.size() - 6) != "weight") return false;
  if (n_dims < 2) return false;
  return !detail::contains(n, "_norm.weight") && !detail::contains(n, "ffn_gate_inp.weight") &&
         !detail::contains(n, "attn_rel_b.weight") && n != "position_embd.weight" && n != "token_types.weight";
}

// What the per-tensor rules need to know about the model.
struct MixModelInfo {
  std::string arch = "llama";
  int n_layer = 0;
  int n_head = 1;
  int n_head_kv = 1;
  int n_expert = 0;
  bool has_output = true;  // false: tied embeddings, token_embd plays the output's role
  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};

// One tensor as the planner sees it (file order matters: attn_v / ffn_down are counted in order).
struct MixTensor {
  std::string name;
  int n_dims = 2;
  int64_t ne0 = 0;  // row length
};

// Chooses tensor types one tensor at a time, in file order, like llama.cpp's llama_tensor_get_type
// (its counters of attn_v and ffn_down tensors seen so far decide which layers get more bits).
class MixPlanner {
 public:
  MixPlanner(const QuantMix& mix, const MixModelInfo& info, int n_attention_wv, bool pure)
      : mix_(mix), info_(info), n_attention_wv_(n_attention_wv), pure_(pure) {}

  // Type for the next tensor, or `current` when the tensor stays as it is (norms, 1-D, F32 mix).
  DType next(const MixTensor& t, DType current) {
    if (!is_quantizable_tensor(t.name, t.n_dims)) return current;
    if (mix_.base == DType::F32) return current == DType::F32 ? current : DType::F32;
    DType type = mix_.base;
    if (!pure_ && dtype_is_quantized(mix_.base)) return choose(t, type);
    return fallback(t, type);
  }
  // Tensors that got another type because their rows do not split into the chosen type's blocks.
  int n_fallback() const { return n_fallback_; }

  // llama.cpp's "use more bits" layers: the first and last eighth and every third in between.
  static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
  }

 private:
  bool is(const char* name) const { return mix_.name == std::string_view(name); }
  int ftype() const { return mix_.file_type; }

  DType choose(const MixTensor& t, DType type) {
    const std::string& name = t.name;
    if (name == "output.weight" || (!info_.has_output && name == "token_embd.weight")) {
      if (t.ne0 % 256 != 0) type = DType::Q8_0;
      else if (type != DType::Q8_0) type = DType::Q6_K;
    } else if (name == "token_embd.weight") {
      // only the IQ/TQ mixes (not offered here) change the embeddings
    } else if (detail::contains(name, "attn_v.weight")) {
      type = attn_v(type);
      ++i_attention_wv_;
    } else if (detail::contains(name, "ffn_down")) {
      type = ffn_down(type, i_ffn_down_, info_.n_layer);
      ++i_ffn_down_;
    } else if (detail::contains(name, "attn_output.weight")) {
      type = attn_output(type);
    }
    return fallback(t, type);
  }

  DType attn_v(DType type) const {
    const int gqa = info_.n_gqa();
    if (is("Q2_K")) type = gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (is("Q2_K_S") && gqa >= 4) type = DType::Q4_K;
    else if (is("Q3_K_M")) type = i_attention_wv_ < 2 ? DType::Q5_K : DType::Q4_K;
    else if (is("Q3_K_L")) type = DType::Q5_K;
    else if ((is("Q4_K_M") || is("Q5_K_M")) && use_more_bits(i_attention_wv_, n_attention_wv_)) type = DType::Q6_K;
    else if (is("Q4_K_S") && i_attention_wv_ < 4) type = DType::Q5_K;
    // 70B Llama: 8 query heads share each attn_v row, so a few more bits there are nearly free.
    const bool is_70b = info_.arch == "llama" && info_.n_layer == 80 && info_.n_head != info_.n_head_kv;
    if (is_70b && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
    if (info_.n_expert == 8) type = DType::Q8_0;
    return type;
  }

  DType ffn_down(DType type, int i_layer, int n_layer) const {
    const bool falcon = info_.arch == "falcon";
    if (is("Q2_K")) type = DType::Q3_K;
    else if (is("Q2_K_S")) { if (i_layer < n_layer / 8) type = DType::Q4_K; }
    else if (is("Q3_K_M"))
      type = i_layer < n_layer / 16 ? DType::Q5_K : (!falcon || use_more_bits(i_layer, n_layer)) ? DType::Q4_K : DType::Q3_K;
    else if (is("Q3_K_L")) type = falcon ? DType::Q4_K : DType::Q5_K;
    else if (is("Q4_K_M")) {
      if (falcon) {
        if (i_layer < n_layer / 16) type = DType::Q6_K;
        else if (use_more_bits(i_layer, n_layer)) type = DType::Q5_K;
      } else if (use_more_bits(i_layer, n_layer)) {
        type = DType::Q6_K;
      }
    } else if (is("Q5_K_M") && use_more_bits(i_layer, n_layer)) type = DType::Q6_K;
    else if (is("Q4_K_S") && !falcon && i_layer < n_layer / 8) type = DType::Q5_K;
    return type;
  }

  DType attn_output(DType type) const {
    if (info_.arch == "falcon") return is("Q3_K_L") ? DType::Q4_K : type;
    if (info_.n_expert == 8) {
      if (is("Q2_K") || is("Q4_K_S") || is("Q4_K_M")) type = DType::Q5_K;
      return type;
    }
    if (is("Q2_K")) type = DType::Q3_K;
    else if (is("Q3_K_M")) type = DType::Q4_K;
    else if (is("Q3_K_L")) type = DType::Q5_K;
    return type;
  }

  // Rows that do not split into the chosen type's blocks get a type with smaller blocks.
  DType fallback(const MixTensor& t, DType type) {
    if (t.ne0 % dtype_block_size(type) == 0) return type;
    ++n_fallback_;
    switch (type) {
      case DType::Q2_K:
      case DType::Q3_K: type = DType::IQ4_NL; break;
      case DType::Q4_K: type = DType::Q5_0; break;
      case DType::Q5_K: type = DType::Q5_1; break;
      case DType::Q6_K: type = DType::Q8_0; break;
      default: type = DType::F16; break;  // llama.cpp gives up here; a 16-bit tensor still runs
    }
    // IQ4_NL has no quantizer here; q5_0 keeps its 32-element blocks and more bits.
    if (type == DType::IQ4_NL) type = DType::Q5_0;
    if (t.ne0 % dtype_block_size(type) != 0) type = DType::F16;
    return type;
  }

  const QuantMix& mix_;
  MixModelInfo info_;
  int n_attention_wv_;
  bool pure_;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int n_fallback_ = 0;
};

// The order llama-quantize writes (and plans) tensors in: tensors outside the layers first, then
// layer by layer ("blk.N." numerically), by name within each group. Returns indices into `names`.
inline std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names) {
  auto layer = [](const std::string& n) {
    if (n.compare(0, 4, "blk.") != 0) return -1L;
    char* end = nullptr;
    const long l = std::strtol(n.c_str() + 4, &end, 10);
    return (end != n.c_str() + 4 && *end == '.') ? l : -1L;
  };
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const long la = layer(names[a]), lb = layer(names[b]);
    return la != lb ? la < lb : names[a] < names[b];
  });
  return order;
}

// Types for all tensors of a model, given in the order they are planned (llama_tensor_order).
// n_fallback (optional) receives the number of tensors whose rows forced a smaller-block type. current[i] is tensor i's type in the source file.
inline std::vector<DType> plan_quant_mix(const QuantMix& mix, const MixModelInfo& info, const std::vector<MixTensor>& tensors,
                                         const std::vector<DType>& current, bool pure, int* n_fallback = nullptr) {
  EDGELLM_CHECK(tensors.size() == current.size(), "plan_quant_mix: ", tensors.size(), " tensors but ", current.size(),
                " current types");
  int n_attention_wv = 0;
  for (const auto& t : tensors) n_attention_wv += detail::contains(t.name, "attn_v.weight") ? 1 : 0;
  MixPlanner planner(mix, info, n_attention_wv, pure);
  std::vector<DType> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) out.push_back(planner.next(tensors[i], current[i]));
  if (n_fallback) *n_fallback = planner.n_fallback();
  return out;
}

}  // namespace edgellm
