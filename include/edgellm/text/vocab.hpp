// Vocab: the tokenizer's data read from GGUF `tokenizer.ggml.*` metadata (tokens, scores, token
// types, BPE merges, special ids, flags), with llama.cpp's defaults and per-token attributes.
// Depends on gguf/reader.hpp only; the algorithms live in text/tokenizer.hpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"

namespace edgellm {

enum class VocabType { Spm, Bpe };  // tokenizer.ggml.model "llama" / "gpt2"

// BPE pre-tokenizer split rules (tokenizer.ggml.pre), grouped as llama.cpp groups them.
enum class PreTokenizer {
  Default,    // "default" or absent: punctuation runs, GPT-2 rule, number runs, digit triples
  Gpt2,       // 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,     // Llama 3 rule: case-insensitive contractions, \p{N}{1,3}, newline handling
  Qwen2,      // the Llama 3 rule with single digits
  Starcoder,  // every digit alone, then the GPT-2 rule
};

// GGUF token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

// llama.cpp's token attribute bits (derived from the type, plus strip flags and overrides).
namespace token_attr {
inline constexpr uint32_t kUndefined = 0;
inline constexpr uint32_t kUnknown = 1u << 0;
inline constexpr uint32_t kUnused = 1u << 1;
inline constexpr uint32_t kNormal = 1u << 2;
inline constexpr uint32_t kControl = 1u << 3;
inline constexpr uint32_t kUserDefined = 1u << 4;
inline constexpr uint32_t kByte = 1u << 5;
inline constexpr uint32_t kLstrip = 1u << 7;
inline constexpr uint32_t kRstrip = 1u << 8;
}  // namespace token_attr

inline constexpr int32_t kTokenNull = -1;

struct Vocab {
  VocabType type = VocabType::Spm;
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre ("" when absent)
  PreTokenizer pre_type = PreTokenizer::Default;

  std::vector<std::string> tokens;  // [n_vocab] token text (SPM: U+2581 for space; BPE: byte-encoded)
  std::vector<float> scores;        // [n_vocab] SPM merge scores (0 when absent)
  std::vector<TokenType> types;     // [n_vocab]
  std::vector<uint32_t> attrs;      // [n_vocab] token_attr bits
  std::vector<std::string> merges;  // [n_merges] BPE "left right", rank = index

  int32_t bos = kTokenNull, eos = kTokenNull, eot = kTokenNull, eom = kTokenNull;
  int32_t unk = kTokenNull, pad = kTokenNull, sep = kTokenNull;
  std::vector<int32_t> eog_ids;  // sorted: ids that end generation (eos, eot, eom, known end texts)

  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SPM: prefix a space to text that starts a fragment
  bool ignore_merges = false;     // BPE: a pre-token that is a whole token skips the merges
  bool clean_spaces = false;      // decode: remove the space before ?!., and some contractions

  std::unordered_map<std::string, int32_t> token_to_id;
  std::unordered_map<std::string, int32_t> merge_rank;  // key: left + '\xff' + right
  std::vector<int32_t> special_tokens;  // control / user-defined / unknown ids, longest text first

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  bool valid_id(int32_t id) const { return id >= 0 && id < n_tokens(); }

  int32_t find_token(const std::string& text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? kTokenNull : it->second;
  }
  static std::string merge_key(std::string_view left, std::string_view right) {
    std::string k;
    k.reserve(left.size() + right.size() + 1);
    k.append(left).push_back('\xff');  // 0xFF never occurs in UTF-8 text
    k.append(right);
    return k;
  }
  int find_merge(std::string_view left, std::string_view right) const {
    auto it = merge_rank.find(merge_key(left, right));
    return it == merge_rank.end() ? -1 : it->second;
  }

