// Quantization mixes: llama.cpp-compatible names (Q4_K_M, Q3_K_S, Q8_0, F16 ...) -> general.file_type
// and the type of every tensor, chosen by the same rules as llama-quantize (output and some attn_v /
// ffn_down kept at more bits). Pure planning: no tensor data is touched here. Includes core/ only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
      // i-quants and ternary types (llama-quantize refuses IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
      // IQ2_M, IQ3_XXS and Q2_K_S without an importance matrix: mix_requires_imatrix)
      {"IQ2_XXS", 19, DType::IQ2_XXS, "2.06 bpw, attn_v / token_embd q2_K, output q5_K"},
      {"IQ2_XS", 20, DType::IQ2_XS, "2.31 bpw, attn_v / token_embd q2_K, output q5_K"},
      {"IQ2_S", 28, DType::IQ2_XS, "2.5 bpw: iq2_xs, attn_v / attn_output / token_embd iq3_s, output q5_K"},
      {"IQ2_M", 29, DType::IQ2_S, "2.7 bpw: iq2_s, attn_v / attn_output / token_embd iq3_s, output q5_K"},
      {"IQ1_S", 24, DType::IQ1_S, "1.56 bpw, attn_output iq2_xxs, attn_v / token_embd q2_K, output q5_K"},
      {"IQ1_M", 31, DType::IQ1_M, "1.75 bpw, attn_output iq2_xxs, attn_v / token_embd q2_K, output q5_K"},
      {"IQ3_XXS", 23, DType::IQ3_XXS, "3.06 bpw, attn_q / attn_k iq2_s, attn_output / token_embd iq3_s"},
      {"IQ3_XS", 22, DType::IQ3_S, "3.3 bpw: iq3_s, attn_q / attn_k and middle ffn_up / ffn_gate iq3_xxs"},
      {"IQ3_S", 26, DType::IQ3_S, "3.44 bpw"},
      {"IQ3_M", 27, DType::IQ3_S, "3.66 bpw: iq3_s, attn_v / attn_output q4_K"},
      {"IQ4_NL", 25, DType::IQ4_NL, "4.50 bpw non-linear"},
      {"IQ4_XS", 30, DType::IQ4_XS, "4.25 bpw non-linear"},
      {"TQ1_0", 36, DType::TQ1_0, "1.69 bpw ternary, token_embd q4_K"},
      {"TQ2_0", 37, DType::TQ2_0, "2.06 bpw ternary, token_embd q4_K"},
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
  bool has_imatrix = false;  // an importance matrix is given (some IQ3_XXS / IQ4 / Q4_0 / Q5_0 rules use it)
  int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 1; }
};

// llama.cpp's broad tensor categories (tensor_get_category): what the per-tensor rules key on.
enum class MixCategory { Output, TokenEmbd, AttnQkv, AttnKvB, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

// A tensor's category from its name alone, by llama-quantize's substrings. Only the fallback for a
// tensor no architecture row describes (a file of a family edgellm does not run, which must still
// quantize as llama-quantize does, and llama-quantize itself goes by the name): for a family of
// model/arch.hpp the category comes from the row (model/tensors.hpp arch_mix_category), so a
// renamed tensor keeps its rules.
inline MixCategory mix_category(const std::string& name) {
  using detail::contains;
  if (name == "output.weight") return MixCategory::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return MixCategory::TokenEmbd;
  if (contains(name, "attn_qkv.weight")) return MixCategory::AttnQkv;
  if (contains(name, "attn_kv_b.weight")) return MixCategory::AttnKvB;
  if (contains(name, "attn_v.weight")) return MixCategory::AttnV;
  if (contains(name, "attn_k.weight")) return MixCategory::AttnK;
  if (contains(name, "attn_q.weight")) return MixCategory::AttnQ;
  if (contains(name, "attn_output.weight")) return MixCategory::AttnOutput;
  if (contains(name, "ffn_up")) return MixCategory::FfnUp;
  if (contains(name, "ffn_gate")) return MixCategory::FfnGate;
  if (contains(name, "ffn_down")) return MixCategory::FfnDown;
  return MixCategory::Other;
}

// One tensor as the planner sees it (file order matters: attn_v / ffn_down are counted in order).
struct MixTensor {
  std::string name;
  int n_dims = 2;
  int64_t ne0 = 0;  // row length
  std::optional<MixCategory> category;  // from the architecture table; unset: mix_category(name)

