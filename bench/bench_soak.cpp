// bench_soak: the long soak of docs/RELIABILITY.md — generates N tokens (default 100,000) with
// "sinks + window" eviction, in chunks of generate() calls, and reports resident memory at start
// and end. Exit 1 when RSS grew by more than --max-growth-mb or the KV pool grew after warm-up.
// Usage: bench_soak -m MODEL [-n N] [-c CTX] [--keep K] [--window W] [--chunk C] [-t T]
//                   [--max-growth-mb MB]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "edgellm/engine/session.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/runtime/memory_stats.hpp"
#include "edgellm/runtime/timer.hpp"
#include "edgellm/text/tokenizer.hpp"

using namespace edgellm;

namespace {

struct Options {
  std::string model;
  long n_tokens = 100000;
  int n_ctx = 256;
  double mem_budget_mib = 0;  // 0: detected
  int n_keep = 4;
  int n_window = 128;
  int chunk = 1000;
  int threads = 1;
  double max_growth_mb = 4.0;  // the token history alone is 4 bytes a token: 0.4 MB at 100k
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw_error("option ", a, " needs a value");
      return argv[++i];
    };
    auto num = [&](long lo) {
      const char* v = next();
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (!*v || *end || x < lo) throw_error("option ", a, ": expected an integer >= ", lo, ", got '", v, "'");
      return x;
    };
    if (a == "-m") o.model = next();
    else if (a == "-n") o.n_tokens = num(1);
    else if (a == "-c") o.n_ctx = static_cast<int>(num(1));
    else if (a == "--keep") o.n_keep = static_cast<int>(num(0));
    else if (a == "--window") o.n_window = static_cast<int>(num(1));
    else if (a == "--chunk") o.chunk = static_cast<int>(num(1));
    else if (a == "-t") o.threads = static_cast<int>(num(1));
    else if (a == "--max-growth-mb") o.max_growth_mb = std::atof(next());
    else if (a == "--mem-budget") o.mem_budget_mib = static_cast<double>(num(1));
    else throw_error("unknown option '", a, "' (usage: bench_soak -m MODEL [-n N] [-c CTX] [--keep K] [--window W] ",
                     "[--chunk C] [-t T] [--max-growth-mb MB] [--mem-budget MIB])");
  }
  if (o.model.empty()) throw_error("missing -m MODEL (e.g. ../shared/data/models/stories260K.gguf)");
  return o;
}

double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

int run(const Options& o) {
  LoadOptions lo;
  lo.mem_budget = static_cast<uint64_t>(o.mem_budget_mib * 1024 * 1024);
  lo.plan.n_ctx = o.n_ctx;
  lo.plan.n_threads = o.threads;
  auto model = LlamaModel::load(o.model, lo);
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  SessionParams sp;
  sp.n_ctx = o.n_ctx;
  sp.n_keep = o.n_keep;
  sp.n_window = o.n_window;
  sp.n_threads = o.threads;
  Session s(model, tok, sp);
  GenerateParams gp;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0.8f;
  gp.sampler.repeat_penalty = 1.1f;

  // Warm-up: past the context twice, so the KV pool, scratch and eviction have all run.
  long done = 0;
  gp.max_tokens = 2 * o.n_ctx;
  done += static_cast<long>(s.generate("Once upon a time", gp).tokens.size());
  const uint64_t rss0 = current_rss_bytes();
  const int blocks0 = s.kv_cache().blocks_allocated();
  std::fprintf(stderr, "warm-up: %ld tokens, RSS %.2f MiB, %d KV blocks\n", done, mib(rss0), blocks0);
  std::printf("| tokens | RSS MiB | KV blocks | evicted | tok/s |\n|---:|---:|---:|---:|---:|\n");
  Timer clock;
  long soaked = 0;
  while (soaked < o.n_tokens) {
    gp.max_tokens = static_cast<int>(std::min<long>(o.chunk, o.n_tokens - soaked));
    Timer t;
    const GenerateResult r = s.generate(std::string(), gp);
    soaked += static_cast<long>(r.tokens.size());
    if (r.reason != StopReason::MaxTokens) throw_error("generation stopped early: ", stop_reason_name(r.reason));
    if (soaked % (10L * o.chunk) < o.chunk || soaked >= o.n_tokens)
      std::printf("| %ld | %.2f | %d | %d | %.0f |\n", soaked, mib(current_rss_bytes()), s.kv_cache().blocks_allocated(),
                  s.n_evicted(), r.tokens.size() * 1e3 / t.ms());
  }
  const uint64_t rss1 = current_rss_bytes();
  const double growth = mib(rss1) - mib(rss0);
  std::printf("\nsoak: %ld tokens in %.1f s, RSS start %.2f MiB, end %.2f MiB, growth %.3f MiB (limit %.1f), "
              "KV blocks %d -> %d, peak RSS %.2f MiB\n",
              soaked, clock.ms() / 1e3, mib(rss0), mib(rss1), growth, o.max_growth_mb, blocks0,
              s.kv_cache().blocks_allocated(), mib(peak_rss_bytes()));
  if (rss0 > 0 && growth > o.max_growth_mb) throw_error("RSS grew by ", growth, " MiB (limit ", o.max_growth_mb, ")");
  if (s.kv_cache().blocks_allocated() != blocks0) throw_error("the KV pool grew after the warm-up");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
