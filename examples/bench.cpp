// edgellm-bench: llama-bench-like prompt (ppN) and generation (tgN) speed rows for a GGUF file or
// a synthetic model of a published shape; md / csv / json on stdout (json rows use llama-bench's
// field names), progress on stderr.
#include "bench_membw.hpp"
#include "bench_print.hpp"
#include "bench_results.hpp"
#include "bench_verify.hpp"

namespace bench {
namespace {

constexpr const char* kUsage =
    "usage: edgellm-bench (-m MODEL.gguf | --preset NAME --type MIX) [options]\n"
    "  -m, --model FILE        GGUF model\n"
    "  --preset NAME           synthetic random-weight model of a published shape:\n"
    "                          tiny, tiny-256, llama-160m, tinyllama-1.1b, llama-3.2-1b, llama-3.2-3b,\n"
    "                          llama-2-7b, llama-3.1-8b, qwen2.5-1.5b, qwen3-1.7b\n"
    "  --type MIX              its quantization, as llama-quantize names it (Q4_0, Q4_K_M, Q8_0, Q2_K,\n"
    "                          Q6_K, F16, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ3_XXS, IQ3_XS,\n"
    "                          IQ3_S, IQ3_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, Q2_K_S ...; default Q4_K_M),\n"
    "                          tensor types by llama-quantize's rules. The mixes llama-quantize refuses\n"
    "                          without an importance matrix (IQ1_*, IQ2_*, IQ3_XXS, IQ3_XS, Q2_K_S) use\n"
    "                          a synthetic one for the layers' matrices: per input column the mean\n"
    "                          square of N(0, v) activations, v log-uniform in [e^-2, e^2] with one\n"
    "                          column in 64 at 16 v, from the seed (same seed, same file)\n"
    "  --seed N                weights seed of the synthetic model (default 1234)\n"
    "  --synthetic-blocks quantized|tiled  how the preset's blocks are made (default quantized: every row\n"
    "                          random weights through the type's quantizer). tiled: only the first 32\n"
    "                          rows of each matrix are quantized so; every later row copies whole blocks\n"
    "                          from them (block j from a pool row drawn at random per row and j, from the\n"
    "                          seed): valid blocks with finite scales, the mix's exact types and sizes,\n"
    "                          written at storage speed (an 8B i-quant file in minutes, not hours of grid\n"
    "                          search). For speed and memory runs: its logits are not the quantized file's\n"
    "  --write-gguf OUT        keep the synthetic model in OUT (else a temporary file, deleted)\n"
    "  --plan                  print the preset's per-type weight counts and bytes, their total and\n"
    "                          whether a synthetic importance matrix is used (no model built)\n"
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
    "  --grammar-file F, --json-schema JSON, --json-schema-file F\n"
    "                          -n rows generate under the grammar (repeated: each complete sentence starts\n"
    "                          the next), through the token loop; -v prints the mask time per token\n"
    "  --session-loop          -n rows through that token loop without a grammar (the baseline of the above)\n"
    "  --verify-rows LIST      instead of the -p / -n tests: the cost of a speculative decoding verify\n"
    "                          pass, one forward pass of k + 1 rows of one sequence (k drafted tokens, a\n"
    "                          fixed draft; all rows decoded, all with logits; cache cut back after it),\n"
    "                          for each k in LIST (1-64), against a plain 1-row decode step at the same\n"
    "                          position (-d tokens of context, filled untimed). Rows: s/pass (mean ±\n"
    "                          stddev over -r), ratio to the 1-row step, s per row, storage MiB read and\n"
    "                          streamed per pass, and whether the first row's logits equal the step's.\n"
    "                          Output md or jsonl\n"
    "  -md, --lookup, --draft-layers, --draft-max, --draft-min, --draft-p-min, --draft-adaptive:\n"
    "                          speculative decoding as in edgellm-cli (see below)\n";

// After kUsage's flags: output, then the draft flags (shared with edgellm-cli and edgellm-server).
constexpr const char* kUsageSpeculative =
    "Speculative decoding (greedy only: --draft-sample is refused). With a draft source the -n rows\n"
    "  decode through the speculative token loop: each run reads -d tokens and one random start token\n"
    "  (untimed but for the start token's pass, as a plain -n row's first step) and generates -n tokens\n"
    "  greedily (end of text ignored). -p rows are unchanged; -pg and --verify-rows are refused.\n";
constexpr const char* kUsageSpeculativeRows =
    "  The -n rows gain: the draft source, tokens drafted and accepted per run, acceptance rate\n"
    "  (accepted / drafted), tokens per target pass ((passes + accepted) / passes) and s/tok; their\n"
    "  logits column is a hash of the generated tokens instead (equal for every draft source and for\n"
    "  --draft-max 0: the model's own greedy text). A draft model keeps the -d tokens in its cache\n"
    "  between runs (read in the warm-up run, as the target's are filled untimed). Time baseline:\n"
    "  --lookup --draft-max 0 (the same token loop, sampling included, no drafts), not a plain -n row.\n"
    "  Mechanism check: -md the same file --draft-max 4 accepts 100 %, 5.00 tokens per pass at -n 1+5j.\n";

constexpr const char* kUsageOutput =
    "  -o, --output md|csv|json|jsonl|sql  (default md; jsonl: one JSON object per line as each test\n"
    "                          ends; sql: CREATE TABLE test + an INSERT per test, for sqlite3)\n"
    "  -v, --verbose           kernel variants and tensor types on stderr\n"
    "  --version               print the version\n"
    "Columns (md): t/s is tokens per wall-clock second (mean +- stddev over -r runs); t/s (main CPU)\n"
    "  divides by the main thread's CPU seconds instead, so it shows what a busy or throttled machine\n"
    "  took away (close to t/s on an idle machine); GB/s is weight bytes read per second and roofline\n"
    "  its share of --membw; logits is a hash of the last logits row (equal hashes: same results).\n";

// The flags that only make sense together, or not at all together. given: the list flags the
// command line set; ctk / ctv: the KV cache types of -ctk / -ctv (or --kv-type); draft_flag: any
// speculative decoding flag was given.
void check_options(Options& o, const std::vector<const std::vector<int>*>& given, const std::string& ctk,
                   const std::string& ctv, bool draft_flag) {
  if (o.model_path.empty() == o.preset.empty()) edgellm::throw_error("give either -m FILE or --preset NAME (see --help)");
  if (!o.write_gguf.empty() && o.preset.empty()) edgellm::throw_error("--write-gguf needs --preset");
  if (o.plan && o.preset.empty()) edgellm::throw_error("--plan needs --preset");
  tool::check_speculative(o.spec, o.draft);
  if (draft_flag && !o.speculative())
    edgellm::throw_error("the --draft-* flags need a draft source: -md FILE, --lookup or --draft-layers N");
  if (o.speculative()) {
    if (o.spec.sample_drafts) edgellm::throw_error("--draft-sample: edgellm-bench decodes greedily (no sampling)");
    if (!o.verify_rows.empty()) edgellm::throw_error("--verify-rows uses a fixed draft: leave out -md, --lookup and --draft-layers");
    if (!o.pg.empty()) edgellm::throw_error("-pg with a draft source: speculative rows are -n rows (give -p and -n apart)");
  }
  if (!o.verify_rows.empty()) {
    auto was_given = [&](const std::vector<int>& v) { return std::find(given.begin(), given.end(), &v) != given.end(); };
    if (was_given(o.n_prompt) || was_given(o.n_gen) || !o.pg.empty())
      edgellm::throw_error("--verify-rows runs its own passes: leave out -p, -n and -pg (-d sets the context)");
    if (o.output != "md" && o.output != "jsonl")
      edgellm::throw_error("-o ", o.output, ": --verify-rows prints md or jsonl");
    o.n_prompt = {0};
    o.n_gen = {0};
  }
  if (o.blocks != edgellm::SyntheticBlocks::Quantized && o.preset.empty())
    edgellm::throw_error("--synthetic-blocks needs --preset");
  if (o.output != "md" && o.output != "csv" && o.output != "json" && o.output != "jsonl" && o.output != "sql")
    edgellm::throw_error("-o ", o.output, ": expected md, csv, json, jsonl or sql");
  // One cache type holds K and V (the paged cache stores both alike): -ctk / -ctv must agree.
  if (!ctk.empty() && !ctv.empty() && ctk != ctv)
    edgellm::throw_error("-ctk ", ctk, " / -ctv ", ctv, ": K and V share one cache type here; give the same one");
  if (!ctk.empty() || !ctv.empty()) o.kv_type = ctk.empty() ? ctv : ctk;
}

// *early: "help" or "version" when one of them was asked for (the other flags are then not checked).
Options parse(int argc, char** argv, std::string* early) {
  Options o;
  o.threads = {edgellm::default_thread_count()};
  tool::Args args(argc, argv);
  std::string f, ctk, ctv;
  bool draft_flag = false;  // any speculative decoding flag
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
    if (f == "-h" || f == "--help") *early = "help";
    else if (f == "--version") *early = "version";
    else if (f == "-m" || f == "--model") o.model_path = args.value(f);
    else if (f == "--preset") o.preset = args.value(f);
    else if (f == "--type") o.mix = args.value(f);
    else if (f == "--seed") o.seed = static_cast<uint64_t>(args.integer(f, 0, INT64_MAX));
    else if (f == "--write-gguf") o.write_gguf = args.value(f);
    else if (f == "--synthetic-blocks") {
      const std::string v = args.value(f);
      if (v == "quantized") o.blocks = edgellm::SyntheticBlocks::Quantized;
      else if (v == "tiled") o.blocks = edgellm::SyntheticBlocks::Tiled;
      else edgellm::throw_error("--synthetic-blocks ", v, ": expected quantized or tiled");
    }
    else if (f == "-p" || f == "--n-prompt") add_list(o.n_prompt, 0, 1 << 20);
    else if (f == "-n" || f == "--n-gen") add_list(o.n_gen, 0, 1 << 20);
    else if (f == "-d" || f == "--n-depth") add_list(o.n_depth, 0, 1 << 20);
    else if (f == "--verify-rows") add_list(o.verify_rows, 1, 64);
    else if (f == "-pg") {
      const std::vector<int> v = edgellm::parse_int_list(args.value(f), f, 0, 1 << 20);
      if (v.size() != 2) edgellm::throw_error("option -pg: expected PP,TG, got ", v.size(), " values");
      o.pg.emplace_back(v[0], v[1]);
    } else if (f == "-t" || f == "--threads") add_list(o.threads, 1, int(tool::kMaxThreads));
    else if (f == "-r" || f == "--repetitions") o.reps = args.integer32(f, 1, 100000);
    else if (f == "-b" || f == "--batch-size" || f == "-ub" || f == "--ubatch-size") o.n_batch = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--kv-type") ctk = ctv = args.value(f);
    else if (f == "-ctk" || f == "--cache-type-k") ctk = args.value(f);
    else if (f == "-ctv" || f == "--cache-type-v") ctv = args.value(f);
    else if (f == "--delay") o.delay_s = args.integer32(f, 0, 3600);
    else if (f == "--membw") o.membw = true;
    else if (f == "--plan") o.plan = true;
    else if (f == "--no-warmup") o.warmup = false;
    else if (f == "--no-repack") o.repack = false;
    else if (f == "--mem-budget") o.mem_budget = tool::mem_budget_bytes(args, f);
    else if (f == "-o" || f == "--output") o.output = args.value(f);
    else if (f == "-v" || f == "--verbose") o.verbose = true;
    else if (tool::speculative_flag(args, f, o.spec, o.draft)) draft_flag = true;
    else if (f != "--grammar" && tool::grammar_flag(args, f, o.grammar)) continue;
    else if (f == "--session-loop") o.session_loop = true;
    else tool::unknown(f);
  }
  if (!early->empty()) return o;
  if (!args.positional().empty()) edgellm::throw_error("unexpected argument '", args.positional()[0], "'");
  check_options(o, given, ctk, ctv, draft_flag);
  return o;
}

// The llama-quantize mix named by general.file_type; without one (files not written by
// llama-quantize), the type most of the matrices have, e.g. "F32".
std::string mix_name_of(const edgellm::GgufFile& f) {
  const int64_t ft = f.get_int_or("general.file_type", -1);
  for (const auto& m : edgellm::quant_mixes())
    if (m.file_type == ft) return m.name;
  std::vector<std::pair<edgellm::DType, int>> counts;
  for (const auto& t : f.tensors()) {
    if (t.n_dims != 2) continue;
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == t.type; });
    if (it == counts.end()) counts.emplace_back(t.type, 1);
    else ++it->second;
  }
  if (counts.empty()) return "ftype" + std::to_string(ft);
  const auto most = std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::string name = edgellm::dtype_name(most->first);
  for (char& c : name) c = char(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

LoadedModel load(const Options& o) {
  LoadedModel lm;
  lm.draft = tool::load_draft(o.draft);  // first: the target's plan leaves its size free
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
      }, &pool, o.blocks);
    } catch (...) {
      if (temporary) std::remove(path.c_str());
      throw;
    }
  }
  try {
    edgellm::LoadOptions lo;
    lo.repack = o.repack;
    lo.mem_budget = o.mem_budget;
    lo.reserved_bytes = tool::draft_reserved_bytes(lm.draft.get());
    // KV for the longest test, as run_once allocates it; one pass of n_batch tokens.
    int n_ctx = 1;
    for (int d : o.n_depth)
      for (int p : o.n_prompt)
        for (int g : o.n_gen) n_ctx = std::max(n_ctx, d + p + g);
    for (const auto& pg : o.pg) n_ctx = std::max(n_ctx, pg.first + pg.second + *std::max_element(o.n_depth.begin(), o.n_depth.end()));
    for (int k : o.verify_rows) n_ctx = std::max(n_ctx, *std::max_element(o.n_depth.begin(), o.n_depth.end()) + k + 1);
    if (o.speculative()) n_ctx += 1 + o.spec.n_max;  // the start token; the drafts of the last verify pass
    lo.plan.n_ctx = n_ctx;
    lm.n_ctx = n_ctx;
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
  if (o.draft.layers > lm.model->config().n_layer)  // before any test runs (the drafter checks it again)
    edgellm::throw_error("--draft-layers ", o.draft.layers, ": the model has ", lm.model->config().n_layer, " layers");
  const int n_ctx_train = lm.model->config().n_ctx_train;
  if (lm.n_ctx > n_ctx_train)
    std::fprintf(stderr, "warning: the longest test (-d + -p + -n) reaches %d tokens, beyond the model's training "
                         "context %d: positions it never saw\n", lm.n_ctx, n_ctx_train);
  for (const auto& t : f.tensors()) {
    lm.size_bytes += t.nbytes;
    lm.n_params += static_cast<uint64_t>(t.n_elements());
  }
  return lm;
}

