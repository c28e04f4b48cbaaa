// edgellm-bench: llama-bench-like prompt (ppN) and generation (tgN) speed rows for a GGUF file or
// a synthetic model of a published shape; md / csv / json on stdout (json rows use llama-bench's
// field names), progress on stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <time.h>
#include <vector>

#include <edgellm/core/error.hpp>
#include <edgellm/core/memory.hpp>
#include <edgellm/kernels/select.hpp>
#include <edgellm/kv/paged_kv_cache.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/model/synthetic.hpp>
#include <edgellm/quant/mix.hpp>
#include <edgellm/runtime/bench_stats.hpp>
#include <edgellm/runtime/memory_stats.hpp>
#include <edgellm/runtime/thread_pool.hpp>
#include <edgellm/runtime/timer.hpp>

#include "common.hpp"

namespace {

constexpr const char* kUsage =
    "usage: edgellm-bench (-m MODEL.gguf | --preset NAME --type MIX) [options]\n"
    "  -m, --model FILE        GGUF model\n"
    "  --preset NAME           synthetic random-weight model of a published shape:\n"
    "                          tiny, llama-160m, tinyllama-1.1b, llama-3.2-1b, llama-2-7b, llama-3.1-8b,\n"
    "                          qwen2.5-1.5b, qwen3-1.7b\n"
    "  --type MIX              its quantization, as llama-quantize names it (Q4_0, Q4_K_M, Q8_0, Q2_K,\n"
    "                          Q6_K, F16 ...; default Q4_K_M)\n"
    "  --seed N                weights seed of the synthetic model (default 1234)\n"
    "  --write-gguf OUT        keep the synthetic model in OUT (else a temporary file, deleted)\n"
    "  --plan                  print the preset's per-type weight counts and bytes (no model built)\n"
    "  -p, --n-prompt LIST     prompt lengths, comma list (default 512; 0 = none)\n"
    "  -n, --n-gen LIST        generation lengths (default 128; 0 = none)\n"
    "  -pg PP,TG               a prompt of PP then TG generated tokens, timed together (repeatable)\n"
    "  -d, --n-depth LIST      tokens already in the KV cache when each test starts (default 0; filled\n"
    "                          untimed before every run, as llama-bench's -d)\n"
    "  -t, --threads LIST      thread counts (default: hardware threads)\n"
    "                          (LIST: comma-separated values or llama-bench ranges first-last,\n"
    "                          first-last+step, first-last*mult; a repeated flag adds its values)\n"
    "  -r, --repetitions N     timed runs per test after one warm-up run (default 5)\n"
    "  -b, --batch-size N      prompt tokens per forward pass (default 512)\n"
    "  --kv-type f32|f16|q8_0  KV cache storage (default f16, as llama-bench); -ctk / -ctv are accepted\n"
    "                          with the same value (K and V share one type)\n"
    "  --delay SECONDS         pause between tests (llama-bench's; lets a passively cooled board cool)\n"
    "  --membw                 measure memory read bandwidth with the same threads (best of four\n"
    "                          sequential read patterns); decode rows report their % of it\n"
    "  --no-warmup             skip the warm-up run\n"
    "  --no-repack             keep every matrix as stored (no load-time interleaving; -v lists them)\n"
    "  --mem-budget MIB        memory the model may use (weights + KV of the longest test + scratch); a larger\n"
    "                          model streams what does not fit from storage on every token, and the rows gain\n"
    "                          s/tok, storage MiB read per token and the limit max(compute, streamed / read rate)\n"
    "                          (default: what the process may use; a model that fits loads as without a budget)\n"
    "  -o, --output md|csv|json|jsonl|sql  (default md; jsonl: one JSON object per line as each test\n"
    "                          ends; sql: CREATE TABLE test + an INSERT per test, for sqlite3)\n"
    "  -v, --verbose           kernel variants and tensor types on stderr\n";

struct Options {
  std::string model_path, preset, mix = "Q4_K_M", write_gguf, output = "md", kv_type = "f16";
  uint64_t seed = 1234;
  std::vector<int> n_prompt = {512}, n_gen = {128}, n_depth = {0}, threads;
  std::vector<std::pair<int, int>> pg;
  int reps = 5, n_batch = 512, delay_s = 0;
  bool membw = false, warmup = true, verbose = false, plan = false, repack = true;
  uint64_t mem_budget = 0;  // --mem-budget (0: detected; models that fit load as without one)
};

Options parse(int argc, char** argv, bool* help) {
  Options o;
  o.threads = {edgellm::default_thread_count()};
  tool::Args args(argc, argv);
  std::string f, ctk, ctv;
  // As llama-bench: a list flag given again adds its values (the first use replaces the default).
  std::vector<const std::vector<int>*> given;
  auto add_list = [&](std::vector<int>& dst, int lo, int hi) {
    std::vector<int> v = edgellm::parse_int_list(args.value(f), f, lo, hi);
    if (std::find(given.begin(), given.end(), &dst) == given.end()) {
      given.push_back(&dst);
      dst.clear();
    }
    dst.insert(dst.end(), v.begin(), v.end());
  };
  while (args.next(f)) {
    if (f == "-h" || f == "--help") *help = true;
    else if (f == "-m" || f == "--model") o.model_path = args.value(f);
    else if (f == "--preset") o.preset = args.value(f);
    else if (f == "--type") o.mix = args.value(f);
    else if (f == "--seed") o.seed = static_cast<uint64_t>(args.integer(f));
    else if (f == "--write-gguf") o.write_gguf = args.value(f);
    else if (f == "-p" || f == "--n-prompt") add_list(o.n_prompt, 0, 1 << 20);
    else if (f == "-n" || f == "--n-gen") add_list(o.n_gen, 0, 1 << 20);
    else if (f == "-d" || f == "--n-depth") add_list(o.n_depth, 0, 1 << 20);
    else if (f == "-pg") {
      const std::vector<int> v = edgellm::parse_int_list(args.value(f), f, 0, 1 << 20);
      if (v.size() != 2) edgellm::throw_error("option -pg: expected PP,TG, got ", v.size(), " values");
      o.pg.emplace_back(v[0], v[1]);
    } else if (f == "-t" || f == "--threads") add_list(o.threads, 1, 1024);
    else if (f == "-r" || f == "--repetitions") o.reps = static_cast<int>(args.integer(f));
    else if (f == "-b" || f == "--batch-size" || f == "-ub" || f == "--ubatch-size") o.n_batch = static_cast<int>(args.integer(f));
    else if (f == "--kv-type") ctk = ctv = args.value(f);
    else if (f == "-ctk" || f == "--cache-type-k") ctk = args.value(f);
    else if (f == "-ctv" || f == "--cache-type-v") ctv = args.value(f);
    else if (f == "--delay") o.delay_s = static_cast<int>(args.integer(f));
    else if (f == "--membw") o.membw = true;
    else if (f == "--plan") o.plan = true;
    else if (f == "--no-warmup") o.warmup = false;
    else if (f == "--no-repack") o.repack = false;
    else if (f == "--mem-budget") o.mem_budget = tool::mem_budget_bytes(args, f);
    else if (f == "-o" || f == "--output") o.output = args.value(f);
    else if (f == "-v" || f == "--verbose") o.verbose = true;
    else tool::unknown(f);
  }
  if (*help) return o;
  if (!args.positional().empty()) edgellm::throw_error("unexpected argument '", args.positional()[0], "'");
  if (o.model_path.empty() == o.preset.empty()) edgellm::throw_error("give either -m FILE or --preset NAME (see --help)");
  if (!o.write_gguf.empty() && o.preset.empty()) edgellm::throw_error("--write-gguf needs --preset");
  if (o.plan && o.preset.empty()) edgellm::throw_error("--plan needs --preset");
  if (o.output != "md" && o.output != "csv" && o.output != "json" && o.output != "jsonl" && o.output != "sql")
    edgellm::throw_error("-o ", o.output, ": expected md, csv, json, jsonl or sql");
  // One cache type holds K and V (the paged cache stores both alike): -ctk / -ctv must agree.
  if (!ctk.empty() && !ctv.empty() && ctk != ctv)
    edgellm::throw_error("-ctk ", ctk, " / -ctv ", ctv, ": K and V share one cache type here; give the same one");
  if (!ctk.empty() || !ctv.empty()) o.kv_type = ctk.empty() ? ctv : ctk;
  if (o.delay_s < 0 || o.delay_s > 3600) edgellm::throw_error("--delay: ", o.delay_s, " is outside [0, 3600] seconds");
  if (o.reps < 1 || o.reps > 100000) edgellm::throw_error("-r: ", o.reps, " is outside [1, 100000]");
  if (o.n_batch < 1) edgellm::throw_error("-b: ", o.n_batch, " must be >= 1");
  return o;
}

// ---- model ----

struct LoadedModel {
  std::shared_ptr<const edgellm::LlamaModel> model;
  std::string filename, type_name;  // type_name: "Q4_K - Medium"-like mix name from general.file_type
  uint64_t size_bytes = 0, n_params = 0;
};

std::string mix_name_of(const edgellm::GgufFile& f) {
  const int64_t ft = f.get_int_or("general.file_type", -1);
  for (const auto& m : edgellm::quant_mixes())
    if (m.file_type == ft) return m.name;
  return "ftype" + std::to_string(ft);
}

LoadedModel load(const Options& o) {
  LoadedModel lm;
  std::string path = o.model_path;
  bool temporary = false;
  if (!o.preset.empty()) {
    const edgellm::SyntheticSpec spec = edgellm::synthetic_preset(o.preset);
    const edgellm::QuantMix& mix = edgellm::quant_mix(o.mix);
    if (o.write_gguf.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/edgellm-bench-XXXXXX";
      std::vector<char> name(tmpl.begin(), tmpl.end());
      name.push_back(0);
      const int fd = ::mkstemp(name.data());
      if (fd < 0) edgellm::throw_error("cannot create a temporary file from ", tmpl);
      ::close(fd);
      path = name.data();
      temporary = true;
    } else {
      path = o.write_gguf;
    }
    edgellm::ThreadPool pool(*std::max_element(o.threads.begin(), o.threads.end()));
    const edgellm::Timer timer;
    std::fprintf(stderr, "edgellm-bench: building synthetic %s %s in %s\n", o.preset.c_str(), mix.name, path.c_str());
    try {
      edgellm::build_synthetic_gguf(spec, mix, o.seed, path, [&](size_t done, size_t total) {
        std::fprintf(stderr, "\r  tensor %zu/%zu (%.0f s)", done, total, timer.seconds());
        if (done == total) std::fprintf(stderr, "\n");
      }, &pool);
    } catch (...) {
      if (temporary) std::remove(path.c_str());
      throw;
    }
  }
  try {
    edgellm::LoadOptions lo;
    lo.repack = o.repack;
    lo.mem_budget = o.mem_budget;
    // KV for the longest test, as run_once allocates it; one pass of n_batch tokens.
    int n_ctx = 1;
    for (int d : o.n_depth)
      for (int p : o.n_prompt)
        for (int g : o.n_gen) n_ctx = std::max(n_ctx, d + p + g);
    for (const auto& pg : o.pg) n_ctx = std::max(n_ctx, pg.first + pg.second + *std::max_element(o.n_depth.begin(), o.n_depth.end()));
    lo.plan.n_ctx = n_ctx;
    lo.plan.n_batch = o.n_batch;
    lo.plan.n_threads = *std::max_element(o.threads.begin(), o.threads.end());
    edgellm::dtype_from_name(o.kv_type, &lo.plan.kv_type);
    lm.model = edgellm::LlamaModel::load(path, lo);
  } catch (...) {
    if (temporary) std::remove(path.c_str());
    throw;
  }
  // The mapping keeps the pages; the name can go now, so nothing is left behind on any exit.
  if (temporary) std::remove(path.c_str());
  const edgellm::GgufFile& f = lm.model->file();
  lm.filename = o.preset.empty() ? o.model_path : (o.write_gguf.empty() ? "synthetic-" + o.preset : o.write_gguf);
  lm.type_name = mix_name_of(f);
  for (const auto& t : f.tensors()) {
    lm.size_bytes += t.nbytes;
    lm.n_params += static_cast<uint64_t>(t.n_elements());
  }
  return lm;
}

// "llama 1.1B Q4_K_M", as llama-bench's model_type.
std::string model_type(const LoadedModel& lm) {
  char buf[64];
  const double b = double(lm.n_params) / 1e9;
  if (b >= 1.0) std::snprintf(buf, sizeof buf, "%.1fB", b);
  else std::snprintf(buf, sizeof buf, "%.0fM", b * 1e3);
  return lm.model->file().get_string_or("general.architecture", "llama") + " " + buf + " " + lm.type_name;
}

// ---- memory ----

// Resets VmHWM so each row's peak RSS is its own (Linux >= 4.0; ignored where unsupported).
void reset_peak_rss() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

// Sum of the n words at p read as kStreams interleaved sequential streams, with or without software
// prefetch. The plain single stream is one flat loop (the one --membw used before the other
// patterns were added).
template <int kStreams, bool kPrefetch>
uint64_t read_words(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  auto add4 = [&](const uint64_t* q) {
    s0 += q[0];
    s1 += q[1];
    s2 += q[2];
    s3 += q[3];
  };
  if constexpr (kStreams == 1 && !kPrefetch) {
    for (size_t i = 0; i + 4 <= n; i += 4) add4(p + i);
  } else {
    constexpr size_t kLine = 64 / sizeof(uint64_t);  // words per cache line
    const size_t per = n / size_t(kStreams) / kLine * kLine;
    for (size_t i = 0; i < per; i += kLine)
      for (int k = 0; k < kStreams; ++k) {
        const uint64_t* q = p + size_t(k) * per + i;
        if constexpr (kPrefetch) {
          __builtin_prefetch(q + 4096 / sizeof(uint64_t), 0, 3);
          __builtin_prefetch(q + 16384 / sizeof(uint64_t), 0, 2);
        }
        for (size_t j = 0; j < kLine; j += 4) add4(q + j);
      }
  }
  return s0 + s1 + s2 + s3;
}

// The same plain single stream read a cache line per load where the target has wide vectors (one
// 64-byte load with AVX-512, four q-register loads on NEON): GCC/clang vector extension, so one
// source serves every target. On the x86 dev VM this is the fastest reader (2 threads: ~28.5 GB/s
// against ~26 for the 8-byte loads and the prefetched pattern), so --membw without it understated
// the roofline by ~8 %.
uint64_t read_lines(const uint64_t* p, size_t n) {
  typedef uint64_t Line __attribute__((vector_size(64)));
  Line a = {}, b = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Line x, y;
    std::memcpy(&x, p + i, sizeof x);  // p is line-aligned; memcpy keeps the aliasing rules
    std::memcpy(&y, p + i + 8, sizeof y);
    a += x;
    b += y;
  }
  a += b;
  uint64_t s = 0;
  for (int k = 0; k < 8; ++k) s += a[k];
  for (; i < n; ++i) s += p[i];
  return s;
}