  MixTensor() = default;
  MixTensor(std::string n, int dims = 2, int64_t row = 0, std::optional<MixCategory> c = std::nullopt)  // NOLINT: implicit
      : name(std::move(n)), n_dims(dims), ne0(row), category(c) {}
};

inline MixCategory mix_category(const MixTensor& t) { return t.category ? *t.category : mix_category(t.name); }

inline bool mix_category_is_attn_v(MixCategory c) {
  return c == MixCategory::AttnV || c == MixCategory::AttnQkv || c == MixCategory::AttnKvB;
}

// Whether llama-quantize refuses to write tensor `name` as `type` in `mix` without an importance
// matrix (tensor_requires_imatrix): the 1- to 3-bit grid types, and q2_K in a Q2_K_S file;
// never the embeddings or the output.
inline bool mix_requires_imatrix(const QuantMix& mix, const MixTensor& t, DType type) {
  const MixCategory c = mix_category(t);
  if (c == MixCategory::Output || c == MixCategory::TokenEmbd) return false;
  switch (type) {
    case DType::IQ3_XXS: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ1_M: case DType::IQ1_S:
      return true;
    case DType::Q2_K: return mix.file_type == 21;  // Q2_K_S
    default: return false;
  }
}

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
    if (!dtype_is_quantized(mix_.base)) return type;
    if (!pure_) type = choose(t, type);
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
  bool is_any(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (is(n)) return true;
    return false;
  }
  int gqa() const { return info_.n_gqa(); }
  bool falcon() const { return info_.arch == "falcon"; }
  // The 1- and 2-bit i-quant mixes, which share one set of rules.
  bool low_iq() const { return is_any({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"}); }

  // The layer a per-layer counter stands for: the counter itself, or for MoE models (whose
  // expert tensors are not in layer order) the number in the name.
  int layer_of(const std::string& name, int counter) const {
    if (info_.n_expert <= 1) return counter;
    int l = -1;
    if (name.compare(0, 4, "blk.") == 0) l = std::atoi(name.c_str() + 4);
    EDGELLM_CHECK(name.compare(0, 4, "blk.") == 0 && l >= 0 && l < info_.n_layer, "tensor '", name,
                  "': cannot tell its layer (expected blk.N. with N < ", info_.n_layer, ")");
    return l;
  }

  DType choose(const MixTensor& t, DType type) {
    const std::string& name = t.name;
    const MixCategory c = mix_category(t);
    if (c == MixCategory::Output || (!info_.has_output && c == MixCategory::TokenEmbd)) return output(t, type);
    if (c == MixCategory::TokenEmbd) {
      if (is_any({"IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"})) type = DType::Q2_K;
      else if (is_any({"IQ2_S", "IQ2_M", "IQ3_XXS"})) type = DType::IQ3_S;
      else if (is_any({"TQ1_0", "TQ2_0"})) type = DType::Q4_K;
      return type;
    }
    if (low_iq()) return low_iq_rules(c, type);
    if (mix_category_is_attn_v(c)) {
      type = attn_v(type);
      ++i_attention_wv_;
      return type;
    }
    switch (c) {
      case MixCategory::AttnK:
        if (info_.n_expert == 8) type = DType::Q8_0;
        else if (is("IQ3_XS")) type = DType::IQ3_XXS;
        else if (is("IQ3_XXS")) type = DType::IQ2_S;
        return type;
      case MixCategory::AttnQ:
        if (is("IQ3_XS")) type = DType::IQ3_XXS;
        else if (is("IQ3_XXS")) type = DType::IQ2_S;
        return type;
      case MixCategory::FfnDown:
        type = ffn_down(type, layer_of(name, i_ffn_down_), info_.n_layer);
        ++i_ffn_down_;
        return type;
      case MixCategory::AttnOutput: return attn_output(type);
      case MixCategory::AttnQkv:
        if (is_any({"Q3_K_M", "Q3_K_L", "IQ3_M"})) type = DType::Q4_K;
        else if (is("Q4_K_M")) type = DType::Q5_K;
        else if (is("Q5_K_M")) type = DType::Q6_K;
        return type;
      case MixCategory::FfnGate:
      case MixCategory::FfnUp: {
        int& counter = c == MixCategory::FfnGate ? i_ffn_gate_ : i_ffn_up_;
        const int l = layer_of(name, counter), n = info_.n_layer;
        if (is("IQ3_XS") && l >= n / 8 && l < 7 * n / 8) type = DType::IQ3_XXS;
        ++counter;
        return type;
      }
      default: return type;
    }
  }

  DType output(const MixTensor& t, DType type) const {
    if (falcon() || t.ne0 % dtype_block_size(type) != 0) return DType::Q8_0;
    if (is_any({"IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"})) return DType::Q5_K;
    return type != DType::Q8_0 ? DType::Q6_K : type;
  }

  DType low_iq_rules(MixCategory c, DType type) {
    const bool iq2_sm = is_any({"IQ2_S", "IQ2_M"});
    if (mix_category_is_attn_v(c)) {
      if (gqa() >= 4 || info_.n_expert >= 4) type = DType::Q4_K;
      else type = iq2_sm ? DType::IQ3_S : DType::Q2_K;
      ++i_attention_wv_;
    } else if (info_.n_expert == 8 && c == MixCategory::AttnK) {
      type = DType::Q4_K;
    } else if (c == MixCategory::FfnDown) {
      if (i_ffn_down_ < info_.n_layer / 8) type = iq2_sm ? DType::IQ3_S : DType::Q2_K;
      ++i_ffn_down_;
    } else if (c == MixCategory::AttnOutput) {
      if (info_.n_expert == 8) type = DType::Q5_K;
      else if (is_any({"IQ1_S", "IQ1_M"})) type = DType::IQ2_XXS;
      else if (iq2_sm) type = DType::IQ3_S;
    }
    return type;
  }

  DType attn_v(DType type) const {
    if (is("Q2_K")) type = gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (is("Q2_K_S") && gqa() >= 4) type = DType::Q4_K;
    else if (is("IQ3_XXS")) type = gqa() >= 4 ? DType::Q4_K : !info_.has_imatrix ? DType::IQ3_S : DType::IQ3_XXS;
    else if (is_any({"IQ3_XS", "IQ3_S"}) && gqa() >= 4) type = DType::Q4_K;
    else if (is("IQ3_M")) type = DType::Q4_K;
    else if (is("Q3_K_M")) type = i_attention_wv_ < 2 ? DType::Q5_K : DType::Q4_K;
    else if (is("Q3_K_L")) type = DType::Q5_K;
    else if (is_any({"IQ4_NL", "IQ4_XS"}) && gqa() >= 4) type = DType::Q5_K;
    else if (is_any({"Q4_K_M", "Q5_K_M"}) && use_more_bits(i_attention_wv_, n_attention_wv_)) type = DType::Q6_K;
    else if (is("Q4_K_S") && i_attention_wv_ < 4) type = DType::Q5_K;
    // 70B Llama: 8 query heads share each attn_v row, so a few more bits there are nearly free.
    const bool is_70b = info_.arch == "llama" && info_.n_layer == 80 && info_.n_head != info_.n_head_kv;
    if (is_70b && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
    if (info_.n_expert == 8) type = DType::Q8_0;
    return type;
  }

  DType ffn_down(DType type, int i_layer, int n_layer) const {
    if (is("Q2_K")) type = DType::Q3_K;
    else if (is("Q2_K_S")) { if (i_layer < n_layer / 8) type = DType::Q4_K; }
    else if (is("IQ3_XXS") && !info_.has_imatrix) type = i_layer < n_layer / 8 ? DType::Q4_K : DType::Q3_K;
    else if (is("Q3_K_M"))
      type = i_layer < n_layer / 16 ? DType::Q5_K : (!falcon() || use_more_bits(i_layer, n_layer)) ? DType::Q4_K : DType::Q3_K;
    else if (is("IQ3_M") && (i_layer < n_layer / 8 || (info_.n_expert == 8 && use_more_bits(i_layer, n_layer))))
      type = DType::Q4_K;
    else if (is("Q3_K_L")) type = falcon() ? DType::Q4_K : DType::Q5_K;
    else if (is("Q4_K_M")) {
      if (falcon()) {
        type = i_layer < n_layer / 16 ? DType::Q6_K : use_more_bits(i_layer, n_layer) ? DType::Q5_K : DType::Q4_K;
      } else if (use_more_bits(i_layer, n_layer)) {
        type = DType::Q6_K;
      }
    } else if (i_layer < n_layer / 8 && is_any({"IQ4_NL", "IQ4_XS"}) && !info_.has_imatrix) type = DType::Q5_K;
    else if (is("Q5_K_M") && use_more_bits(i_layer, n_layer)) type = DType::Q6_K;
    else if (is("Q4_K_S") && !falcon() && i_layer < n_layer / 8) type = DType::Q5_K;
    else if (is_any({"Q4_0", "Q5_0"}) && info_.has_imatrix && i_layer < n_layer / 8)
      // guards the first ffn_down layers, which go astray even with a matrix (llama.cpp's note)
      type = is("Q4_0") ? DType::Q4_1 : DType::Q5_1;
    return type;
  }

  DType attn_output(DType type) const {
    if (falcon()) return is("Q3_K_L") ? DType::Q4_K : type;
    if (info_.n_expert == 8) {
      if (is_any({"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS"}))
        type = DType::Q5_K;
      return type;
    }
    if (is("Q2_K")) type = DType::Q3_K;
    else if (is("IQ3_XXS")) type = DType::IQ3_S;
    else if (is("Q3_K_M")) type = DType::Q4_K;
    else if (is("Q3_K_L")) type = DType::Q5_K;
    else if (is("IQ3_M")) type = DType::Q4_K;
    return type;
  }

  // Rows that do not split into the chosen type's blocks get a type with smaller blocks
  // (tensor_type_fallback); f16 when even those do not fit.
  DType fallback(const MixTensor& t, DType type) {
    if (t.ne0 % dtype_block_size(type) == 0) return type;
    ++n_fallback_;
    switch (type) {
      case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
      case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ4_XS:
        type = DType::IQ4_NL;
        break;
      case DType::Q2_K: case DType::Q3_K: case DType::TQ1_0: case DType::TQ2_0: type = DType::Q4_0; break;
      case DType::Q4_K: type = DType::Q5_0; break;
      case DType::Q5_K: type = DType::Q5_1; break;
      case DType::Q6_K: type = DType::Q8_0; break;
      default: break;  // a 32-element block type: f16 below
    }
    if (t.ne0 % dtype_block_size(type) != 0) type = DType::F16;
    return type;
  }

  const QuantMix& mix_;
  MixModelInfo info_;
  int n_attention_wv_;
  bool pure_;
  int i_attention_wv_ = 0;
  int i_ffn_down_ = 0;
  int i_ffn_gate_ = 0;
  int i_ffn_up_ = 0;
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
  for (const auto& t : tensors) n_attention_wv += mix_category_is_attn_v(mix_category(t)) ? 1 : 0;
  MixPlanner planner(mix, info, n_attention_wv, pure);
  std::vector<DType> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) out.push_back(planner.next(tensors[i], current[i]));
  if (n_fallback) *n_fallback = planner.n_fallback();
  return out;
}

}  // namespace edgellm
