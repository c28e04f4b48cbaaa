// libFuzzer target for the tokenizers: arbitrary bytes (invalid UTF-8, huge inputs, special-token
// look-alikes spliced in) through encode / decode / StreamDecoder of SPM and BPE vocabularies.
// Ids must be in range, valid UTF-8 must round-trip, and nothing may crash or throw.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/tools/synthetic.hpp>
#include <edgellm/text/tokenizer.hpp>

namespace {

using edgellm::Tokenizer;

// One vocabulary under test and the texts of its special tokens, truncated and extended
// ("<s", "<s>>", "<|endoftext|") so the partitioner sees near misses as well as matches.
struct Subject {
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> specials;
};

// ../shared/data of this checkout (EDGELLM_FUZZ_DATA overrides): the real vocabularies are used
// when present; the synthetic SPM vocabulary always is.
std::string data_dir() {
  if (const char* d = std::getenv("EDGELLM_FUZZ_DATA")) return d;
  std::string f = __FILE__;  // <repo>/tests/fuzz/fuzz_tokenizer.cpp
  for (int i = 0; i < 3; ++i) f = f.substr(0, f.find_last_of('/'));
  return f + "/../shared/data";
}

Subject make_subject(const edgellm::GgufFile& f) {
  Subject s;
  s.tok.reset(new Tokenizer(edgellm::Vocab::from_gguf(f)));
  const edgellm::Vocab& v = s.tok->vocab();
  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    const uint32_t a = v.attrs[static_cast<size_t>(id)];
    if (!(a & (edgellm::token_attr::kControl | edgellm::token_attr::kUserDefined | edgellm::token_attr::kUnknown)))
      continue;
    const std::string& t = v.tokens[static_cast<size_t>(id)];
    s.specials.push_back(t);
    if (t.size() > 1) s.specials.push_back(t.substr(0, t.size() - 1));
    s.specials.push_back(t + t.back());
    if (s.specials.size() > 512) break;
  }
  s.specials.push_back("<0x41>");  // byte-token spelling, not a special token
  s.specials.push_back("\xE2\x96\x81");  // U+2581, SPM's space
  return s;
}

std::vector<Subject>& subjects() {
  static std::vector<Subject> all = [] {
    std::vector<Subject> v;
    v.push_back(make_subject(edgellm::GgufFile::from_bytes(
        edgellm::build_synthetic_gguf(edgellm::synthetic_preset("tiny"), edgellm::DType::Q8_0), "synthetic.gguf")));
    const std::string dir = data_dir() + "/vocab/";
    for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-llama3pre.gguf"}) {
      struct stat st;
      if (::stat((dir + name).c_str(), &st) == 0) v.push_back(make_subject(edgellm::GgufFile::open(dir + name)));
    }
    return v;
  }();
  return all;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<uint8_t>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<Subject>& subs = subjects();
  const uint8_t flags = data[0];
  const Subject& sub = subs[(flags & 3) % subs.size()];
  const Tokenizer& tok = *sub.tok;
  const bool add_bos = flags & 4, parse_special = flags & 8, splice = flags & 16, special_pieces = flags & 32;

  // Byte 0x01 followed by k becomes special-token look-alike k when splicing.
  std::string text;
  for (size_t i = 1; i < size; ++i) {
    if (splice && data[i] == 1 && i + 1 < size && !sub.specials.empty()) {
      text += sub.specials[data[++i] % sub.specials.size()];
      continue;
    }
    text.push_back(static_cast<char>(data[i]));
  }

  // Huge inputs: a text that starts with FF FE is repeated to 256 KiB (libFuzzer's lengths grow slowly).
  if (text.size() > 2 && text.compare(0, 2, "\xFF\xFE") == 0) {
    const std::string unit = text.substr(2);
    text.clear();
    while (text.size() < (256u << 10)) text += unit;
  }

  try {
    const std::vector<int32_t> ids = tok.encode(text, add_bos, parse_special);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.n_vocab()) fail("encode returned an id outside the vocabulary");
    const std::string back = tok.decode(ids, flags & 64, flags & 128);

    // StreamDecoder: the pieces, joined, are the tokens' texts; at most an unfinished character
    // (3 bytes) is held back at any time.
    edgellm::StreamDecoder dec(tok, special_pieces);
    std::string streamed, joined;
    for (int32_t id : ids) {
      streamed += dec.push(id);
      joined += tok.token_to_piece(id, special_pieces);
      if (joined.size() - streamed.size() > 3) fail("StreamDecoder held back more than a partial character");
    }
    streamed += dec.flush();
    if (streamed != joined) fail("StreamDecoder text differs from the tokens' pieces");

    // Valid UTF-8 without special tokens and without SPM's space symbol comes back unchanged. (An
    // SPM vocabulary without a "\u2581" token spells spaces with its bytes, which decode to
    // "\u2581", as in llama.cpp: the synthetic one.)
    const edgellm::Vocab& v = tok.vocab();
    const bool spaces_round_trip = v.type != edgellm::VocabType::Spm || v.token_to_id.count("\xE2\x96\x81");
    if (!parse_special && !v.clean_spaces && spaces_round_trip && valid_utf8(text) &&
        text.find("\xE2\x96\x81") == std::string::npos) {
      const std::vector<int32_t> plain = tok.encode(text, false, false);
      if (tok.decode(plain) != text) fail("valid UTF-8 text did not round-trip");
    }

    // Arbitrary ids (two bytes each) decode without failing when in range, throw Error otherwise.
    std::vector<int32_t> raw;
    for (size_t i = 1; i + 1 < size && raw.size() < 4096; i += 2)
      raw.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) % tok.n_vocab()));
    (void)tok.decode(raw, true, special_pieces);
    edgellm::StreamDecoder dec2(tok, true);
    for (int32_t id : raw) (void)dec2.push(id);
    (void)dec2.flush();
  } catch (const edgellm::Error& e) {
    std::fprintf(stderr, "fuzz_tokenizer: unexpected Error: %s\n", e.what());
    std::abort();
  }
  try {
    (void)tok.token_to_piece(tok.n_vocab());
    fail("token_to_piece accepted an id past the vocabulary");
  } catch (const edgellm::Error&) {
  }
  return 0;
}