// Read bandwidth in GB/s with the pool's threads, over a buffer far larger than the caches: the
// best pass of four read patterns, so that the roofline is what this machine can deliver to a
// reader and not what one loop shape gets from it. Each thread sums its own contiguous part as
// (plain) one sequential stream, (prefetched) the same with software prefetch 4 KiB ahead into L1
// and 16 KiB ahead into L2, as the packed GEMV kernels do, and (2 streams) the two halves of its
// part interleaved, prefetched likewise, and (line loads) one stream read a whole cache line per
// load (read_lines). On the dev VM the four read 25.2 / 25.4 / 26.1 / ~28.5 GB/s. The buffer is
// anonymous memory with huge pages where the kernel offers them (as the repacked weights are), so
// TLB misses do not understate what DRAM delivers.
struct MembwResult {
  double best = 0;
  double pattern[4] = {0, 0, 0, 0};  // plain, prefetched, 2 streams, line loads
};

MembwResult measure_membw(edgellm::ThreadPool& pool) {
  constexpr size_t kBytes = size_t(1) << 30;
  edgellm::AnonymousMemory mem(kBytes);
  auto* const buf = reinterpret_cast<uint64_t*>(mem.data());
  const size_t n_all = kBytes / sizeof(uint64_t);
  for (size_t i = 0; i < n_all; ++i) buf[i] = 1;
  std::vector<uint64_t> sink(static_cast<size_t>(pool.n_threads()) * 8, 0);
  MembwResult r;
  for (int round = 0; round < 3; ++round)
    for (int pattern = 0; pattern < 4; ++pattern) {
      const edgellm::Timer t;
      const int64_t n_chunks = pool.n_threads();
      pool.parallel_for(n_chunks, [&](int64_t c0, int64_t c1, int thread) {
        const size_t per = n_all / size_t(n_chunks);
        const uint64_t* p = buf + size_t(c0) * per;
        const size_t n = per * size_t(c1 - c0);
        sink[size_t(thread) * 8] += pattern == 0   ? read_words<1, false>(p, n)
                                    : pattern == 1 ? read_words<1, true>(p, n)
                                    : pattern == 2 ? read_words<2, true>(p, n)
                                                   : read_lines(p, n);
      });
      r.pattern[pattern] = std::max(r.pattern[pattern], double(kBytes) / t.seconds() / 1e9);
      r.best = std::max(r.best, r.pattern[pattern]);
    }
  uint64_t total = 0;
  for (uint64_t s : sink) total += s;
  if (total == 0) edgellm::throw_error("--membw: read nothing");  // keeps the sums alive
  return r;
}

