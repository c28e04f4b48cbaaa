// Tokenizers (text/vocab.hpp, text/tokenizer.hpp): llama.cpp's test vectors for the shared vocab
// files, the reference prompts, round trips, streaming decode, special tokens, vocab validation.
#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/gguf/writer.hpp>
#include <edgellm/text/tokenizer.hpp>
#include <edgellm/text/vocab.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {

// Encoding 100 KB must stay far from quadratic: generous enough for sanitizer builds.



// Cases of a .inp file as llama.cpp's test-tokenizer-0 reads them: the text between separators
// "\n__ggml_vocab_test__\n" (so a case's own trailing newlines belong to it).
std::vector<std::string> read_cases(const std::string& path) {
  std::string s = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos;
  while ((pos = s.find(sep)) != std::string::npos) {
    out.push_back(s.substr(0, pos));
    s.erase(0, pos + sep.size());
  }
  return out;
}

// One line of ids per case.
std::vector<std::vector<int32_t>> read_expected(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    out.push_back(ids);
  }
  return out;
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

Tokenizer load(const std::string& path) { return Tokenizer(Vocab::from_gguf(GgufFile::open(path))); }

// decode(encode(x)) == x holds in llama.cpp unless the BPE clean-up rewrites the text.
bool round_trips_in_llama_cpp(const Tokenizer& t, const std::string& x) {
  if (!t.vocab().clean_spaces) return true;
  for (const char* p : {" ?", " !", " .", " ,", " '"})
    if (x.find(p) != std::string::npos) return false;
  return true;
}

void run_vocab_file(const std::string& name) {
  const std::string base = kData + "/vocab/" + name;
  EDGELLM_SKIP_WITHOUT(base);
  const Tokenizer tok = load(base);
  const auto cases = read_cases(base + ".inp");
  const auto expected = read_expected(base + ".out");
  REQUIRE(cases.size() == expected.size());
  REQUIRE(cases.size() > 0);
  size_t n_round_trips = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    CAPTURE(cases[i]);
    const auto ids = tok.encode(cases[i], /*add_bos=*/false, /*parse_special=*/false);
    CHECK_MESSAGE(ids == expected[i], "got" << ids_str(ids) << "\nexpected" << ids_str(expected[i]));
    if (round_trips_in_llama_cpp(tok, cases[i])) {
      CHECK(tok.decode(ids) == cases[i]);
      ++n_round_trips;
    }
  }
  MESSAGE(name, ": ", cases.size(), " cases, ", n_round_trips, " round trips");
}

}  // namespace

TEST_CASE("tokenizer: llama.cpp test vectors, SPM (llama)") { run_vocab_file("ggml-vocab-llama-spm.gguf"); }
TEST_CASE("tokenizer: llama.cpp test vectors, BPE gpt-2") { run_vocab_file("ggml-vocab-gpt-2.gguf"); }
TEST_CASE("tokenizer: llama.cpp test vectors, BPE llama-bpe (Llama 3 rules)") {
  run_vocab_file("ggml-vocab-gpt-2-llama3pre.gguf");
}

TEST_CASE("qwen: tokenizer: llama.cpp test vectors, BPE qwen2 pre-tokenizer (digits one by one)") {
  run_vocab_file("ggml-vocab-gpt-2-qwen2pre.gguf");
}

TEST_CASE("qwen: vocabulary of the qwen files: no BOS, <|im_end|> and <|endoftext|> end generation") {
  for (const char* arch : {"qwen2", "qwen3"}) {
    const std::string path = kData + "/qwen/models/tiny-" + arch + "-256-Q8_0.gguf";
    EDGELLM_SKIP_WITHOUT(path);
    const GgufFile f = GgufFile::open(path);
    const Vocab v = Vocab::from_gguf(f);
    const Tokenizer tok(Vocab::from_gguf(f));
    CHECK_FALSE(tok.add_bos());
    CHECK(v.pre_type == PreTokenizer::Qwen2);
    const int32_t im_end = v.find_token("<|im_end|>"), eot = v.find_token("<|endoftext|>"), im_start = v.find_token("<|im_start|>");
    REQUIRE(im_end >= 0);
    REQUIRE(eot >= 0);
    CHECK(tok.is_eog(im_end));  // the ChatML turn end (here also tokenizer.ggml.eos_token_id)
    CHECK(tok.is_eog(eot));
    CHECK_FALSE(tok.is_eog(im_start));
    CHECK(tok.encode("<|im_start|>user\n", false, true).front() == im_start);
  }
}

