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
  struct Sym {
    int prev, next;
    size_t off, n;
  };
  std::vector<Sym> syms;
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t n = std::min(utf8_len(text[off]), text.size() - off);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }
  struct Bigram {
    int left, right;
    float score;
    size_t size;
  };
  // Highest score first; among equal scores the leftmost pair.
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::string joined;
  auto add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Sym& a = syms[static_cast<size_t>(l)];
    const Sym& b = syms[static_cast<size_t>(r)];
    joined.assign(text, a.off, a.n + b.n);  // b starts right after a
    const int32_t id = v.find_token(joined);
    if (id == kTokenNull) return;
    queue.push({l, r, v.scores[static_cast<size_t>(id)], joined.size()});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) add(i - 1, i);
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Sym& l = syms[static_cast<size_t>(bg.left)];
    Sym& r = syms[static_cast<size_t>(bg.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // outdated pair
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = bg.left;
    add(l.prev, bg.left);
    add(bg.left, l.next);
  }
  // Every merged symbol is a token by construction; a single character may not be, and then
  // goes out as byte tokens.
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[static_cast<size_t>(i)].next) {
    const Sym& s = syms[static_cast<size_t>(i)];
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