// CPU time of the calling (main) thread. On a shared machine the wall-clock rate depends on what
// else runs; the main thread computes its share and spins while waiting for workers (up to the
// pool's spin budget), so tokens per main-thread CPU-second estimates the rate had the main thread
// never been preempted (worker preemption still counts; memory-bandwidth contention is not removed).
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// ---- tests ----

struct Test {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  std::string name() const {
    const std::string at = n_depth > 0 ? " @ d" + std::to_string(n_depth) : "";  // llama-bench's spelling
    if (n_gen == 0) return "pp" + std::to_string(n_prompt) + at;
    if (n_prompt == 0) return "tg" + std::to_string(n_gen) + at;
    return "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen) + at;
  }
};

// Wall and main-thread CPU seconds of the timed part of one run.
struct RunTime {
  double wall = 0, cpu = 0;
};

struct Result {
  Test test;
  int n_threads = 0;
  std::vector<double> samples_ns;  // one per repetition
  std::vector<double> cpu_ns;      // main-thread CPU time per repetition
  std::vector<double> token_ms;    // generation: every token of every repetition
  uint64_t peak_rss = 0, rss_file = 0, rss_anon = 0;
  uint32_t hash = 0;
  // Storage: bytes read per token (/proc/self/io read_bytes over the timed part), and with a
  // streamed model its bytes per token, the compute time (wall less waiting for the stream) and
  // the physical limit max(compute, streamed bytes / the stream's read rate), seconds per token.
  double read_per_tok = 0, stream_per_tok = 0, compute_s_tok = 0, limit_s_tok = 0, read_s_tok = 0, place_s_tok = 0;
  double avg_ts = 0, stddev_ts = 0, avg_ns = 0, stddev_ns = 0, gbps = 0, roofline = 0;
  double cpu_ts = 0;  // tokens per main-thread CPU-second (see cpu_seconds)
};

