// llama.cpp's grammar sampler (llama_grammar_apply_impl over every token) vs edgellm's mask:
// same vocabulary (tiny-qwenvocab), schemas.json schema and document, same machine and flags.
// Usage: side_by_side DATA [SCHEMA_NAME [DOCUMENT]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include "edgellm/gguf/reader.hpp"
#include "edgellm/grammar/constrained_sampler.hpp"
#include "edgellm/grammar/json_schema.hpp"
#include "edgellm/text/tokenizer.hpp"
std::vector<double> llama_time_walk(const std::string& gbnf, const std::vector<std::string>& pieces, int32_t eog,
                                    const std::vector<int32_t>& ids);
using namespace edgellm;
static double pct(std::vector<double> v, double q) { std::sort(v.begin(), v.end()); return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))]; }
int main(int argc, char** argv) {
  const std::string data = argc > 1 ? argv[1] : "../shared/data";
  const std::string which = argc > 2 ? argv[2] : "event";
  const std::string doc = argc > 3 ? argv[3] : R"({"title": "Team sync", "start": "09:30", "minutes": 45, "people": ["Ann", "Bob", "Chloé"]})";
  const Tokenizer tok(Vocab::from_gguf(GgufFile::open(data + "/grammar/tiny-qwenvocab-Q4_0.gguf")));
  std::ifstream f(data + "/grammar/schemas.json"); std::stringstream ss; ss << f.rdbuf();
  const Json all = Json::parse(ss.str());
  std::string gbnf;
  for (const Json& s : all.as_array()) if (s["name"].as_string() == which) gbnf = json_schema_to_gbnf(s["schema"]);
  auto vocab = grammar_vocab_of(tok);
  std::vector<std::string> pieces(size_t(vocab->n_vocab()));
  for (int32_t i = 0; i < vocab->n_vocab(); ++i) pieces[size_t(i)] = vocab->in_trie(i) ? vocab->token_bytes(i) : std::string();
  const int32_t eog = vocab->eog_ids().at(0);
  const std::vector<int32_t> ids = tok.encode(doc, false, false);
  const std::vector<double> ll = llama_time_walk(gbnf, pieces, eog, ids);
  auto g = std::make_shared<const Grammar>(Grammar::parse(gbnf));
  // Compiled at construction (the default): pass 1 is a first request's cost.
  const auto c0 = std::chrono::steady_clock::now();
  TokenMasker masker(g, vocab);
  const double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
  std::vector<double> cold, warm;
  for (int pass = 0; pass < 2; ++pass) {
    GrammarMatcher m = masker.new_matcher();
    TokenMask mask;
    for (size_t k = 0; k <= ids.size(); ++k) {
      const auto a = std::chrono::steady_clock::now();
      masker.fill_mask(m, mask);
      (pass ? warm : cold).push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
      if (k < ids.size()) masker.accept_token(m, ids[k]);
    }
  }
  printf("schema %s, %zu tokens\n", which.c_str(), ids.size());
  printf("llama.cpp apply: median %.0f us, p99 %.0f us\n", pct(ll, 0.5), pct(ll, 0.99));
  printf("edgellm compile: %.0f ms (once per grammar)\n", compile_ms);
  printf("edgellm first:   median %.1f us, p99 %.1f us\n", pct(cold, 0.5), pct(cold, 0.99));
  printf("edgellm later:   median %.1f us, p99 %.1f us\n", pct(warm, 0.5), pct(warm, 0.99));
  printf("ratio llama/edgellm: median %.0fx (first request), p99 %.0fx\n", pct(ll, 0.5) / pct(cold, 0.5),
         pct(ll, 0.99) / pct(cold, 0.99));
}
