// Tokenizer: text <-> token ids, byte-exact with llama.cpp (llama_tokenize / llama_token_to_piece /
// llama_detokenize) for SPM ("llama") and byte-level BPE ("gpt2") vocabularies, and StreamDecoder,
// which turns generated ids into complete UTF-8 text as they arrive.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/text/bpe.hpp"
#include "edgellm/text/spm.hpp"
#include "edgellm/text/unicode.hpp"
#include "edgellm/text/vocab.hpp"

namespace edgellm {

class Tokenizer {
 public:
  explicit Tokenizer(Vocab vocab) : v_(std::move(vocab)) { build_pieces(); }

  // Ids for `text`. add_bos: add the BOS (and EOS) tokens the vocabulary asks for
  // (tokenizer.ggml.add_bos_token / add_eos_token), like llama.cpp's add_special.
  // parse_special: control tokens written in the text (e.g. "<s>") become their ids; without it
  // only user-defined tokens are matched, as llama.cpp does.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const {
    return encode_fragments(text, add_bos, partition(text, parse_special, {}));
  }

  // encode(text, add_bos, parse_special = true), except that control tokens are not matched
  // where they would overlap a protected byte range (offset, length): there their text is
  // tokenized as text (user-defined tokens still match, as with parse_special off). For a
  // rendered chat whose messages' contents are protected: the template's markup is parsed, what
  // a user wrote is not. Equal to encode() when no protected range holds control-token text.
  std::vector<int32_t> encode_protected(std::string_view text, bool add_bos,
                                        const std::vector<std::pair<size_t, size_t>>& protected_ranges) const {
    return encode_fragments(text, add_bos, partition(text, true, protected_ranges));
  }

  // The text of one token (llama_token_to_piece with lstrip 0). Control and unknown tokens are
  // empty unless `special`.
  std::string token_to_piece(int32_t id, bool special = false) const {
    check_id(id);
    const uint32_t attr = v_.attrs[static_cast<size_t>(id)];
    if (!special && (attr & (token_attr::kUnknown | token_attr::kControl))) return {};
    return pieces_[static_cast<size_t>(id)];
  }