TEST_CASE("tokenizer: reference prompts (BOS where the vocab adds one, parse_special on)") {
  EDGELLM_SKIP_WITHOUT(kData + "/reference");
  // Every <folder>reference/<model>.p<N>.json, tokenized with <folder>models/<model>.gguf; the
  // folders: the llama files and qwen/ (qwen2 / qwen3: no BOS, ChatML specials).
  std::vector<std::pair<std::string, std::string>> refs;  // (json, gguf)
  for (const std::string folder : {"", "qwen/"}) {
    const std::string dir = kData + "/" + folder + "reference";
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (const dirent* e = ::readdir(d)) {
      const std::string f = e->d_name;
      const size_t p = f.rfind(".p");
      if (p == std::string::npos || f.size() < 5 || f.compare(f.size() - 5, 5, ".json") != 0) continue;
      refs.emplace_back(dir + "/" + f, kData + "/" + folder + "models/" + f.substr(0, p) + ".gguf");
    }
    ::closedir(d);
  }
  std::sort(refs.begin(), refs.end());
  int n_checked = 0;
  for (const auto& [ref, gguf] : refs) {
    if (!path_exists(gguf)) continue;
    const Tokenizer tok = load(gguf);
    {
      const Json j = Json::parse(read_file(ref));
      const std::string& prompt = j["prompt"].as_string();
      std::vector<int32_t> expected;
      const Json& arr = j["prompt_tokens"];
      for (size_t i = 0; i < arr.size(); ++i) expected.push_back(static_cast<int32_t>(arr.at(i).as_int()));
      const std::string ref_path = ref;  // clang 14 (C++17) cannot capture a structured binding
      CAPTURE(ref_path);
      const auto ids = tok.encode(prompt, /*add_bos=*/true, /*parse_special=*/true);
      CHECK_MESSAGE(ids == expected, "got" << ids_str(ids) << "\nexpected" << ids_str(expected));
      if (tok.add_bos()) {
        CHECK(tok.decode(ids, /*remove_special=*/true) == " " + prompt);  // llama.cpp keeps the space after BOS
      } else {  // BPE without BOS (qwen): the text itself, ChatML specials included
        CHECK(tok.decode(ids, /*remove_special=*/true, /*unparse_special=*/true) == prompt);
      }
      ++n_checked;
    }
  }
  MESSAGE(n_checked, " reference prompts checked");
  CHECK(n_checked > 0);
}

TEST_CASE("tokenizer: special tokens are parsed only with parse_special - BOS/EOG metadata") {
  const std::string path = kData + "/vocab/ggml-vocab-llama-spm.gguf";
  EDGELLM_SKIP_WITHOUT(path);
  const Tokenizer tok = load(path);
  CHECK(tok.bos() == 1);
  CHECK(tok.eos() == 2);
  CHECK(tok.vocab().add_bos);
  CHECK(tok.vocab().add_space_prefix);
  CHECK(tok.is_eog(2));
  CHECK_FALSE(tok.is_eog(1));
  const auto parsed = tok.encode("<s>Hello", false, true);
  REQUIRE(parsed.size() >= 2);
  CHECK(parsed[0] == 1);
  CHECK(parsed == std::vector<int32_t>{1, 15043});  // "▁Hello": the text after a special token gets the prefix
  const auto plain = tok.encode("<s>Hello", false, false);
  CHECK(plain.front() != 1);  // "<s>" is plain text without parse_special
  CHECK(tok.decode(plain) == "<s>Hello");
  CHECK(tok.token_to_piece(1).empty());             // control: empty unless special
  CHECK(tok.token_to_piece(1, /*special=*/true) == "<s>");
  CHECK(tok.encode("", true, true) == std::vector<int32_t>{1});
  CHECK(tok.encode("", false, true).empty());

  const std::string gpt2 = kData + "/vocab/ggml-vocab-gpt-2.gguf";
  const Tokenizer bpe = load(gpt2);
  CHECK_FALSE(bpe.vocab().add_bos);  // "gpt-2" pre-tokenizer: no BOS
  CHECK(bpe.is_eog(50256));
  CHECK(bpe.vocab().eot == 50256);  // "<|endoftext|>" detected by text
  CHECK(bpe.encode("a<|endoftext|>b", false, true) ==
        std::vector<int32_t>{bpe.vocab().find_token("a"), 50256, bpe.vocab().find_token("b")});
  const Tokenizer l3 = load(kData + "/vocab/ggml-vocab-gpt-2-llama3pre.gguf");
  CHECK(l3.vocab().add_bos);  // llama-bpe adds BOS like llama.cpp
  CHECK(l3.encode("Hi", true, false).front() == l3.bos());
}