  static Vocab from_gguf(const GgufFile& f);
};

namespace detail {

inline uint32_t attr_from_type(int64_t t) {
  switch (t) {
    case 1: return token_attr::kNormal;
    case 2: return token_attr::kUnknown;
    case 3: return token_attr::kControl;
    case 4: return token_attr::kUserDefined;
    case 5: return token_attr::kUnused;
    case 6: return token_attr::kByte;
    default: return token_attr::kUndefined;
  }
}

// Maps tokenizer.ggml.pre to a rule set and its flags, as llama.cpp's loader does.
inline void set_pre_tokenizer(Vocab& v, const std::string& where) {
  const std::string& p = v.pre;
  auto any = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (p == n) return true;
    return false;
  };
  v.clean_spaces = true;
  if (p.empty() || p == "default") {
    v.pre_type = PreTokenizer::Default;
  } else if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    v.pre_type = PreTokenizer::Llama3;
    v.ignore_merges = true;
    v.add_bos = true;
  } else if (any({"dbrx", "smaug-bpe"})) {
    v.pre_type = PreTokenizer::Llama3;
  } else if (any({"glm4", "chatglm-bpe"})) {
    v.pre_type = PreTokenizer::Llama3;
    v.bos = kTokenNull;
  } else if (any({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
                  "mellum", "mpt", "olmo", "jais", "exaone4"})) {
    v.pre_type = PreTokenizer::Gpt2;
  } else if (p == "trillion") {
    v.pre_type = PreTokenizer::Gpt2;
    v.clean_spaces = false;
  } else if (any({"qwen2", "deepseek-r1-qwen", "hunyuan"})) {
    v.pre_type = PreTokenizer::Qwen2;
    v.clean_spaces = false;
  } else if (any({"stablelm2", "megrez"})) {
    v.pre_type = PreTokenizer::Qwen2;
  } else if (any({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"})) {
    v.pre_type = PreTokenizer::Starcoder;
  } else if (any({"command-r", "smollm"})) {
    v.pre_type = PreTokenizer::Starcoder;
    v.clean_spaces = false;
  } else {
    throw_error(where, "key 'tokenizer.ggml.pre': unsupported pre-tokenizer '", p, "'");
  }
}

// Reads an optional special-token id: absent keeps the default; -1 / 0xFFFFFFFF means "none
// given" (as converters write it) and also keeps the default; any other id must be in range.
inline void read_special_id(const GgufFile& f, const std::string& where, const char* key, int32_t n_vocab,
                            int32_t& id) {
  if (id >= n_vocab) id = kTokenNull;  // a default outside a small vocabulary is disabled
  if (!f.has(key)) return;
  const int64_t v = f.get_int(key);
  if (v == -1 || v == 0xFFFFFFFFll) return;
  if (v < 0 || v >= n_vocab) throw_error(where, "key '", key, "': token id ", v, " out of range [0, ", n_vocab, ")");
  id = static_cast<int32_t>(v);
}

inline bool is_eot_text(const std::string& t) {
  static const char* const kNames[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                       "<|end_of_text|>", "<EOT>", "_<EOT>", "<end_of_utterance>"};
  for (const char* n : kNames)
    if (t == n) return true;
  return false;
}

inline bool is_eog_text(const std::string& t) { return is_eot_text(t) || t == "<|eom_id|>"; }

// EOT/EOM detection by text and the end-of-generation set, as llama.cpp does; tokens found this
// way are forced to control type.
inline void detect_end_tokens(Vocab& v) {
  const int32_t n = v.n_tokens();
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = v.tokens[static_cast<size_t>(id)];
    uint32_t& attr = v.attrs[static_cast<size_t>(id)];
    if (v.eot == kTokenNull && is_eot_text(t)) {
      v.eot = id;
      attr |= token_attr::kControl;
    }
    if (v.eom == kTokenNull && t == "<|eom_id|>") {
      v.eom = id;
      attr |= token_attr::kControl;
    }
    if (is_eog_text(t)) {
      v.eog_ids.push_back(id);
      attr |= token_attr::kControl;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id != kTokenNull) v.eog_ids.push_back(id);
  std::sort(v.eog_ids.begin(), v.eog_ids.end());
  v.eog_ids.erase(std::unique(v.eog_ids.begin(), v.eog_ids.end()), v.eog_ids.end());
}

// Special tokens matched before tokenization, longest text first (ties by id for determinism);
// Phi-3 models strip spaces to the right of them, as llama.cpp's per-model attributes do.
inline void build_special_tokens(Vocab& v, const GgufFile& f) {
  for (int32_t id = 0; id < v.n_tokens(); ++id)
    if (v.attrs[static_cast<size_t>(id)] & (token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown))
      v.special_tokens.push_back(id);
  std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(), [&](int32_t a, int32_t b) {
    return v.tokens[static_cast<size_t>(a)].size() > v.tokens[static_cast<size_t>(b)].size();
  });

  std::string name = f.get_string_or("general.name", "");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : v.special_tokens) v.attrs[static_cast<size_t>(id)] |= token_attr::kRstrip;
    auto set = [&](const char* text, bool on) {
      const int32_t id = v.find_token(text);
      if (id == kTokenNull) return;
      uint32_t& a = v.attrs[static_cast<size_t>(id)];
      a = on ? (a | token_attr::kRstrip) : (a & ~token_attr::kRstrip);
    };
    set("</s>", true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, false);
  }
}

}  // namespace detail

