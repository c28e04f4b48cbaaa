// UTF-8 decoding/encoding with llama.cpp's leniency (an invalid byte becomes U+FFFD and decoding
// resumes at the next byte), Unicode category flags for the BPE pre-tokenizers, and GPT-2's
// byte <-> printable-code-point mapping. Standard library only.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/text/unicode_tables.hpp"

namespace edgellm {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the UTF-8 sequence announced by a lead byte (1 for stray continuation bytes), as
// llama.cpp computes it from the high nibble; callers clamp it to the bytes left.
inline size_t utf8_len(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

// Decodes one code point at `offset`; returns false (offset unchanged) on a malformed sequence.
// Only lead/continuation bit patterns are checked, like llama.cpp (overlongs are accepted).
inline bool utf8_decode_one(std::string_view s, size_t& offset, uint32_t& cpt) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[offset + i]); };
  const auto cont = [&](size_t i) { return offset + i < s.size() && (b(i) & 0xC0) == 0x80; };
  const uint8_t c0 = b(0);
  if (!(c0 & 0x80)) { cpt = c0; offset += 1; return true; }
  if (!(c0 & 0x40)) return false;
  if (!(c0 & 0x20)) {
    if (!cont(1)) return false;
    cpt = ((c0 & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    offset += 2;
    return true;
  }
  if (!(c0 & 0x10)) {
    if (!cont(1) || !cont(2)) return false;
    cpt = ((c0 & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    offset += 3;
    return true;
  }
  if (!(c0 & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) return false;
    cpt = ((c0 & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    offset += 4;
    return true;
  }
  return false;
}

// All code points of `s`; each malformed byte yields one U+FFFD.
inline std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t offset = 0;
  while (offset < s.size()) {
    uint32_t cpt = 0;
    if (utf8_decode_one(s, offset, cpt)) {
      out.push_back(cpt);
    } else {
      out.push_back(kReplacementChar);
      ++offset;
    }
  }
  return out;
}

// Appends the UTF-8 encoding of `cpt` (values past U+10FFFF, which only malformed 4-byte input
// can produce, are written as U+FFFD).
inline void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt > 0x10FFFF) cpt = kReplacementChar;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

// ---- category flags ----

struct CpFlags {
  bool letter = false;      // \p{L}
  bool number = false;      // \p{N}
  bool punctuation = false; // \p{P}
  bool whitespace = false;  // \s (Unicode White_Space)
};

namespace detail {
template <size_t N>
inline bool in_ranges(const unicode_data::CodepointRange (&r)[N], uint32_t cpt) {
  const auto* it = std::upper_bound(r, r + N, cpt,
                                    [](uint32_t c, const unicode_data::CodepointRange& x) { return c < x.first; });
  return it != r && cpt <= (it - 1)->last;
}

inline bool is_unicode_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

inline CpFlags compute_flags(uint32_t c) {
  CpFlags f;
  f.letter = in_ranges(unicode_data::kLetterRanges, c);
  f.number = in_ranges(unicode_data::kNumberRanges, c);
  f.punctuation = in_ranges(unicode_data::kPunctuationRanges, c);
  f.whitespace = is_unicode_whitespace(c);
  return f;
}
}  // namespace detail

inline CpFlags cpt_flags(uint32_t cpt) {
  // ASCII dominates real text: answer it from a table built once.
  static const std::array<CpFlags, 128> kAscii = [] {
    std::array<CpFlags, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = detail::compute_flags(c);
    return t;
  }();
  return cpt < 128 ? kAscii[cpt] : detail::compute_flags(cpt);
}

// ---- GPT-2 byte-level encoding: every byte maps to a printable code point ----

// byte -> code point: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order.
inline const std::array<uint32_t, 256>& gpt2_byte_to_cpt() {
  static const std::array<uint32_t, 256> kMap = [] {
    std::array<uint32_t, 256> m{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      m[b] = printable ? b : next++;
    }
    return m;
  }();
  return kMap;
}

// code point -> byte, or -1 when the code point is not part of the encoding.
inline int gpt2_cpt_to_byte(uint32_t cpt) {
  static const std::array<int16_t, 324> kInv = [] {
    std::array<int16_t, 324> m{};
    m.fill(-1);
    const auto& fwd = gpt2_byte_to_cpt();
    for (int b = 0; b < 256; ++b) m[fwd[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return m;
  }();
  return cpt < kInv.size() ? kInv[cpt] : -1;
}

}  // namespace edgellm