TEST_CASE("tokenizer: StreamDecoder holds back split multibyte characters") {
  const std::string dir = kData + "/vocab";
  EDGELLM_SKIP_WITHOUT(dir);
  const std::string text = "Führer 🦙 said ½ — 你好, мир 😀!";
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
    CAPTURE(name);
    const Tokenizer tok = load(dir + "/" + name);
    const auto ids = tok.encode(text, false, false);
    StreamDecoder sd(tok);
    std::string streamed;
    int n_held = 0;
    for (int32_t id : ids) {
      const std::string part = sd.push(id);
      // Every chunk is whole UTF-8: decoding it alone reproduces it.
      std::string re;
      for (uint32_t c : utf8_to_cpts(part)) append_utf8(re, c);
      CHECK(re == part);
      if (part.empty()) ++n_held;
      streamed += part;
    }
    streamed += sd.flush();
    CHECK(n_held > 0);  // some character really was split across tokens
    std::string expected = tok.decode(ids);
    if (tok.vocab().add_space_prefix) expected = " " + expected;  // decode strips the prefix, streaming does not
    CHECK(streamed == expected);
  }
}

TEST_CASE("tokenizer: SPM and BPE encode 100 KB texts and 100 KB words (time reported, not asserted)") {
  const std::string dir = kData + "/vocab";
  EDGELLM_SKIP_WITHOUT(dir);
  std::string text;
  const std::string para = "The quick brown fox jumps over the lazy dog 1234567; naïve café — 你好!\n";
  while (text.size() < 100 * 1024) text += para;
  text += "unbrokenwordwithoutanyspacesatall";
  const std::string one_word(100 * 1024, 'a');  // one pre-token / one merge chain of 100K symbols
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-llama3pre.gguf"}) {
    const Tokenizer tok = load(dir + "/" + name);
    for (const std::string* t : {static_cast<const std::string*>(&text), &one_word}) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto ids = tok.encode(*t, true, true);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      MESSAGE(std::string(name), ": ", t->size(), " bytes -> ", ids.size(), " tokens in ", ms, " ms");
      CHECK(tok.decode(ids, /*remove_special=*/true).size() >= t->size());
    }
  }
}

TEST_CASE("tokenizer: random bytes never break encode/decode - SPM round-trips ASCII") {
  const std::string dir = kData + "/vocab";
  EDGELLM_SKIP_WITHOUT(dir);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {  // xorshift64: deterministic across platforms
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-llama3pre.gguf"}) {
    CAPTURE(std::string(name));
    const Tokenizer tok = load(dir + "/" + name);
    for (int iter = 0; iter < 300; ++iter) {
      std::string s(next() % 40, '\0');
      const bool ascii = iter % 2 == 0;
      for (char& c : s) c = static_cast<char>(ascii ? next() % 128 : next() % 256);
      if (iter % 7 == 0) s += "<s></s><|endoftext|>";
      CAPTURE(s);
      for (bool special : {false, true}) {
        const auto ids = tok.encode(s, /*add_bos=*/iter % 3 == 0, special);
        for (int32_t id : ids) REQUIRE(tok.vocab().valid_id(id));
        const std::string back = tok.decode(ids);
        // after a BOS, llama.cpp's detokenizer keeps the prefix space
        const std::string expected = (ids.size() > 1 && ids[0] == tok.bos() ? " " : "") + s;
        if (ascii && !special && tok.vocab().type == VocabType::Spm) CHECK(back == expected);
      }
    }
  }
}