class Runner {
 public:
  Runner(const LoadedModel& lm, const Options& o, edgellm::DType kv_type, edgellm::ThreadPool* pool)
      : lm_(lm), o_(o), kv_type_(kv_type), ctx_(pool) {}

  // One run of the test from an empty cache: n_depth tokens untimed, then the timed prompt and
  // generation; appends generated-token latencies to token_ms.
  RunTime run_once(const Test& t, std::vector<double>* token_ms) {
    const edgellm::LlamaModel& m = *lm_.model;
    const int n_ctx = t.n_depth + t.n_prompt + t.n_gen;
    if (!kv_ || kv_->params().max_tokens < n_ctx) {
      kv_.reset();
      kv_ = std::make_unique<edgellm::PagedKvCache>(m.kv_params(n_ctx, 16, 0, kv_type_));
      seq_ = kv_->create_sequence();
    }
    kv_->truncate(seq_, 0);
    const int n_vocab = m.config().n_vocab;
    uint64_t rng = 7;  // the depth's tokens: their own stream, so the timed tokens do not depend on it
    auto token = [&] { return static_cast<int32_t>(edgellm::detail::splitmix64(rng) % uint64_t(n_vocab)); };
    int pos = 0;
    edgellm::Batch b;
    auto prompt = [&](int count, bool want_logits) {
      for (int done = 0; done < count;) {
        const int n = std::min(o_.n_batch, count - done);
        b.clear();
        for (int i = 0; i < n; ++i) b.add(token(), pos++, seq_, want_logits && done + i == count - 1);
        m.forward(ctx_, *kv_, b);
        done += n;
      }
    };
    prompt(t.n_depth, false);
    rng = 42;  // same tokens every run: the logits hash is comparable between builds
    const edgellm::Timer timer;
    const double cpu0 = cpu_seconds();
    prompt(t.n_prompt, true);
    for (int i = 0; i < t.n_gen; ++i) {
      const edgellm::Timer tt;
      b.clear();
      b.add(token(), pos++, seq_, true);
      m.forward(ctx_, *kv_, b);
      if (token_ms) token_ms->push_back(tt.ms());
    }
    return {timer.seconds(), cpu_seconds() - cpu0};
  }

