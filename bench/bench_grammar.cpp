// bench_grammar: the grammar's token mask cost per token (issue 48's speed target). Loads a
// vocabulary (default: Qwen2's 151,936 tokens of tiny-qwenvocab), converts a schemas.json schema
// to GBNF, and walks a valid JSON document token by token: each step computes the mask (timed),
// checks the document's next token is allowed, and accepts it. With the grammar compiled at
// construction (TokenMasker::precompute, the default) the first pass is the first request's cost;
// without it (--lazy rows) the first pass fills the cache on first use (cold) and later passes
// reuse it (warm). Also the compile time and cache size of every schema of schemas.json and of
// the json_object grammar.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/json.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/grammar/constrained_sampler.hpp"
#include "edgellm/grammar/gbnf.hpp"
#include "edgellm/grammar/json_schema.hpp"
#include "edgellm/grammar/token_mask.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "edgellm/text/vocab.hpp"
#include "cpu_name.hpp"

using namespace edgellm;

namespace {

const char* const kUsage =
    "usage: bench_grammar [--vocab GGUF] [--schemas schemas.json] [--schema NAME] [--doc JSON]\n"
    "                     [--passes N] [--suffix-depth K] [--refine-above N] [--warm-up TOKENS]\n"
    "                     [--all]\n"
    "  defaults: ../shared/data/grammar/tiny-qwenvocab-Q4_0.gguf, schema 'event', 3 passes,\n"
    "  warm-up 1000 tokens (0: none); --all: also the compile of every schema and json_object\n";

// Valid documents for the schemas of schemas.json (inputs to walk, not results).
std::string default_doc(const std::string& schema) {
  if (schema == "yes-no") return R"({"answer": "yes"})";
  if (schema == "event")
    return R"({"title": "Team sync", "start": "09:30", "minutes": 45, "people": ["Ann", "Bob", "Chloé"]})";
  if (schema == "shopping") return R"([{"item": "milk", "qty": 2}, {"item": "bread", "qty": 1}])";
  if (schema == "ref") return R"({"fg": "red", "bg": "blue"})";
  if (schema == "one-of-types") return R"({"v": 17})";
  return R"({"name": "alarm", "time": "07:00", "days": [1, 2, 3], "enabled": true, "volume": 0.5})";
}


double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))];
}

