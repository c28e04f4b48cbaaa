// Byte-level BPE (llama.cpp's llm_tokenizer_bpe): the pre-tokenizer split rules written by hand
// over code points (no std::regex), GPT-2 byte encoding of each pre-token, then merges by rank.
// Used by text/tokenizer.hpp; depends on text/vocab.hpp and text/unicode.hpp.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/text/symbol_merge.hpp"
#include "edgellm/text/unicode.hpp"
#include "edgellm/text/vocab.hpp"

namespace edgellm {
namespace bpe {

// A split pass maps the code points and the current segment lengths to finer segment lengths;
// every code point stays in exactly one segment.
using Segments = std::vector<size_t>;

namespace detail {

// Walks one segment [ini, end) with out-of-segment positions reading as "nothing".
struct Cursor {
  const std::vector<uint32_t>& cpts;
  size_t ini, end;
  static constexpr uint32_t kOut = 0xFFFFFFFF;
  uint32_t cpt(size_t p) const { return (p >= ini && p < end) ? cpts[p] : kOut; }
  CpFlags flags(size_t p) const { return (p >= ini && p < end) ? cpt_flags(cpts[p]) : CpFlags{}; }
  bool in(size_t p) const { return p >= ini && p < end; }
};

inline bool is_lnw(const CpFlags& f) { return f.letter || f.number || f.whitespace; }
inline uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length of a contraction 's 't 're 've 'm 'll 'd at p (0 if none); case-insensitive for Llama 3.
inline size_t contraction_len(const Cursor& c, size_t p, bool ignore_case) {
  if (c.cpt(p) != '\'' || !c.in(p + 1)) return 0;
  auto low = [&](uint32_t x) { return ignore_case ? ascii_lower(x) : x; };
  const uint32_t n1 = low(c.cpt(p + 1));
  if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
  if (!c.in(p + 2)) return 0;
  const uint32_t n2 = low(c.cpt(p + 2));
  if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
  return 0;
}

// Whitespace run at p: its length, and the end of its last \r or \n (0 if none).
inline size_t whitespace_run(const Cursor& c, size_t p, size_t* last_newline_end) {
  size_t n = 0;
  *last_newline_end = 0;
  while (c.flags(p + n).whitespace) {
    const uint32_t x = c.cpt(p + n);
    if (x == '\r' || x == '\n') *last_newline_end = p + n + 1;
    ++n;
  }
  return n;
}

// Splits each segment of `in` (lengths over cpts) into the pieces of one pre-tokenizer regex:
// piece(c, p, emit) returns the end of the piece that starts at p (emit(end) first for any pieces
// it ends on the way).
template <class Piece>
inline Segments split_pieces(const std::vector<uint32_t>& cpts, const Segments& in, Piece piece) {
  Segments out;
  out.reserve(in.size());
  size_t start = 0;
  for (size_t len : in) {
    const Cursor c{cpts, start, start + len};
    size_t prev = start;
    auto emit = [&](size_t end) {
      if (end > prev) out.push_back(end - prev);
      prev = end;
    };
    for (size_t p = c.ini; p < c.end;) {
      p = piece(c, p, emit);
      emit(p);
    }
    start += len;
  }
  return out;
}

// The alternatives both regexes end with, at p: \s*[\r\n]+ (newline_runs only), \s+(?!\S) (the
// last space is left to the next word), \s+, or one code point. Returns the piece's end.
inline size_t whitespace_piece(const Cursor& c, size_t p, bool newline_runs) {
  size_t nl_end = 0;
  const size_t nws = whitespace_run(c, p, &nl_end);
  if (newline_runs && nl_end > 0) return nl_end;
  if (nws > 1 && c.in(p + nws)) return p + nws - 1;
  if (nws > 0) return p + nws;
  return p + 1;
}

}  // namespace detail

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline Segments split_gpt2(const std::vector<uint32_t>& cpts, const Segments& in) {
  return detail::split_pieces(cpts, in, [](const detail::Cursor& c, size_t p, auto&) -> size_t {
    const uint32_t x = c.cpt(p);
    if (const size_t k = detail::contraction_len(c, p, /*ignore_case=*/false)) return p + k;
    CpFlags f2 = x == ' ' ? c.flags(p + 1) : c.flags(p);
    const bool in_f2 = x == ' ' ? c.in(p + 1) : true;
    if (f2.letter || f2.number) {
      const bool letter = f2.letter;
      p += (x == ' ');
      while (letter ? c.flags(p).letter : c.flags(p).number) ++p;
      return p;
    }
    if (in_f2 && !detail::is_lnw(f2)) {  // punctuation, symbols and anything unassigned
      p += (x == ' ');
      while (c.in(p) && !detail::is_lnw(c.flags(p))) ++p;
      return p;
    }
    return detail::whitespace_piece(c, p, /*newline_runs=*/false);
  });
}

// Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+ ; Qwen2 is the same with \p{N} (max_digits = 1).
inline Segments split_llama3(const std::vector<uint32_t>& cpts, const Segments& in, size_t max_digits) {
  return detail::split_pieces(cpts, in, [max_digits](const detail::Cursor& c, size_t p, auto& emit) -> size_t {
    const uint32_t x = c.cpt(p);
    const CpFlags f = c.flags(p);
    if (const size_t k = detail::contraction_len(c, p, /*ignore_case=*/true)) return p + k;
    if (!(x == '\r' || x == '\n' || f.number) && (f.letter || c.flags(p + 1).letter)) {
      ++p;
      while (c.flags(p).letter) ++p;
      return p;
    }
    if (f.number) {
      size_t ini = p;
      while (c.flags(p).number) {
        if (++p - ini >= max_digits) {
          emit(p);
          ini = p;
        }
      }
      return p;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama.cpp tests the current code point for being in range)
    const CpFlags f2 = x == ' ' ? c.flags(p + 1) : f;
    if (!detail::is_lnw(f2)) {
      p += (x == ' ');
      while (c.in(p) && !detail::is_lnw(c.flags(p))) ++p;
      while (c.cpt(p) == '\r' || c.cpt(p) == '\n') ++p;
      return p;
    }
    return detail::whitespace_piece(c, p, /*newline_runs=*/true);
  });
}

// A std::regex-style pass for a one-code-point class `pred`: runs of matching code points (or
// each one alone when !runs) become segments, and so do the gaps between them.
template <class Pred>
inline Segments split_class(const std::vector<uint32_t>& cpts, const Segments& in, Pred pred, bool runs) {
  Segments out;
  out.reserve(in.size());
  size_t start = 0;
  for (size_t len : in) {
    const size_t end = start + len;
    size_t gap = start;
    for (size_t p = start; p < end;) {
      if (!pred(cpts[p])) {
        ++p;
        continue;
      }
      if (p > gap) out.push_back(p - gap);
      size_t q = p + 1;
      if (runs)
        while (q < end && pred(cpts[q])) ++q;
      out.push_back(q - p);
      p = gap = q;
    }
    if (end > gap) out.push_back(end - gap);
    start = end;
  }
  return out;
}

// [0-9][0-9][0-9]: groups of three ASCII digits, left to right, become segments.
inline Segments split_digit_triples(const std::vector<uint32_t>& cpts, const Segments& in) {
  Segments out;
  size_t start = 0;
  auto digit = [&](size_t p) { return cpts[p] >= '0' && cpts[p] <= '9'; };
  for (size_t len : in) {
    const size_t end = start + len;
    size_t gap = start;
    for (size_t p = start; p < end;) {
      if (p + 3 <= end && digit(p) && digit(p + 1) && digit(p + 2)) {
        if (p > gap) out.push_back(p - gap);
        out.push_back(3);
        p = gap = p + 3;
      } else {
        ++p;
      }
    }
    if (end > gap) out.push_back(end - gap);
    start = end;
  }
  return out;
}

// Splits text into byte-encoded pre-tokens by the vocabulary's rule set.
inline std::vector<std::string> pre_tokenize(std::string_view text, PreTokenizer rule) {
  const std::vector<uint32_t> cpts = utf8_to_cpts(text);
  Segments seg{cpts.size()};
  auto is_number = [](uint32_t c) { return cpt_flags(c).number; };
  switch (rule) {
    case PreTokenizer::Gpt2: seg = split_gpt2(cpts, seg); break;
    case PreTokenizer::Llama3: seg = split_llama3(cpts, seg, 3); break;
    case PreTokenizer::Qwen2: seg = split_llama3(cpts, seg, 1); break;
    case PreTokenizer::Starcoder:
      seg = split_class(cpts, seg, is_number, /*runs=*/false);
      seg = split_gpt2(cpts, seg);
      break;
    case PreTokenizer::Default: {
      auto punct = [](uint32_t c) {
        return cpt_flags(c).punctuation || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
               c == '~' || c == '|';
      };
      seg = split_class(cpts, seg, punct, /*runs=*/true);
      seg = split_gpt2(cpts, seg);
      seg = split_class(cpts, seg, is_number, /*runs=*/true);
      seg = split_digit_triples(cpts, seg);
      break;
    }
  }
  std::vector<std::string> words;
  words.reserve(seg.size());
  const auto& byte_map = gpt2_byte_to_cpt();
  size_t start = 0;
  std::string raw;
  for (size_t len : seg) {
    raw.clear();
    for (size_t i = start; i < start + len; ++i) append_utf8(raw, cpts[i]);
    std::string enc;
    enc.reserve(raw.size() * 2);
    for (char ch : raw) append_utf8(enc, byte_map[static_cast<uint8_t>(ch)]);
    words.push_back(std::move(enc));
    start += len;
  }
  return words;
}

// Merges one byte-encoded pre-token by rank and appends its ids.
inline void encode_word(const Vocab& v, const std::string& word, std::vector<int32_t>& out) {
  if (v.ignore_merges) {
    const int32_t id = v.find_token(word);
    if (id != kTokenNull) {
      out.push_back(id);
      return;
    }
  }
  // Lowest rank first.
  const std::vector<::edgellm::detail::MergeSym> syms = ::edgellm::detail::merge_symbols<int>(
      word,
      [&](std::string_view l, std::string_view r, int* rank) {
        *rank = v.find_merge(l, r);
        return *rank >= 0;
      },
      [](int a, int b) { return a < b; });
  for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[static_cast<size_t>(i)].next) {
    const ::edgellm::detail::MergeSym& s = syms[static_cast<size_t>(i)];
    const std::string piece = word.substr(s.off, s.n);
    const int32_t id = v.find_token(piece);
    if (id != kTokenNull) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {  // llama.cpp's fallback: single bytes that happen to be tokens
      const int32_t b = v.find_token(std::string(1, ch));
      if (b != kTokenNull) out.push_back(b);
    }
  }
}

}  // namespace bpe
}  // namespace edgellm