  uint32_t last_hash() const {
    if (ctx_.n_outputs() == 0) return 0;
    return edgellm::logits_hash(ctx_.logits(ctx_.n_outputs() - 1), size_t(lm_.model->config().n_vocab));
  }

 private:
  const LoadedModel& lm_;
  const Options& o_;
  edgellm::DType kv_type_;
  edgellm::LlamaContext ctx_;
  std::unique_ptr<edgellm::PagedKvCache> kv_;
  int seq_ = 0;
};

Result run_test(Runner& runner, const Test& t, const Options& o, int n_threads, double membw_gbps,
                const LoadedModel& lm) {
  Result r;
  r.test = t;
  r.n_threads = n_threads;
  reset_peak_rss();
  if (o.warmup) {
    // As llama-bench: the whole prompt, or one generated token (pages the weights in).
    Test w = t;
    if (w.n_prompt == 0) w.n_gen = 1;
    else w.n_gen = 0;
    runner.run_once(w, nullptr);
  }
  const edgellm::WeightStream* st = lm.model->weight_stream();
  const edgellm::StreamStats st0 = st ? st->stats() : edgellm::StreamStats{};
  const uint64_t io0 = edgellm::process_read_bytes();
  for (int rep = 0; rep < o.reps; ++rep) {
    const RunTime rt = runner.run_once(t, &r.token_ms);
    r.samples_ns.push_back(rt.wall * 1e9);
    r.cpu_ns.push_back(rt.cpu * 1e9);
    const edgellm::MemoryStats ms = edgellm::memory_stats();
    r.rss_file = std::max(r.rss_file, ms.rss_file_bytes);
    r.rss_anon = std::max(r.rss_anon, ms.rss_anon_bytes);
  }
  r.peak_rss = edgellm::peak_rss_bytes();
  r.hash = runner.last_hash();
  std::vector<double> ts;
  const double n_tok = double(t.n_prompt + t.n_gen);
  const double all_tok = n_tok * o.reps, wall = edgellm::stats_mean(r.samples_ns) * 1e-9 * o.reps;
  r.read_per_tok = double(edgellm::process_read_bytes() - io0) / all_tok;
  if (st) {
    const edgellm::StreamStats st1 = st->stats();
    r.stream_per_tok = double(st1.bytes_read - st0.bytes_read) / all_tok;
    r.compute_s_tok = std::max(0.0, wall - (st1.wait_s - st0.wait_s)) / all_tok;
    const double rate = st1.read_s > st0.read_s ? double(st1.bytes_read - st0.bytes_read) / (st1.read_s - st0.read_s) : 0;
    r.limit_s_tok = std::max(r.compute_s_tok, rate > 0 ? r.stream_per_tok / rate : 0.0);
    r.read_s_tok = (st1.read_s - st0.read_s) / all_tok;
    r.place_s_tok = (st1.place_s - st0.place_s) / all_tok;
  }
  for (double ns : r.samples_ns) ts.push_back(n_tok * 1e9 / ns);
  r.avg_ts = edgellm::stats_mean(ts);
  r.stddev_ts = edgellm::stats_stddev(ts);
  r.avg_ns = edgellm::stats_mean(r.samples_ns);
  const double cpu_ns = edgellm::stats_mean(r.cpu_ns);
  if (cpu_ns > 0) r.cpu_ts = n_tok * 1e9 / cpu_ns;
  r.stddev_ns = edgellm::stats_stddev(r.samples_ns);
  if (t.n_prompt == 0) {
    // Every generated token reads the whole model once (llama.cpp's roofline convention).
    r.gbps = double(lm.size_bytes) * r.avg_ts / 1e9;
    if (membw_gbps > 0) r.roofline = 100.0 * r.gbps / membw_gbps;
  }
  return r;
}

