// SentencePiece-style BPE (llama.cpp's llm_tokenizer_spm): start from UTF-8 characters, merge the
// adjacent pair whose joined text is the highest-scoring token, fall back to <0xXX> byte tokens.
// O(n log n) in the text length. Used by text/tokenizer.hpp.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <queue>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/text/symbol_merge.hpp"
#include "edgellm/text/unicode.hpp"
#include "edgellm/text/vocab.hpp"

namespace edgellm {
namespace spm {

// Token for one raw byte: "<0xXX>", else the byte itself as a token, else unk.
inline int32_t byte_to_token(const Vocab& v, uint8_t byte) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "<0x%02X>", byte);
  int32_t id = v.find_token(buf);
  if (id == kTokenNull) id = v.find_token(std::string(1, static_cast<char>(byte)));
  if (id == kTokenNull) id = v.unk;
  if (id == kTokenNull) throw_error("SPM vocabulary has no token for byte ", static_cast<int>(byte), " and no unk token");
  return id;
}

// Tokenizes already-escaped text (spaces replaced by U+2581) and appends the ids.
inline void encode(const Vocab& v, const std::string& text, std::vector<int32_t>& out) {
  // Highest score first.
  std::string joined;
  const std::vector<::edgellm::detail::MergeSym> syms = ::edgellm::detail::merge_symbols<float>(
      text,
      [&](std::string_view l, std::string_view r, float* score) {
        joined.assign(l.data(), l.size() + r.size());  // r starts right after l
        const int32_t id = v.find_token(joined);
        if (id == kTokenNull) return false;
        *score = v.scores[static_cast<size_t>(id)];
        return true;
      },
      [](float a, float b) { return a > b; });
  // Every merged symbol is a token by construction; a single character may not be, and then
  // goes out as byte tokens.
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[static_cast<size_t>(i)].next) {
    const ::edgellm::detail::MergeSym& s = syms[static_cast<size_t>(i)];
    const int32_t id = v.find_token(text.substr(s.off, s.n));
    if (id != kTokenNull) {
      out.push_back(id);
      continue;
    }
    for (size_t j = 0; j < s.n; ++j) out.push_back(byte_to_token(v, static_cast<uint8_t>(text[s.off + j])));
  }
}

}  // namespace spm
}  // namespace edgellm
