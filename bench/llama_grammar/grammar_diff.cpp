// Differential check against llama.cpp's grammar code (src/llama-grammar.cpp linked alone, see
// build.sh): whole-string acceptance on random sentences and their mutations for the shared
// grammars and schemas, grammar build + acceptance on a folder of fuzz inputs (optional argument:
// grammar "\n%%\n" text, as fuzz_grammar reads them), and token masks along random walks on a
// synthetic vocabulary. Prints the counts of differences. Usage: grammar_diff DATA [FUZZ_DIR]
#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/json_schema.hpp"
#include "edgellm/grammar/matcher.hpp"
#include "edgellm/grammar/token_mask.hpp"

int llama_match(const std::string& gbnf, const std::string& text);
std::vector<char> llama_mask(const std::string& gbnf, const std::vector<std::string>& pieces, int32_t eog,
                             const std::vector<int32_t>& prefix);

using namespace edgellm;

static std::string read(const std::string& p) { std::ifstream f(p, std::ios::binary); std::stringstream s; s << f.rdbuf(); return s.str(); }

static int ours(const std::string& gbnf, const std::string& text) {
  try {
    auto g = std::make_shared<const Grammar>(Grammar::parse(gbnf));
    GrammarMatcher m(g);
    return m.accept_bytes(text) && m.is_complete() ? 1 : 0;
  } catch (const Error&) { return -1; }
}