// ---- output ----

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mib(uint64_t b) { return fmt("%.2f MiB", double(b) / (1024.0 * 1024.0)); }

std::string params_str(uint64_t n) { return n >= 100000000 ? fmt("%.2f B", double(n) / 1e9) : fmt("%.2f M", double(n) / 1e6); }

class Printer {
 public:
  Printer(const Options& o, const LoadedModel& lm, const std::string& cpu) : o_(o), lm_(lm), cpu_(cpu) {}

  void header() {
    if (o_.output == "md") {
      const bool st = lm_.model->weight_stream() != nullptr;
      std::printf("| model | size | params | backend | threads | test | t/s | t/s (main CPU) | GB/s | roofline "
                  "| ms/tok p50/p90/p99 | peak RSS (file/anon) | logits |%s\n",
                  st ? " s/tok | read MiB/tok | limit s/tok |" : "");
      std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |%s\n",
                  st ? " ---: | ---: | ---: |" : "");
    } else if (o_.output == "csv") {
      std::printf("%s\n", join(fields(), ",").c_str());
    } else if (o_.output == "json") {
      std::printf("[");
    } else if (o_.output == "sql") {  // llama-bench's: one table `test`, a row per test
      const std::vector<std::string> k = fields();
      std::string cols;
      for (size_t i = 0; i < k.size(); ++i) cols += std::string(i ? ", " : "") + k[i] + " " + sql_type(k[i]);
      std::printf("CREATE TABLE IF NOT EXISTS test (\n  %s\n);\n", cols.c_str());
    }
    std::fflush(stdout);
  }

  void row(const Result& r) {
    const bool gen_only = r.test.n_prompt == 0;
    const double p50 = edgellm::stats_percentile(r.token_ms, 50), p90 = edgellm::stats_percentile(r.token_ms, 90),
                 p99 = edgellm::stats_percentile(r.token_ms, 99);
    if (o_.output == "md") {
      std::printf("| %s | %s | %s | CPU | %d | %s | %.2f ± %.2f | %.2f | %s | %s | %s | %s (%s / %s) | %s |%s\n",
                  model_type(lm_).c_str(), mib(lm_.size_bytes).c_str(), params_str(lm_.n_params).c_str(), r.n_threads,
                  r.test.name().c_str(), r.avg_ts, r.stddev_ts, r.cpu_ts, gen_only ? fmt("%.1f", r.gbps).c_str() : "-",
                  gen_only && r.roofline > 0 ? fmt("%.0f %%", r.roofline).c_str() : "-",
                  r.token_ms.empty() ? "-" : (fmt("%.2f", p50) + " / " + fmt("%.2f", p90) + " / " + fmt("%.2f", p99)).c_str(),
                  mib(r.peak_rss).c_str(), mib(r.rss_file).c_str(), mib(r.rss_anon).c_str(),
                  edgellm::format_hash(r.hash).c_str(), stream_cells(r).c_str());
    } else {
      std::vector<std::string> samples_ns, samples_ts;
      for (double ns : r.samples_ns) {
        samples_ns.push_back(fmt("%.0f", ns));
        samples_ts.push_back(fmt("%.6g", double(r.test.n_prompt + r.test.n_gen) * 1e9 / ns));
      }
      const std::vector<std::string> v = {
          q(lm_.filename), q(model_type(lm_)), std::to_string(lm_.size_bytes), std::to_string(lm_.n_params),
          q(cpu_), q("CPU"), std::to_string(o_.n_batch), std::to_string(o_.n_batch), std::to_string(r.n_threads),
          q(o_.kv_type), q(o_.kv_type), o_.output == "sql" ? "1" : "true", std::to_string(r.test.n_prompt), std::to_string(r.test.n_gen),
          std::to_string(r.test.n_depth),
          fmt("%.0f", r.avg_ns), fmt("%.0f", r.stddev_ns), fmt("%.6f", r.avg_ts), fmt("%.6f", r.stddev_ts),
          list(samples_ns), list(samples_ts), fmt("%.3f", r.cpu_ts), fmt("%.3f", r.gbps), fmt("%.2f", r.roofline), fmt("%.4f", p50),
          fmt("%.4f", p90), fmt("%.4f", p99), std::to_string(r.peak_rss), std::to_string(r.rss_file),
          std::to_string(r.rss_anon), q(edgellm::format_hash(r.hash)),
          q(edgellm::isa_name(lm_.model->kernel_table().isa)), fmt("%.0f", r.read_per_tok), fmt("%.0f", r.stream_per_tok),
          fmt("%.6f", r.compute_s_tok), fmt("%.6f", r.limit_s_tok)};
      if (o_.output == "csv") {
        std::printf("%s\n", join(v, ",").c_str());
      } else if (o_.output == "sql") {
        std::printf("INSERT INTO test (%s) VALUES (%s);\n", join(fields(), ", ").c_str(), join(v, ", ").c_str());
      } else if (o_.output == "jsonl") {  // one object per line, printed as each test ends
        const std::vector<std::string> k = fields();
        std::string line = "{";
        for (size_t i = 0; i < k.size(); ++i) line += (i ? ", \"" : "\"") + k[i] + "\": " + v[i];
        std::printf("%s}\n", line.c_str());
      } else {
        const std::vector<std::string> k = fields();
        std::printf("%s\n  {\n", n_rows_ ? "," : "");
        for (size_t i = 0; i < k.size(); ++i)
          std::printf("    \"%s\": %s%s\n", k[i].c_str(), v[i].c_str(), i + 1 < k.size() ? "," : "");
        std::printf("  }");
      }
    }
    ++n_rows_;
    std::fflush(stdout);
  }

  void footer() {
    if (o_.output == "json") std::printf("%s]\n", n_rows_ ? "\n" : "");
    std::fflush(stdout);
  }

 private:
  static std::vector<std::string> fields() {
    return {"model_filename", "model_type", "model_size", "model_n_params", "cpu_info", "backends", "n_batch",
            "n_ubatch", "n_threads", "type_k", "type_v", "use_mmap", "n_prompt", "n_gen", "n_depth", "avg_ns", "stddev_ns",
            "avg_ts", "stddev_ts", "samples_ns", "samples_ts", "cpu_ts", "gbps", "roofline_pct", "p50_ms", "p90_ms", "p99_ms",
            "peak_rss", "rss_file", "rss_anon", "logits_hash", "kernels", "read_bytes_per_token",
            "stream_bytes_per_token", "compute_s_per_token", "limit_s_per_token"};
  }
  // The streamed model's cells of a markdown row: s/token, storage MiB read per token, physical limit.
  std::string stream_cells(const Result& r) const {
    if (!lm_.model->weight_stream()) return "";
    const double s_tok = r.avg_ts > 0 ? 1.0 / r.avg_ts : 0;
    return fmt(" %.3f |", s_tok) + fmt(" %.1f |", r.read_per_tok / (1024.0 * 1024.0)) + fmt(" %.3f |", r.limit_s_tok);
  }
  // The SQL column type of a field (-o sql).
  static const char* sql_type(const std::string& k) {
    static const char* const kText[] = {"model_filename", "model_type", "cpu_info", "backends", "type_k", "type_v",
                                        "samples_ns", "samples_ts", "logits_hash", "kernels"};
    static const char* const kReal[] = {"avg_ts",  "stddev_ts", "cpu_ts",  "gbps", "roofline_pct", "p50_ms", "p90_ms", "p99_ms",
                                        "compute_s_per_token", "limit_s_per_token"};
    for (const char* t : kText)
      if (k == t) return "TEXT";
    for (const char* t : kReal)
      if (k == t) return "REAL";
    return "INTEGER";
  }
  // A string value: JSON-quoted, an SQL literal, or a CSV field.
  bool json() const { return o_.output == "json" || o_.output == "jsonl"; }
  std::string q(const std::string& s) const {
    if (json()) return edgellm::json_quote(s);
    if (o_.output == "sql") return sql_quote(s);
    return edgellm::csv_field(s);
  }
  static std::string sql_quote(const std::string& s) {
    std::string o = "'";
    for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
    return o + "'";
  }
  // An array value: [a, b] in JSON, "a,b" in CSV and 'a,b' in SQL (llama-bench's form).
  std::string list(const std::vector<std::string>& v) const {
    if (json()) return "[" + join(v, ", ") + "]";
    if (o_.output == "sql") return sql_quote(join(v, ","));
    return edgellm::csv_field(join(v, ","));
  }
  static std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
  }
  const Options& o_;
  const LoadedModel& lm_;
  std::string cpu_;
  int n_rows_ = 0;
};