// ---- in-memory vocabularies: validation and edge cases without the shared data ----
namespace {

std::vector<uint8_t> spm_vocab_file(const std::function<void(GgufWriter&)>& tweak = {}) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab",
                                   "\xE2\x96\x81" "ab"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    toks.push_back(buf);
  }
  std::vector<float> scores(toks.size(), 0.0f);
  scores[6] = -1.0f;  // "▁a"
  scores[7] = -2.0f;  // "ab"
  scores[8] = -0.5f;  // "▁ab"
  std::vector<int32_t> types(toks.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (size_t i = 9; i < toks.size(); ++i) types[i] = 6;
  w.set_array_string("tokenizer.ggml.tokens", toks);
  w.set_array("tokenizer.ggml.scores", GgufType::FLOAT32, scores.data(), scores.size());
  w.set_array("tokenizer.ggml.token_type", GgufType::INT32, types.data(), types.size());
  if (tweak) tweak(w);
  return w.to_bytes();
}

}  // namespace

TEST_CASE("vocab: synthetic SPM vocabulary, merges by score and byte fallback") {
  const Tokenizer tok(Vocab::from_gguf(GgufFile::from_bytes(spm_vocab_file())));
  CHECK(tok.vocab().type == VocabType::Spm);
  // " ab" -> "▁ab" (merged through "▁a" + "b", the best-scoring pairs)
  CHECK(tok.encode("ab", false, false) == std::vector<int32_t>{8});
  CHECK(tok.encode("ab", true, false) == std::vector<int32_t>{1, 8});
  // "c" is not a token: byte fallback <0x63> = 9 + 0x63
  CHECK(tok.encode("c", false, false) == std::vector<int32_t>{3, 9 + 0x63});
  CHECK(tok.decode({3, 9 + 0x63}) == "c");
  CHECK(tok.decode({1, 8}) == " ab");
  CHECK(tok.decode({8}) == "ab");
  CHECK_THROWS_AS(tok.token_to_piece(100000), Error);

  // user-defined tokens are matched even without parse_special; control tokens only with it;
  // SPM text after a matched token gets the space prefix again
  const Tokenizer utok(Vocab::from_gguf(GgufFile::from_bytes(spm_vocab_file([](GgufWriter& w) {
    std::vector<int32_t> types(9 + 256, 1);
    types[0] = 2;
    types[1] = types[2] = 3;
    types[7] = 4;  // "ab" user-defined
    for (size_t i = 9; i < types.size(); ++i) types[i] = 6;
    w.set_array("tokenizer.ggml.token_type", GgufType::INT32, types.data(), types.size());
  }))));
  CHECK(utok.encode("xaby", false, false) == std::vector<int32_t>{3, 9 + 'x', 7, 3, 9 + 'y'});
  CHECK(utok.decode(utok.encode("xaby", false, false)) == "xab y");
  CHECK(utok.encode("</s>", false, true) == std::vector<int32_t>{2});
  CHECK(utok.encode("</s>", false, false).size() == 5);  // "▁" + four byte tokens

  // int32 scores are accepted as llama.cpp does; same ranking -> same merges
  const Tokenizer itok(Vocab::from_gguf(GgufFile::from_bytes(spm_vocab_file([](GgufWriter& w) {
    std::vector<int32_t> s(9 + 256, -100);
    s[6] = -10;  // "▁a"
    s[7] = -20;  // "ab"
    s[8] = -5;   // "▁ab"
    w.set_array("tokenizer.ggml.scores", GgufType::INT32, s.data(), s.size());
  }))));
  CHECK(itok.encode("ab", false, false) == std::vector<int32_t>{8});

  // "é" has no token: two byte tokens; the stream holds the lead byte back
  const auto ids = tok.encode("\xC3\xA9", false, false);
  REQUIRE(ids == std::vector<int32_t>{3, 9 + 0xC3, 9 + 0xA9});
  StreamDecoder sd(tok);
  CHECK(sd.push(ids[0]) == " ");
  CHECK(sd.push(ids[1]).empty());
  CHECK(sd.push(ids[2]) == "\xC3\xA9");
  CHECK(sd.push(9 + 0xE4).empty());  // an unfinished 3-byte sequence comes out at flush
  CHECK(sd.flush() == "\xE4");
  CHECK(sd.flush().empty());
}