int main(int argc, char** argv) {
  const std::string data = argc > 1 ? argv[1] : "../shared/data";
  std::vector<std::string> grammars;
  for (const char* n : {"arithmetic", "c", "chess", "english", "japanese", "json", "json_arr", "list"})
    grammars.push_back(read(data + "/grammar/" + n + ".gbnf"));
  const Json schemas = Json::parse(read(data + "/grammar/schemas.json"));
  for (const Json& s : schemas.as_array()) grammars.push_back(json_schema_to_gbnf(s["schema"]));
  grammars.push_back("root ::= ... \"abc\" ...");
  grammars.push_back("root ::= ( [x]* )*");
  grammars.push_back("root ::= (\"0x\" [A-F0-9]{2} \" \"?){3,5}");
  grammars.push_back("root ::= [^a-c\\x00-\\x1F]+ | [\\u2028-\\u2029] \"x\"");
  // char-level tokens for random sentences
  std::vector<std::string> chars;
  for (int c = 32; c < 127; ++c) chars.push_back(std::string(1, char(c)));
  for (const char* s : {"\n", "\t", "\xC3\xA9", "\xE2\x82\xAC", "\xE3\x81\x82", "\xF0\x9F\x98\x80", ""}) chars.push_back(s);
  auto cv = std::make_shared<const GrammarVocab>(chars, std::vector<int32_t>{int32_t(chars.size() - 1)});
  std::mt19937 rng(7);
  long n_cmp = 0, n_diff = 0, n_invalid = 0;
  for (const std::string& gb : grammars) {
    auto g = std::make_shared<const Grammar>(Grammar::parse(gb));
    TokenMasker masker(g, cv);
    fprintf(stderr, "accept: grammar %.40s\n", gb.c_str());
    for (int k = 0; k < 60; ++k) {
      GrammarMatcher m(g);
      std::string s;
      for (int step = 0; step < 80; ++step) {
        auto ids = masker.allowed_tokens(m).ids();
        if (ids.empty()) break;
        int32_t id = ids[rng() % ids.size()];
        if (id == cv->n_vocab() - 1) { if (rng() % 2) break; else continue; }
        masker.accept_token(m, id);
        s += chars[size_t(id)];
      }
      std::vector<std::string> texts{s};
      for (int j = 0; j < 4 && !s.empty(); ++j) {  // mutations
        std::string t = s;
        size_t at = rng() % t.size();
        switch (rng() % 3) {
          case 0: t.erase(at, 1); break;
          case 1: t.insert(at, chars[rng() % (chars.size() - 1)]); break;
          default: t[at] = char(32 + rng() % 95);
        }
        texts.push_back(t);
      }
      for (const auto& t : texts) {
        bool valid = true;
        for (size_t i = 0; i < t.size();) {
          uint32_t cp;
          const size_t len = grammar_detail::decode_utf8(t, i, &cp);
          if (!len) { valid = false; break; }
          i += len;
        }
        if (!valid) { ++n_invalid; continue; }  // llama.cpp decodes invalid UTF-8 leniently; we refuse it
        ++n_cmp;
        const int a = llama_match(gb, t), b = ours(gb, t);
        if (a != b) {
          if (++n_diff < 10) {
            printf("DIFF accept llama=%d ours=%d grammar #%zu text:", a, b, size_t(&gb - &grammars[0]));
            for (unsigned char c : t) printf(c >= 32 && c < 127 ? "%c" : "\\x%02X", c);
            printf("\n");
          }
        }
      }
    }
  }
  fflush(stdout);
  printf("accept: %ld comparisons, %ld differences (%ld invalid UTF-8 texts not compared)\n", n_cmp, n_diff, n_invalid);
  // fuzz corpus: build success and acceptance
  long n_build = 0, n_build_diff = 0;
  if (argc > 2) {
    const char* dir = argv[2];
    DIR* d = opendir(dir);
    while (d != nullptr) {
      dirent* e = readdir(d);
      if (!e) break;
      if (e->d_name[0] == '.') continue;
      const std::string in = read(std::string(dir) + "/" + e->d_name);
      if (in.find('\0') != std::string::npos) continue;  // llama.cpp reads C strings
      const size_t sep = in.find("\n%%\n");
      const std::string gb = in.substr(0, sep), text = sep == std::string::npos ? "" : in.substr(sep + 4, 256);
      const int a = llama_match(gb, text), b = ours(gb, text);
      ++n_build;
      if (a != b) { if (++n_build_diff < 30) printf("DIFF corpus llama=%d ours=%d  %s\n", a, b, e->d_name); }
    }
    if (d) closedir(d);
  }
  printf("fuzz corpus: %ld inputs, %ld differences\n", n_build, n_build_diff);
  // masks
  std::vector<std::string> pieces;
  for (int b = 1; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
  const std::string alpha = "{}[]\":, \n0123456789.-+eEabcdeftrunl\\";
  for (int i = 0; i < 1500; ++i) { std::string s; for (int k = 0, n = 1 + int(rng() % 6); k < n; ++k) s += alpha[rng() % alpha.size()]; pieces.push_back(s); }
  for (const char* s : {"\xC3\xA9", "\xE2\x82\xAC", "\xE2\x82", "\x82\xAC", "\xC3", "a\xC3", "\xE2", "\xE3\x81\x82", "\xF0\x9F"}) pieces.push_back(s);
  pieces.push_back("");
  const int32_t eog = int32_t(pieces.size() - 1);
  auto pv = std::make_shared<const GrammarVocab>(pieces, std::vector<int32_t>{eog});
  long n_mask = 0, n_mask_diff = 0;
  for (const std::string& gb : grammars) {
    auto g = std::make_shared<const Grammar>(Grammar::parse(gb));
    TokenMasker masker(g, pv);
    fprintf(stderr, "mask: grammar %.40s\n", gb.c_str());
    for (int w = 0; w < 3; ++w) {
      GrammarMatcher m(g);
      std::vector<int32_t> prefix;
      for (int step = 0; step < 25; ++step) {
        const TokenMask mine = masker.allowed_tokens(m);
        const std::vector<char> ref = llama_mask(gb, pieces, eog, prefix);
        ++n_mask;
        int nd = 0;
        for (int32_t i = 0; i < pv->n_vocab(); ++i) nd += (ref[size_t(i)] != 0) != mine.test(i);
        if (nd) { if (++n_mask_diff < 10) { printf("DIFF mask step %d (%d tokens) grammar %.60s\n", step, nd, gb.c_str()); for (int32_t i = 0; i < pv->n_vocab(); ++i) if ((ref[size_t(i)] != 0) != mine.test(i)) { printf("  token %d '%s' llama=%d\n", i, pieces[size_t(i)].c_str(), ref[size_t(i)]); break; } } }
        auto ids = mine.ids();
        ids.erase(std::remove(ids.begin(), ids.end(), eog), ids.end());
        if (ids.empty()) break;
        const int32_t id = ids[rng() % ids.size()];
        masker.accept_token(m, id);
        prefix.push_back(id);
      }
    }
  }
  printf("masks: %ld states compared, %ld differ\n", n_mask, n_mask_diff);
}