std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "";
  char line[512];
  std::string name;
  while (std::fgets(line, sizeof line, f)) {
    const std::string s = line;
    if (s.rfind("model name", 0) == 0 || s.rfind("Model", 0) == 0) {
      const size_t c = s.find(':');
      if (c != std::string::npos) name = s.substr(c + 2, s.size() - c - 3);
      break;
    }
  }
  std::fclose(f);
  return name;
}

void describe(const LoadedModel& lm) {
  std::fprintf(stderr, "%s", edgellm::describe_kernels(lm.model->kernel_table()).c_str());
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& t : lm.model->file().tensors()) {
    const std::string n = edgellm::dtype_name(t.type);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == n; });
    if (it == counts.end()) counts.emplace_back(n, 1);
    else ++it->second;
  }
  std::fprintf(stderr, "tensor types:");
  for (const auto& [n, c] : counts) std::fprintf(stderr, " %s x%d", n.c_str(), c);
  std::fprintf(stderr, "\n%s", lm.model->weights().describe_repack().c_str());
  std::fprintf(stderr, "%s", lm.model->weights().describe_residency().c_str());
#if EDGELLM_HAS_GEMM_U8
  std::fprintf(stderr, "prefill of matrices not repacked: u8 VNNI GEMM (%d-byte steps, %dx%d register tile) for legacy and K-quant matrices with "
                       "rows of a multiple of 128; each 16-row tile is unpacked on the fly, per call\n",
               edgellm::xs::GemmVec::kBytes, edgellm::xs::kGemmRows, edgellm::xs::kGemmToks);
