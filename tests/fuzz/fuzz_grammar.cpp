// libFuzzer target for the GBNF parser and the matcher: the input is a grammar, then (after a
// "\n%%\n" line) a text. Bad grammars throw Error; a grammar that parses must print to text that
// parses again, the matcher must take the text byte by byte without crashing (Errors from its
// bounds are fine), and the token masks of a small vocabulary must equal the token-by-token check.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <edgellm/grammar/gbnf.hpp>
#include <edgellm/grammar/matcher.hpp>
#include <edgellm/grammar/token_mask.hpp>

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_grammar: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

// Single bytes, some words and partial UTF-8 sequences, EOG last.
std::shared_ptr<const edgellm::GrammarVocab> vocab() {
  static const auto v = [] {
    std::vector<std::string> t;
    for (int b = 1; b < 256; ++b) t.push_back(std::string(1, char(b)));
    for (const char* s : {"ab", "abc", "\"a", "{\"", "12", "true", " =", "\xC3\xA9", "\xE2\x82", "\xAC!", "\xF0\x9F"})
      t.push_back(s);
    t.push_back("");
    return std::make_shared<const edgellm::GrammarVocab>(t, std::vector<int32_t>{int32_t(t.size() - 1)});
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t sep = in.find("\n%%\n");
  const std::string_view gbnf = in.substr(0, sep);
  const std::string_view text = sep == std::string_view::npos ? std::string_view() : in.substr(sep + 4, 256);
  std::shared_ptr<const edgellm::Grammar> g;
  try {
    g = std::make_shared<const edgellm::Grammar>(edgellm::Grammar::parse(gbnf));
  } catch (const edgellm::Error&) {
    return 0;
  }
  try {
    (void)edgellm::Grammar::parse(g->to_string());
  } catch (const edgellm::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("the printed grammar does not parse");
  }
  try {
    edgellm::TokenMaskerOptions opt;
    opt.suffix_depth = 1 + int(size % 5);
    const edgellm::TokenMasker masker(g, vocab(), opt);
    edgellm::GrammarMatcher m(g);
    for (size_t i = 0; i < text.size(); ++i) {
      if (i < 6 && masker.allowed_tokens(m) != masker.allowed_tokens_brute_force(m)) fail("mask differs from the check");
      if (!m.accept_bytes(text.substr(i, 1))) break;
    }
    (void)m.is_complete();
  } catch (const edgellm::Error&) {
    // the matcher's bounds (too ambiguous / too deep): a clear error is the expected outcome
  }
  return 0;
}