inline Vocab Vocab::from_gguf(const GgufFile& f) {
  const std::string where = "file " + f.path() + ": ";
  Vocab v;
  if (!f.has("tokenizer.ggml.model")) throw_error(where, "key 'tokenizer.ggml.model' not found (no vocabulary)");
  v.model = f.get_string("tokenizer.ggml.model");
  v.pre = f.get_string_or("tokenizer.ggml.pre", "");
  if (v.model == "llama") {
    v.type = VocabType::Spm;
    v.bos = 1;
    v.eos = 2;
    v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else if (v.model == "gpt2") {
    v.type = VocabType::Bpe;
    v.bos = 11;
    v.eos = 11;
    detail::set_pre_tokenizer(v, where);
  } else {
    throw_error(where, "key 'tokenizer.ggml.model': unsupported tokenizer '", v.model, "' (expected 'llama' or 'gpt2')");
  }
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);

  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto n = static_cast<int64_t>(v.tokens.size());
  if (n == 0) throw_error(where, "key 'tokenizer.ggml.tokens': empty vocabulary");
  if (n > INT32_MAX) throw_error(where, "key 'tokenizer.ggml.tokens': ", n, " tokens exceed int32");
  const auto check_len = [&](const char* key, size_t len) {
    if (static_cast<int64_t>(len) < n)
      throw_error(where, "key '", key, "': ", len, " entries, expected ", n, " (one per token)");
  };
  v.scores.assign(static_cast<size_t>(n), 0.0f);
  if (const GgufValue* sv = f.find("tokenizer.ggml.scores")) {
    // float32 as written by converters; llama.cpp also accepts int32 scores
    if (sv->type == GgufType::ARRAY && gguf_type_is_int(sv->arr_type)) {
      const std::vector<int64_t> s = f.get_int_array("tokenizer.ggml.scores");
      check_len("tokenizer.ggml.scores", s.size());
      for (int64_t i = 0; i < n; ++i) v.scores[static_cast<size_t>(i)] = static_cast<float>(s[static_cast<size_t>(i)]);
    } else {
      const std::vector<float> s = f.get_float_array("tokenizer.ggml.scores");
      check_len("tokenizer.ggml.scores", s.size());
      std::copy(s.begin(), s.begin() + n, v.scores.begin());
    }
  }
  v.types.assign(static_cast<size_t>(n), TokenType::Normal);
  v.attrs.assign(static_cast<size_t>(n), token_attr::kNormal);
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> t = f.get_int_array("tokenizer.ggml.token_type");
    check_len("tokenizer.ggml.token_type", t.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t ti = t[static_cast<size_t>(i)];
      v.types[static_cast<size_t>(i)] = (ti >= 0 && ti <= 6) ? static_cast<TokenType>(ti) : TokenType::Undefined;
      v.attrs[static_cast<size_t>(i)] = detail::attr_from_type(ti);
    }
  }
  v.token_to_id.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) {
    std::string& w = v.tokens[static_cast<size_t>(i)];
    if (w.empty()) w = "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's placeholder
    auto ins = v.token_to_id.emplace(w, i);
    if (!ins.second)
      throw_error(where, "key 'tokenizer.ggml.tokens': duplicate token '", w, "' at ids ", ins.first->second, " and ", i);
  }

  if (v.type == VocabType::Bpe) {
    if (!f.has("tokenizer.ggml.merges")) throw_error(where, "key 'tokenizer.ggml.merges' not found (BPE vocabulary)");
    v.merges = f.get_string_array("tokenizer.ggml.merges");
    v.merge_rank.reserve(v.merges.size());
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const std::string& m = v.merges[i];
      const size_t sp = m.find(' ', 1);
      const std::string_view l = sp == std::string::npos ? std::string_view() : std::string_view(m).substr(0, sp);
      const std::string_view r = sp == std::string::npos ? std::string_view() : std::string_view(m).substr(sp + 1);
      v.merge_rank.emplace(merge_key(l, r), static_cast<int>(i));  // the first rank of a pair wins
    }
  }

  const auto nv = static_cast<int32_t>(n);
  detail::read_special_id(f, where, "tokenizer.ggml.bos_token_id", nv, v.bos);
  detail::read_special_id(f, where, "tokenizer.ggml.eos_token_id", nv, v.eos);
  detail::read_special_id(f, where, "tokenizer.ggml.eot_token_id", nv, v.eot);
  detail::read_special_id(f, where, "tokenizer.ggml.eom_token_id", nv, v.eom);
  detail::read_special_id(f, where, "tokenizer.ggml.unknown_token_id", nv, v.unk);
  detail::read_special_id(f, where, "tokenizer.ggml.seperator_token_id", nv, v.sep);
  detail::read_special_id(f, where, "tokenizer.ggml.padding_token_id", nv, v.pad);
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = f.get_bool_or("tokenizer.ggml.add_eos_token", v.add_eos);
  if (v.add_bos && v.bos == kTokenNull)
    throw_error(where, "key 'tokenizer.ggml.add_bos_token' is true, but no valid 'tokenizer.ggml.bos_token_id'");
  if (v.add_eos && v.eos == kTokenNull)
    throw_error(where, "key 'tokenizer.ggml.add_eos_token' is true, but no valid 'tokenizer.ggml.eos_token_id'");

  detail::detect_end_tokens(v);
  detail::build_special_tokens(v, f);
  return v;
}

}  // namespace edgellm