#else
  std::fprintf(stderr, "prefill: tiled multi-row GEMV (no VNNI GEMM on this target)\n");
#endif
}

// The preset's tensor types under the mix, summed per type: what a projection needs (weights per
// token by type, bytes read per token) without building the model. Markdown on stdout.
void print_plan(const Options& o) {
  const edgellm::SyntheticSpec spec = edgellm::synthetic_preset(o.preset);
  const std::vector<edgellm::SyntheticTensor> ts = edgellm::synthetic_tensors(spec);
  const std::vector<edgellm::DType> types = edgellm::synthetic_mix_types(spec, edgellm::quant_mix(o.mix));
  struct Sum {
    std::string type;
    int tensors = 0;
    uint64_t weights = 0, bytes = 0, weights_per_token = 0;
  };
  std::vector<Sum> sums;
  for (size_t i = 0; i < ts.size(); ++i) {
    const std::string n = edgellm::dtype_name(types[i]);
    auto it = std::find_if(sums.begin(), sums.end(), [&](const Sum& x) { return x.type == n; });
    if (it == sums.end()) it = sums.insert(sums.end(), Sum{n});
    const uint64_t w = uint64_t(ts[i].n_in) * uint64_t(ts[i].n_out);
    ++it->tensors;
    it->weights += w;
    it->bytes += edgellm::dtype_row_bytes(types[i], ts[i].n_in) * uint64_t(ts[i].n_out);
    // token_embd is read one row per token unless it doubles as the output matrix.
    if (ts[i].name != "token_embd.weight" || spec.tied) it->weights_per_token += w;
  }
  std::printf("| %s %s | tensors | weights | MiB | weights multiplied per token |\n| --- | ---: | ---: | ---: | ---: |\n",
              o.preset.c_str(), o.mix.c_str());
  for (const Sum& x : sums)
    std::printf("| %s | %d | %llu | %.1f | %llu |\n", x.type.c_str(), x.tensors, (unsigned long long)x.weights,
                double(x.bytes) / 1048576.0, (unsigned long long)x.weights_per_token);
}

int bench_main(int argc, char** argv) {
  bool help = false;
  const Options o = parse(argc, argv, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (o.plan) {
    print_plan(o);
    return 0;
  }
  edgellm::DType kv_type;
  if (!edgellm::dtype_from_name(o.kv_type, &kv_type) ||
      (kv_type != edgellm::DType::F32 && kv_type != edgellm::DType::F16 && kv_type != edgellm::DType::Q8_0))
    edgellm::throw_error("KV cache type ", o.kv_type, " (--kv-type, -ctk, -ctv): expected f32, f16 or q8_0");
  std::vector<Test> tests;
  auto add = [&](int p, int n) {  // a test at every depth before the next test
    if (p + n > 0)
      for (int d : o.n_depth) tests.push_back({p, n, d});
  };
  for (int p : o.n_prompt) add(p, 0);
  for (int n : o.n_gen) add(0, n);
  for (const auto& [p, n] : o.pg) add(p, n);
  if (tests.empty()) edgellm::throw_error("nothing to run: every -p / -n / -pg value is 0");

  const LoadedModel lm = load(o);
  if (o.verbose) describe(lm);
  Printer out(o, lm, cpu_model());
  out.header();
  bool first_test = true;
  for (int n_threads : o.threads) {
    edgellm::ThreadPool pool(n_threads);
    double membw = 0;
    if (o.membw) {
      const MembwResult m = measure_membw(pool);
      membw = m.best;
      std::fprintf(stderr,
                   "edgellm-bench: memory read bandwidth, %d threads: %.1f GB/s (best pass; plain %.1f, "
                   "prefetched %.1f, 2 streams per thread %.1f, line loads %.1f)\n",
                   n_threads, membw, m.pattern[0], m.pattern[1], m.pattern[2], m.pattern[3]);
    }
    Runner runner(lm, o, kv_type, &pool);
    for (const Test& t : tests) {
      if (o.delay_s > 0 && !first_test) {  // llama-bench's --delay: let the board cool down between tests
        std::fprintf(stderr, "edgellm-bench: waiting %d s (--delay)\n", o.delay_s);
        std::this_thread::sleep_for(std::chrono::seconds(o.delay_s));
      }
      first_test = false;
      std::fprintf(stderr, "edgellm-bench: %s, %d threads ...\n", t.name().c_str(), n_threads);
      const Result r = run_test(runner, t, o, n_threads, membw, lm);
      out.row(r);
      if (o.verbose && lm.model->weight_stream())
        std::fprintf(stderr, "stream: %.1f MiB read per token; per token %.3f s reading, %.3f s copying / repacking (its own "
                             "thread, overlapped), %.3f s compute\n",
                     r.stream_per_tok / (1024.0 * 1024.0), r.read_s_tok, r.place_s_tok, r.compute_s_tok);
    }
  }
  out.footer();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] { return bench_main(argc, argv); });
}