// Walks the document token by token: mask (timed), check, accept; prints the figures.
void walk(const TokenMasker& masker, const std::vector<int32_t>& ids, const char* label, int pass) {
  using Clock = std::chrono::steady_clock;
  GrammarMatcher m = masker.new_matcher();
  TokenMask mask;
  std::vector<double> us;
  size_t allowed_sum = 0;
  const GrammarVocab& vocab = masker.vocab();
  for (size_t k = 0; k <= ids.size(); ++k) {
    const auto a = Clock::now();
    masker.fill_mask(m, mask);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - a).count());
    allowed_sum += mask.count();
    if (k == ids.size()) {
      if (!m.is_complete() || vocab.eog_ids().empty() || !mask.test(vocab.eog_ids()[0]))
        throw Error("the document is not complete for the grammar, or EOG is not allowed at its end");
      break;
    }
    if (!mask.test(ids[k])) throw Error("token " + std::to_string(k) + " of the document is masked out");
    if (!masker.accept_token(m, ids[k])) throw Error("token " + std::to_string(k) + " not accepted");
  }
  std::printf("pass %d (%s): mask per token median %.1f us, p99 %.1f us, max %.1f us, mean allowed %.0f tokens, cache %zu entries\n",
              pass, label, percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0),
              double(allowed_sum) / double(us.size()), masker.cache_entries());
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab_path = std::string(EDGELLM_SHARED_DATA) + "/grammar/tiny-qwenvocab-Q4_0.gguf";
  std::string schemas_path = std::string(EDGELLM_SHARED_DATA) + "/grammar/schemas.json";
  std::string schema_name = "event", doc;
  int passes = 3, warm_tokens = 1000;
  bool all = false;
  TokenMaskerOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: missing value\n%s", a.c_str(), kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--vocab") vocab_path = next();
    else if (a == "--schemas") schemas_path = next();
    else if (a == "--schema") schema_name = next();
    else if (a == "--doc") doc = next();
    else if (a == "--all") all = true;
    else if (a == "--passes") passes = std::max(1, std::atoi(next().c_str()));
    else if (a == "--warm-up") warm_tokens = std::max(0, std::atoi(next().c_str()));
    else if (a == "--suffix-depth") opt.suffix_depth = std::max(1, std::atoi(next().c_str()));
    else if (a == "--refine-above") opt.refine_above = size_t(std::max(0, std::atoi(next().c_str())));
    else {
      std::fprintf(stderr, "%s", kUsage);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  try {
    std::ifstream probe(vocab_path);
    if (!probe) {
      std::printf("skipped: %s not found\n", vocab_path.c_str());
      return 0;
    }
    const Tokenizer tok(Vocab::from_gguf(GgufFile::open(vocab_path)));
    std::ifstream sf(schemas_path);
    std::stringstream ss;
    ss << sf.rdbuf();
    const Json schemas = Json::parse(ss.str());
    const Json* schema = nullptr;
    for (const Json& s : schemas.as_array())
      if (s["name"].as_string() == schema_name) schema = &s["schema"];
    if (!schema) throw Error("no schema '" + schema_name + "' in " + schemas_path);
    if (doc.empty()) doc = default_doc(schema_name);

    using Clock = std::chrono::steady_clock;
    auto t0 = Clock::now();
    auto vocab = grammar_vocab_of(tok);
    const double vocab_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    auto grammar = std::make_shared<const Grammar>(Grammar::parse(json_schema_to_gbnf(*schema)));
    const std::vector<int32_t> ids = tok.encode(doc, /*add_bos=*/false, /*parse_special=*/false);

    std::printf("cpu: %s\n", cpu_name().c_str());
    std::printf("vocab: %d tokens, trie %zu nodes, built in %.1f ms\n", vocab->n_vocab(), vocab->n_nodes(), vocab_ms);
    std::printf("schema '%s', document %zu bytes = %zu tokens, suffix depth %d\n", schema_name.c_str(), doc.size(),
                ids.size(), opt.suffix_depth);
    // The grammar compiled at construction: its time and size, then the document's passes.
    t0 = Clock::now();
    auto masker = std::make_shared<const TokenMasker>(grammar, vocab, opt);
    const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    TokenMasker::CacheStats st = masker->cache_stats();
    std::printf("compile (precompute): %.0f ms, %zu entries, %.0f KiB\n", compile_ms, st.entries,
                double(st.bytes) / 1024);
    for (int pass = 0; pass < passes; ++pass) walk(*masker, ids, pass == 0 ? "compiled, first" : "compiled", pass + 1);
    st = masker->cache_stats();
    std::printf("cache after the passes: %zu entries, %.0f KiB\n", st.entries, double(st.bytes) / 1024);
    // Without the compile: pass 1 on a fresh masker is cold (its cache fills as the document
    // goes); later passes are warm.
    TokenMaskerOptions lazy = opt;
    lazy.precompute = false;
    auto cold = std::make_shared<const TokenMasker>(grammar, vocab, lazy);
    for (int pass = 0; pass < passes; ++pass) walk(*cold, ids, pass == 0 ? "lazy, cold" : "lazy, warm", pass + 1);
    if (warm_tokens > 0) {
      auto warmed = std::make_shared<const TokenMasker>(grammar, vocab, lazy);
      t0 = Clock::now();
      const size_t built = warmed->warm_up(warm_tokens);
      std::printf("lazy warm_up(%d): %zu entries in %.0f ms\n", warm_tokens, built,
                  std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      walk(*warmed, ids, "lazy, after warm_up", 1);
    }
    if (all) {  // the compile of every shared schema and of json_object
      std::vector<std::pair<std::string, std::string>> gbnfs;
      for (const Json& s : schemas.as_array()) gbnfs.emplace_back(s["name"].as_string(), json_schema_to_gbnf(s["schema"]));
      gbnfs.emplace_back("json_object grammar", json_object_gbnf());
      for (const auto& ng : gbnfs) {
        auto gr = std::make_shared<const Grammar>(Grammar::parse(ng.second));
        t0 = Clock::now();
        const TokenMasker tm(gr, vocab, opt);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        const TokenMasker::CacheStats cs = tm.cache_stats();
        std::printf("compile '%s': %.0f ms, %zu entries, %.0f KiB\n", ng.first.c_str(), ms, cs.entries,
                    double(cs.bytes) / 1024);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grammar: %s\n", e.what());
    return 1;
  }
  return 0;
}