  // Text of a sequence (llama_detokenize). The first piece loses one leading space when the
  // vocabulary adds a space prefix; remove_special drops a leading BOS / trailing EOS the
  // vocabulary adds; unparse_special renders control tokens' text.
  std::string decode(const std::vector<int32_t>& ids, bool remove_special = false, bool unparse_special = false) const {
    size_t b = 0, e = ids.size();
    bool remove_space = v_.add_space_prefix;
    if (remove_special && v_.add_bos && e > b && ids[b] == v_.bos) {
      remove_space = false;  // llama.cpp keeps the space when it drops the BOS
      ++b;
    }
    if (remove_special && v_.add_eos && e > b && ids[e - 1] == v_.eos) --e;
    std::string text;
    for (size_t i = b; i < e; ++i) {
      std::string piece = token_to_piece(ids[i], unparse_special);
      if (remove_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
      remove_space = false;
      text += piece;
    }
    if (v_.clean_spaces) clean_spaces(text);
    return text;
  }

  const Vocab& vocab() const { return v_; }
  int32_t n_vocab() const { return v_.n_tokens(); }
  int32_t bos() const { return v_.bos; }
  int32_t eos() const { return v_.eos; }
  int32_t eot() const { return v_.eot; }
  bool add_bos() const { return v_.add_bos; }
  bool is_eog(int32_t id) const { return std::binary_search(v_.eog_ids.begin(), v_.eog_ids.end(), id); }
  bool is_control(int32_t id) const {
    return v_.valid_id(id) && (v_.attrs[static_cast<size_t>(id)] & token_attr::kControl);
  }

 private:
  struct Fragment {
    int32_t token;  // kTokenNull: raw text [off, off + len) of the input
    size_t off, len;
  };

  std::vector<int32_t> encode_fragments(std::string_view text, bool add_bos, const std::vector<Fragment>& frags) const {
    std::vector<int32_t> out;
    if (add_bos && v_.add_bos) out.push_back(v_.bos);
    if (v_.type == VocabType::Spm) {
      bool prev_special = true;  // text at the start or after a special token gets the space prefix
      std::string buf;
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        buf.clear();
        if (v_.add_space_prefix && prev_special) buf.push_back(' ');
        buf.append(text.substr(f.off, f.len));
        spm::encode(v_, escape_spaces(buf), out);
        prev_special = false;
      }
    } else {
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          out.push_back(f.token);
          continue;
        }
        for (const std::string& w : bpe::pre_tokenize(text.substr(f.off, f.len), v_.pre_type))
          bpe::encode_word(v_, w, out);
      }
    }
    if (add_bos && v_.add_eos) out.push_back(v_.eos);
    return out;
  }

  void check_id(int32_t id) const {
    if (!v_.valid_id(id)) throw_error("token id ", id, " out of range [0, ", v_.n_tokens(), ")");
  }

  static std::string escape_spaces(const std::string& s) {
    std::string out;
    out.reserve(s.size() + s.size() / 2);
    for (char c : s) {
      if (c == ' ')
        out += "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
      else
        out.push_back(c);
    }
    return out;
  }
  static std::string unescape_spaces(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      if (s.compare(i, 3, "\xE2\x96\x81") == 0) {
        out.push_back(' ');
        i += 3;
      } else {
        out.push_back(s[i++]);
      }
    }
    return out;
  }
  static bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

  // llama.cpp's tokenizer_st_partition: special tokens, longest first, cut the raw fragments;
  // strip flags eat the whitespace next to a token.
  // A control token is not matched where it overlaps a protected range (offset, length).
  std::vector<Fragment> partition(std::string_view text, bool parse_special,
                                  const std::vector<std::pair<size_t, size_t>>& protected_ranges) const {
    auto is_protected = [&](size_t b, size_t e) {
      for (const auto& r : protected_ranges)
        if (b < r.first + r.second && r.first < e) return true;
      return false;
    };
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({kTokenNull, 0, text.size()});
    std::vector<Fragment> next;
    for (int32_t id : v_.special_tokens) {
      const uint32_t attr = v_.attrs[static_cast<size_t>(id)];
      if (!parse_special && (attr & (token_attr::kControl | token_attr::kUnknown))) continue;
      const std::string& tok = v_.tokens[static_cast<size_t>(id)];
      next.clear();
      for (const Fragment& f : frags) {
        if (f.token != kTokenNull) {
          next.push_back(f);
          continue;
        }
        size_t off = f.off, len = f.len;
        const bool control = (attr & (token_attr::kControl | token_attr::kUnknown)) != 0;
        while (len > 0) {
          size_t m = text.substr(0, off + len).find(tok, off);
          while (control && m != std::string_view::npos && is_protected(m, m + tok.size()))
            m = text.substr(0, off + len).find(tok, m + 1);
          if (m == std::string_view::npos) {
            next.push_back({kTokenNull, off, len});
            break;
          }
          size_t left_len = m - off;
          if (attr & token_attr::kLstrip)
            while (left_len > 0 && is_space(text[off + left_len - 1])) --left_len;
          if (left_len > 0) next.push_back({kTokenNull, off, left_len});
          next.push_back({id, 0, 0});
          size_t r_off = m + tok.size();
          size_t r_len = off + len - r_off;
          if (attr & token_attr::kRstrip)
            while (r_len > 0 && is_space(text[r_off])) ++r_off, --r_len;
          off = r_off;
          len = r_len;
        }
      }
      frags.swap(next);
    }
    return frags;
  }

  // GPT-2 byte decoding of a BPE token's text (llama_decode_text).
  static std::string bpe_decode_text(const std::string& t) {
    std::string out;
    for (uint32_t cpt : utf8_to_cpts(t)) {
      const int b = gpt2_cpt_to_byte(cpt);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
        continue;
      }
      std::string utf8;
      append_utf8(utf8, cpt);
      out += "[UNK_BYTE_0x";
      char hex[4];
      for (char c : utf8) {
        std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
        out += hex;
      }
      out += t + "]";
    }
    return out;
  }

  static char byte_token_value(const std::string& t) {
    // "<0xXX>"
    if (t.size() != 6) return 0;
    return static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16));
  }

  void build_pieces() {
    pieces_.resize(v_.tokens.size());
    for (size_t id = 0; id < v_.tokens.size(); ++id) {
      const std::string& t = v_.tokens[id];
      const uint32_t attr = v_.attrs[id];
      std::string& p = pieces_[id];
      if (attr & (token_attr::kUnknown | token_attr::kControl | token_attr::kUserDefined))
        p = t;
      else if (attr & token_attr::kNormal)
        p = v_.type == VocabType::Spm ? unescape_spaces(t) : bpe_decode_text(t);
      else if (attr & token_attr::kByte)
        p = std::string(1, byte_token_value(t));
    }
  }

  // llama.cpp's clean-up of BPE output, three in-place passes: " ?", " !", " .", " ," lose the
  // space; " ' " loses both spaces; " 's", " 'm", " 're", " 've" lose the space.
  static void clean_spaces(std::string& t) {
    size_t n = t.size();
    auto run = [&](auto&& step) {  // step(i, total&) -> writes t[total++]
      const size_t n0 = n;
      size_t total = n0 ? 1 : 0;
      for (size_t i = 1; i < n0; ++i) step(i, n0, total);
      n = total;
    };
    run([&](size_t& i, size_t, size_t& total) {
      const char x = t[i];
      if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
      t[total++] = x;
    });
    run([&](size_t& i, size_t n0, size_t& total) {
      const char x = t[i];
      if (x == '\'' && i + 1 < n0 && t[i - 1] == ' ' && t[i + 1] == ' ') {
        --total;       // the space before
        t[++i] = '\0';  // and the one after, which must not match again
      }
      t[total++] = x;
    });
    run([&](size_t& i, size_t n0, size_t& total) {
      const char x = t[i];
      if (t[i - 1] == ' ' && x == '\'' && i + 1 < n0) {
        const char x1 = t[i + 1];
        if (x1 == 's' || x1 == 'm') {
          --total;
        } else if (i + 2 < n0) {
          const char x2 = t[i + 2];
          if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
        }
      }
      t[total++] = x;
    });
    t.resize(n);
  }

  Vocab v_;
  std::vector<std::string> pieces_;  // [n_vocab] piece text with special tokens rendered
};