TEST_CASE("vocab: validation errors name the key") {
  auto expect_error = [](const std::vector<uint8_t>& bytes, const std::string& needle) {
    try {
      (void)Vocab::from_gguf(GgufFile::from_bytes(bytes));
      FAIL("no error, expected one mentioning ", needle);
    } catch (const Error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  expect_error(spm_vocab_file([](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "t5"); }), "'t5'");
  expect_error(spm_vocab_file([](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 99999); }),
               "tokenizer.ggml.bos_token_id");
  expect_error(spm_vocab_file([](GgufWriter& w) {
                 const float s[2] = {0, 0};
                 w.set_array("tokenizer.ggml.scores", GgufType::FLOAT32, s, 2);
               }),
               "tokenizer.ggml.scores");
  expect_error(spm_vocab_file([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "gpt2");
                 w.set_string("tokenizer.ggml.pre", "llama-bpe");
               }),
               "tokenizer.ggml.merges");
  expect_error(spm_vocab_file([](GgufWriter& w) {
                 w.set_string("tokenizer.ggml.model", "gpt2");
                 w.set_string("tokenizer.ggml.pre", "no-such-pre");
                 w.set_array_string("tokenizer.ggml.merges", {"a b"});
               }),
               "'no-such-pre'");
  // 0xFFFFFFFF means "not set" (converters write it for absent ids) and keeps the default.
  const Vocab v = Vocab::from_gguf(GgufFile::from_bytes(
      spm_vocab_file([](GgufWriter& w) { w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu); })));
  CHECK(v.pad == kTokenNull);
}

