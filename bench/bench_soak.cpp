// bench_soak: the long soak of docs/RELIABILITY.md — generates N tokens (default 100,000) with
// "sinks + window" eviction, in chunks of generate() calls, and reports resident memory at start
// and end. Exit 1 when RSS grew by more than --max-growth-mb or the KV pool grew after warm-up.
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

#include "../examples/common.hpp"

using namespace edgellm;

namespace {

struct Options {
  std::string model;
  long n_tokens = 100000;
  int n_ctx = 256;
  uint64_t mem_budget_bytes = 0;  // 0: detected
  int n_keep = 4;
  int n_window = 128;
  int chunk = 1000;
  int threads = 1;
  double max_growth_mb = 4.0;  // the token history alone is 4 bytes a token: 0.4 MB at 100k
};

const char* const kUsage =
    "usage: bench_soak -m MODEL [-n N] [-c CTX] [--keep K] [--window W] [--chunk C] [-t T]\n"
    "                  [--max-growth-mb MB] [--mem-budget MIB]\n"
    "  -n N               tokens to soak (default 100000)\n"
    "  -c CTX             context (default 256); --keep K --window W: the eviction (default 4, 128)\n"
    "  --chunk C          tokens per generate() call (default 1000)\n"
    "  -t T               threads (default 1)\n"
    "  --max-growth-mb MB exit 1 when RSS grew by more (default 4)\n"
    "  --mem-budget MIB   memory the model may use (default: detected)\n";

// *early: "help" or "version" when asked for.
Options parse(int argc, char** argv, std::string* early) {
  Options o;
  tool::Args args(argc, argv);
  for (std::string f; args.next(f);) {
    if (f == "-h" || f == "--help") *early = "help";
    else if (f == "--version") *early = "version";
    else if (f == "-m" || f == "--model") o.model = args.value(f);
    else if (f == "-n") o.n_tokens = static_cast<long>(args.integer(f, 1, 1LL << 40));
    else if (f == "-c" || f == "--ctx-size") o.n_ctx = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--keep") o.n_keep = args.integer32(f, 0, tool::kMaxContext);
    else if (f == "--window") o.n_window = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--chunk") o.chunk = args.integer32(f, 1, tool::kMaxTokens);
    else if (f == "-t" || f == "--threads") o.threads = std::max(1, tool::threads_flag(args, f));
    else if (f == "--max-growth-mb") o.max_growth_mb = args.number(f, 0, 1 << 20);
    else if (f == "--mem-budget") o.mem_budget_bytes = tool::mem_budget_bytes(args, f);
    else tool::unknown(f);
  }
  args.no_positional();
  if (early->empty() && o.model.empty()) throw_error("missing -m MODEL (e.g. ../shared/data/models/stories260K.gguf)");
  return o;
}

double mib(uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

int run(const Options& o) {
  LoadOptions lo;
  lo.mem_budget = o.mem_budget_bytes;
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
  return tool::run([&] {
    std::string early;
    const Options o = parse(argc, argv, &early);
    if (early == "version") return tool::print_version("bench_soak");
    if (early == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return run(o);
  });
}