class Runner {
 public:
  Runner(const LoadedModel& lm, const Options& o, edgellm::DType kv_type, edgellm::ThreadPool* pool)
      : lm_(lm), o_(o), kv_type_(kv_type), n_threads_(pool->n_threads()), ctx_(pool) {}

  // One run of the test from an empty cache: n_depth tokens untimed, then the timed prompt and
  // generation; appends generated-token latencies to token_ms.
  RunTime run_once(const Test& t, std::vector<double>* token_ms) {
    const edgellm::LlamaModel& m = *lm_.model;
    speculative_ran_ = false;
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

  // One speculative -n run (o.speculative()): -d tokens and a start token read untimed, then the
  // timed greedy generation of t.n_gen tokens through the Session's token loop (the start token is
  // read again there for its logits: the pass a plain run's first step is). Adds the run's passes,
  // drafts and accepted drafts to *r.
  RunTime run_speculative(const Test& t, std::vector<double>* token_ms, Result* r) {
    const edgellm::LlamaModel& m = *lm_.model;
    const int n_ctx = t.n_depth + 1 + t.n_gen + o_.spec.n_max + 1;
    if (!session_ || session_->params().n_ctx < n_ctx) {
      edgellm::SessionParams sp;
      sp.n_ctx = n_ctx;
      sp.n_batch = o_.n_batch;
      sp.n_threads = n_threads_;
      sp.kv_type = kv_type_;
      session_.reset();
      session_ = std::make_unique<edgellm::Session>(
          lm_.model, std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(m.file())), sp);
      session_->set_draft(lm_.draft, o_.draft.layers);
    }
    session_->reset();
    const int n_vocab = m.config().n_vocab;
    uint64_t rng = 7;  // as run_once: the depth's tokens, then the timed part's from 42
    std::vector<int32_t> toks;
    for (int i = 0; i < t.n_depth; ++i) toks.push_back(static_cast<int32_t>(edgellm::detail::splitmix64(rng) % uint64_t(n_vocab)));
    rng = 42;
    toks.push_back(static_cast<int32_t>(edgellm::detail::splitmix64(rng) % uint64_t(n_vocab)));
    session_->eval(toks);
    edgellm::GenerateParams gp;
    gp.max_tokens = t.n_gen;
    gp.sampler.temperature = 0.0f;
    gp.ignore_eos = true;
    gp.add_bos = false;
    gp.speculative = o_.spec;
    if (o_.constrained()) {
      if (!grammar_.masker) {  // compiled once: later runs reuse its mask cache, as a server's requests do
        const std::string looped = o_.grammar.gbnf + "\nedgellm-bench-repeat ::= (root [ \\t\\n]{0,2})+\n";
        grammar_.masker = std::make_shared<const edgellm::TokenMasker>(
            std::make_shared<const edgellm::Grammar>(edgellm::Grammar::parse(looped, "edgellm-bench-repeat")),
            edgellm::grammar_vocab_of(session_->tokenizer()));
      }
      gp.grammar = grammar_;
    }
    const edgellm::Timer timer;
    const double cpu0 = cpu_seconds();
    const edgellm::GenerateResult g = session_->generate("", gp);
    const RunTime rt{timer.seconds(), cpu_seconds() - cpu0};
    if (static_cast<int>(g.tokens.size()) != t.n_gen)
      edgellm::throw_error("speculative run of ", t.name(), " stopped after ", g.tokens.size(), " tokens (",
                           edgellm::stop_reason_name(g.reason), ")");
    if (token_ms) token_ms->insert(token_ms->end(), g.token_ms.begin(), g.token_ms.end());
    if (r) {
      r->grammar_ms += g.grammar_ms;
      r->n_passes += g.n_passes;
      r->n_drafted += g.n_drafted;
      r->n_accepted += g.n_accepted;
    }
    tokens_hash_ = edgellm::tokens_hash(g.tokens.data(), g.tokens.size());
    speculative_ran_ = true;
    return rt;
  }