// Text streamed out with a tail held back: removes all but the last `keep` bytes of pending and
// returns them.
inline std::string release_all_but(std::string& pending, size_t keep) {
  std::string out = pending.substr(0, pending.size() - keep);
  pending.erase(0, pending.size() - keep);
  return out;
}

// Streams generated tokens as text: push() returns only complete UTF-8 characters and holds back
// a multibyte sequence split across tokens; flush() returns what is left (possibly invalid).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool special = false) : tok_(&tok), special_(special) {}

  std::string push(int32_t id) {
    pending_ += tok_->token_to_piece(id, special_);
    return release_all_but(pending_, incomplete_tail(pending_));
  }
  std::string flush() { return release_all_but(pending_, 0); }

 private:
  // Bytes at the end of `s` that start a UTF-8 sequence not yet complete (0 if none).
  static size_t incomplete_tail(const std::string& s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 4 && back <= n; ++back) {
      const auto c = static_cast<uint8_t>(s[n - back]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
      size_t need = 1;
      if ((c & 0xE0) == 0xC0) need = 2;
      else if ((c & 0xF0) == 0xE0) need = 3;
      else if ((c & 0xF8) == 0xF0) need = 4;
      return need > back ? back : 0;
    }
    return 0;
  }

  const Tokenizer* tok_;
  bool special_;
  std::string pending_;
};

}  // namespace edgellm
