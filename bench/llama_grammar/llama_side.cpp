// llama.cpp side of the reference tools: its grammar code driven the way its tests and its
// grammar sampler drive it. Compiled against a llama.cpp checkout (build.sh).
#include "llama-grammar.h"
#include "llama-vocab.h"
#include <cmath>
#include <string>
#include <vector>
extern std::vector<std::string> g_pieces;
extern int32_t g_eog;
static llama_vocab g_vocab;

// llama.cpp's test-grammar-integration match_string semantics. -1: the grammar does not build.
int llama_match(const std::string& gbnf, const std::string& text) {
  llama_grammar* g = llama_grammar_init_impl(nullptr, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
  if (!g) return -1;
  // decode all code points (llama's decode_utf8 with the terminating 0)
  std::vector<uint32_t> cps;
  {
    static const int lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    size_t i = 0;
    while (i < text.size()) {
      uint8_t b = uint8_t(text[i]);
      int n = lookup[b >> 4];
      if (n == 0) { llama_grammar_free_impl(g); return 0; }
      uint32_t v = b & ((1 << (8 - n)) - 1);
      if (n == 1) v = b;
      for (int k = 1; k < n; ++k) {
        if (i + k >= text.size()) { llama_grammar_free_impl(g); return 0; }
        v = (v << 6) | (uint8_t(text[i + k]) & 0x3F);
      }
      i += size_t(n);
      cps.push_back(v);
    }
  }
  auto& stacks = llama_grammar_get_stacks(g);
  for (uint32_t cp : cps) {
    llama_grammar_accept(g, cp);
    if (stacks.empty()) { llama_grammar_free_impl(g); return 0; }
  }
  bool ok = false;
  for (auto& s : stacks) ok = ok || s.empty();
  llama_grammar_free_impl(g);
  return ok ? 1 : 0;
}

// The tokens llama.cpp's grammar sampler allows after `prefix` (token ids), as 0/1 per id.
std::vector<char> llama_mask(const std::string& gbnf, const std::vector<std::string>& pieces, int32_t eog,
                             const std::vector<int32_t>& prefix) {
  g_pieces = pieces;
  g_eog = eog;
  llama_grammar* g = llama_grammar_init_impl(&g_vocab, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
  if (!g) return {};
  for (int32_t t : prefix) llama_grammar_accept_impl(*g, t);
  std::vector<llama_token_data> d(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) d[i] = {int32_t(i), 0.0f, 0.0f};
  llama_token_data_array arr{d.data(), d.size(), -1, false};
  llama_grammar_apply_impl(*g, &arr);
  std::vector<char> out(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) out[i] = std::isinf(d[i].logit) ? 0 : 1;
  llama_grammar_free_impl(g);
  return out;
}

// Times llama_grammar_apply_impl over the whole vocabulary (as its grammar sampler does when
// every token is a candidate) at each token of `ids`, accepting them; microseconds per call.
#include <chrono>
std::vector<double> llama_time_walk(const std::string& gbnf, const std::vector<std::string>& pieces, int32_t eog,
                                    const std::vector<int32_t>& ids) {
  g_pieces = pieces;
  g_eog = eog;
  std::vector<double> us;
  llama_grammar* g = llama_grammar_init_impl(&g_vocab, gbnf.c_str(), "root", false, nullptr, 0, nullptr, 0);
  if (!g) return us;
  std::vector<llama_token_data> d(pieces.size());
  for (size_t k = 0; k <= ids.size(); ++k) {
    for (size_t i = 0; i < pieces.size(); ++i) d[i] = {int32_t(i), 1.0f, 0.0f};
    llama_token_data_array arr{d.data(), d.size(), -1, false};
    const auto a = std::chrono::steady_clock::now();
    llama_grammar_apply_impl(*g, &arr);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
    if (k < ids.size()) {
      if (std::isinf(d[size_t(ids[k])].logit)) { fprintf(stderr, "llama masks token %zu\n", k); break; }
      llama_grammar_accept_impl(*g, ids[k]);
    }
  }
  llama_grammar_free_impl(g);
  return us;
}