  uint32_t last_hash() const {
    if (speculative_ran_) return tokens_hash_;
    if (ctx_.n_outputs() == 0) return 0;
    return edgellm::logits_hash(ctx_.logits(ctx_.n_outputs() - 1), size_t(lm_.model->config().n_vocab));
  }

 private:
  const LoadedModel& lm_;
  const Options& o_;
  edgellm::DType kv_type_;
  int n_threads_;
  edgellm::LlamaContext ctx_;
  std::unique_ptr<edgellm::PagedKvCache> kv_;
  int seq_ = 0;
  std::unique_ptr<edgellm::Session> session_;  // speculative runs: its own pool, cache and draft
  edgellm::GrammarParams grammar_;              // --grammar-file / --json-schema rows
  uint32_t tokens_hash_ = 0;
  bool speculative_ran_ = false;  // the last run was speculative: its hash is of the tokens
};

Result run_test(Runner& runner, const Test& t, const Options& o, int n_threads, double membw_gbps,
                const LoadedModel& lm) {
  Result r;
  r.test = t;
  r.n_threads = n_threads;
  r.speculative = o.session_rows() && t.n_prompt == 0;
  auto run = [&](const Test& x, std::vector<double>* token_ms, Result* into) {
    return r.speculative ? runner.run_speculative(x, token_ms, into) : runner.run_once(x, token_ms);
  };
  reset_peak_rss();
  if (o.warmup) {
    // As llama-bench: the whole prompt, or one generated token (pages the weights in); a
    // speculative run as far as its first verify pass (the draft model reads the -d tokens).
    Test w = t;
    if (w.n_prompt == 0) w.n_gen = r.speculative ? std::min(t.n_gen, o.spec.n_max + 2) : 1;
    else w.n_gen = 0;
    run(w, nullptr, nullptr);
  }
  const edgellm::WeightStream* st = lm.model->weight_stream();
  const edgellm::StreamStats st0 = st ? st->stats() : edgellm::StreamStats{};
  const uint64_t io0 = edgellm::process_read_bytes();
  for (int rep = 0; rep < o.reps; ++rep) {
    const RunTime rt = run(t, &r.token_ms, &r);
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

int bench_main(int argc, char** argv) {
  std::string early;
  const Options o = parse(argc, argv, &early);
  if (early == "version") return tool::print_version("edgellm-bench");
  if (early == "help") {
    for (const char* part : {kUsage, kUsageOutput, kUsageSpeculative, tool::kSpeculativeUsage, kUsageSpeculativeRows})
      std::fputs(part, stdout);
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
  if (tests.empty() && o.verify_rows.empty()) edgellm::throw_error("nothing to run: every -p / -n / -pg value is 0");

  const LoadedModel lm = load(o);
  if (o.verbose) describe(lm);
  if (!o.verify_rows.empty()) {
    for (size_t i = 0; i < o.threads.size(); ++i) {
      edgellm::ThreadPool pool(o.threads[i]);
      std::fprintf(stderr, "edgellm-bench: verify passes of 1 + {k} rows, %d threads ...\n", o.threads[i]);
      print_verify(lm, o, o.threads[i], run_verify(lm, o, kv_type, &pool), i == 0);
    }
    return 0;
  }
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
      if (o.verbose && r.speculative && o.constrained() && t.n_gen > 0)
        std::fprintf(stderr, "grammar (%s): %.1f us per token in masks and steps, %.1f %% of the run\n", o.grammar.flag.c_str(),
                     r.grammar_ms * 1e3 / (double(t.n_gen) * o.reps), 100.0 * r.grammar_ms * 1e6 / (r.avg_ns * o.reps));
    }
  }
  out.footer();
  return 0;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  return tool::run([&] { return bench::bench_main(argc, argv); });
}