TEST_CASE("bpe: pre-tokenizer splits agree with the original regexes") {
  // Expected words from Python's `regex` module applied with the rules' original patterns
  // (matches and the gaps between them), pass after pass.
  struct Case {
    int rule;  // index into kRules
    std::string text;
    std::vector<std::string> words;
  };
  const PreTokenizer kRules[] = {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2, PreTokenizer::Starcoder,
                                 PreTokenizer::Default};
  const std::vector<Case> cases = {
      {0, "Hello, world!!! 12345 it's", {"Hello", ",", " world", "!!!", " 12345", " it", "'s"}},
      {0, " \xc2""\xa0""x\x0a""\x0a""  y's 1.5e10", {" ", "\xc2""\xa0""", "x", "\x0a""\x0a"" ", " y", "'s", " 1", ".", "5", "e", "10"}},
      {0, "a'LL <=> b~|c 7777777", {"a", "'", "LL", " <=>", " b", "~|", "c", " 7777777"}},
      {0, "\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd"" 42\xd9""\xa3"" \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a""", {"\xe3""\x80""\x80""", "\xe4""\xbd""\xa0""\xe5""\xa5""\xbd""", " 42\xd9""\xa3""", " \xf0""\x9f""\xa6""\x99""!!", "\x0d""\x0a"""}},
      {1, "Hello, world!!! 12345 it's", {"Hello", ",", " world", "!!!", " ", "123", "45", " it", "'s"}},
      {1, " \xc2""\xa0""x\x0a""\x0a""  y's 1.5e10", {" ", "\xc2""\xa0""x", "\x0a""\x0a""", " ", " y", "'s", " ", "1", ".", "5", "e", "10"}},
      {1, "a'LL <=> b~|c 7777777", {"a", "'LL", " <=>", " b", "~|", "c", " ", "777", "777", "7"}},
      {1, "\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd"" 42\xd9""\xa3"" \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a""", {"\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd""", " ", "42\xd9""\xa3""", " \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a"""}},
      {2, "Hello, world!!! 12345 it's", {"Hello", ",", " world", "!!!", " ", "1", "2", "3", "4", "5", " it", "'s"}},
      {2, " \xc2""\xa0""x\x0a""\x0a""  y's 1.5e10", {" ", "\xc2""\xa0""x", "\x0a""\x0a""", " ", " y", "'s", " ", "1", ".", "5", "e", "1", "0"}},
      {2, "a'LL <=> b~|c 7777777", {"a", "'LL", " <=>", " b", "~|", "c", " ", "7", "7", "7", "7", "7", "7", "7"}},
      {2, "\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd"" 42\xd9""\xa3"" \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a""", {"\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd""", " ", "4", "2", "\xd9""\xa3""", " \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a"""}},
      {3, "Hello, world!!! 12345 it's", {"Hello", ",", " world", "!!!", " ", "1", "2", "3", "4", "5", " it", "'s"}},
      {3, " \xc2""\xa0""x\x0a""\x0a""  y's 1.5e10", {" ", "\xc2""\xa0""", "x", "\x0a""\x0a"" ", " y", "'s", " ", "1", ".", "5", "e", "1", "0"}},
      {3, "a'LL <=> b~|c 7777777", {"a", "'", "LL", " <=>", " b", "~|", "c", " ", "7", "7", "7", "7", "7", "7", "7"}},
      {3, "\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd"" 42\xd9""\xa3"" \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a""", {"\xe3""\x80""\x80""", "\xe4""\xbd""\xa0""\xe5""\xa5""\xbd""", " ", "4", "2", "\xd9""\xa3""", " \xf0""\x9f""\xa6""\x99""!!", "\x0d""\x0a"""}},
      {4, "Hello, world!!! 12345 it's", {"Hello", ",", " world", "!!!", " ", "123", "45", " it", "'", "s"}},
      {4, " \xc2""\xa0""x\x0a""\x0a""  y's 1.5e10", {" ", "\xc2""\xa0""", "x", "\x0a""\x0a"" ", " y", "'", "s", " ", "1", ".", "5", "e", "10"}},
      {4, "a'LL <=> b~|c 7777777", {"a", "'", "LL", " ", "<=>", " b", "~|", "c", " ", "777", "777", "7"}},
      {4, "\xe3""\x80""\x80""\xe4""\xbd""\xa0""\xe5""\xa5""\xbd"" 42\xd9""\xa3"" \xf0""\x9f""\xa6""\x99""!!\x0d""\x0a""", {"\xe3""\x80""\x80""", "\xe4""\xbd""\xa0""\xe5""\xa5""\xbd""", " ", "42\xd9""\xa3""", " \xf0""\x9f""\xa6""\x99""", "!!", "\x0d""\x0a"""}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.rule);
    CAPTURE(c.text);
    std::vector<std::string> got;
    for (const std::string& w : bpe::pre_tokenize(c.text, kRules[c.rule])) {
      std::string raw;  // undo the GPT-2 byte encoding
      for (uint32_t cpt : utf8_to_cpts(w)) raw.push_back(static_cast<char>(gpt2_cpt_to_byte(cpt)));
      got.push_back(raw);
    }
    CHECK(got == c.words);
  }
}

TEST_CASE("unicode: categories and GPT-2 byte map") {
  CHECK(cpt_flags('a').letter);
  CHECK(cpt_flags(0x4F60).letter);  // 你
  CHECK(cpt_flags('7').number);
  CHECK(cpt_flags(0x0661).number);  // Arabic-Indic one
  CHECK(cpt_flags(0x3000).whitespace);
  CHECK(cpt_flags(',').punctuation);
  CHECK_FALSE(cpt_flags('$').punctuation);  // a symbol, not punctuation
  for (int b = 0; b < 256; ++b) CHECK(gpt2_cpt_to_byte(gpt2_byte_to_cpt()[static_cast<size_t>(b)]) == b);
  CHECK(gpt2_byte_to_cpt()[' '] == 0x120);  // "Ġ"
  CHECK(utf8_to_cpts("a\xFF" "b") == std::vector<uint32_t>{'a', kReplacementChar, 'b'});
}
