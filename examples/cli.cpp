// edgellm-cli: llama-cli-like text generation. The continuation goes to stdout; logs, the memory
// plan (-v) and timings go to stderr. --keep/--window turn on sinks+window KV eviction (endless
// generation in fixed memory); --parallel N decodes N continuations of one prompt in one batch. Without -m it runs a small synthetic random-weight model
// (built in memory) so a fresh machine can see the whole pipeline work.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <edgellm/engine/session.hpp>
#include <edgellm/kernels/select.hpp>
#include <edgellm/model/memory_plan.hpp>
#include <edgellm/text/chat.hpp>
#include <edgellm/tools/bench_stats.hpp>
#include <edgellm/tools/synthetic.hpp>
#include <edgellm/version.hpp>

#include "common.hpp"
#include "speculative_flags.hpp"

namespace {

const char* kUsage =
    "usage: edgellm-cli [-m MODEL.gguf] [-p PROMPT] [options]\n"
    "  -m, --model FILE       GGUF model (without it: a synthetic random-weight demo model)\n"
    "  -p, --prompt TEXT      prompt (with --chat: the user message; without -p, --chat reads turns from stdin)\n"
    "  -f, --file FILE        read the prompt from FILE\n"
    "  -n, --n-predict N      tokens to generate (default 128; -1 = until EOS or the context is full)\n"
    "  -c, --ctx-size N       context size (default 0 = the model's training context, at most 4096)\n"
    "  -b, --batch-size N     prompt tokens per forward pass (default 512)\n"
    "  -t, --threads N        threads (default 0 = every hardware thread)\n"
    "  --temp X --top-k K --top-p P --min-p P --repeat-penalty X --repeat-last-n N\n"
    "  --frequency-penalty X --presence-penalty X --seed S   sampling (defaults: temp 0.8, top-k 40,\n"
    "                         top-p 0.95, min-p 0.05, seed 24301; temp 0 = greedy, top-k 0 = off)\n"
    "  --chat                 apply the model's own chat template (Jinja), --system TEXT for a system turn\n"
    "  --chat-template NAME   a built-in format (chatml, llama3, ...) or Jinja source instead (implies --chat)\n"
    "  --chat-template-file F a Jinja chat template file (implies --chat)\n"
    "  --chat-template-kwargs JSON  template variables, e.g. '{\"enable_thinking\": false}'\n"
    "  --reasoning-budget N   -1 (default): unrestricted; 0: thinking off where the template supports it\n"
    "  --stop TEXT            stop string (repeatable)\n"
    "  --grammar GBNF, --grammar-file F   the answer must match this GBNF grammar (llama.cpp's syntax)\n"
    "  --json-schema JSON, --json-schema-file F   the answer must be JSON valid for this schema\n"
    "  --deadline-ms MS       wall-clock budget: the answer ends before it\n"
    "  --ignore-eos           keep generating past end-of-generation tokens\n"
    "  --kv-block N           KV cache block size in tokens (default 16)\n"
    "  --kv-type T            KV storage: f32 (default), f16, q8_0 (q8_0 needs head dim % 32 == 0)\n"
    "  --kv-recent N          with f16/q8_0: also keep the last N positions in f32\n"
    "  --kv-budget-mb X       KV byte budget in MiB (default: none beyond -c)\n"
    "  --keep N --window W    when the context is full, keep the first N tokens and the last W, drop\n"
    "                         whole KV blocks in between (generation goes on in fixed memory)\n"
    "  --prompt-cache FILE    restore the session state saved in FILE (the longest prefix it shares\n"
    "                         with the prompt is reused) and save the state after the prompt to it\n"
    "  --parallel N           N continuations of the prompt (seeds S, S+1, ...) decoded in one batch\n"
    "  --timings              print time to first token, per-token latency and peak RSS\n"
    "  --no-display-prompt    on a terminal, do not show the prompt before its continuation (stdout\n"
    "                         that is not a terminal carries the continuation alone either way)\n"
    "  --no-repack            keep every weight matrix as stored in the file (default: matrices of\n"
    "                         types with an interleaved form, e.g. q4_0 / q8_0 on x86, are repacked\n"
    "                         at load; -v lists them)\n"
    "  --mem-budget MIB       memory the model may use (weights, KV at -c, scratch); a model larger than\n"
    "                         that keeps what fits resident and streams the rest from storage on every\n"
    "                         token (default: what this process may use: MemAvailable or the cgroup\n"
    "                         limit, less a margin; a model that fits loads as without a budget)\n"
    "%s"
    "  -v, --verbose          print kernels, repacked matrices and memory plan (with speculative\n"
    "                         decoding: acceptance rate and tokens per target pass)\n"
    "  --version              print the version\n";

struct Options {
  tool::ModelFlags m;
  std::string prompt, system_prompt, prompt_cache;
  tool::ChatFlags chat_flags;
  tool::GrammarFlags grammar;
  bool have_prompt = false, chat = false, verbose = false, timings = false, repack = true;
  int n_parallel = 1;
  bool display_prompt = true;
  edgellm::GenerateParams gp;
  edgellm::SessionParams sp;
  tool::DraftFlags draft;
};

// *early: true when --help or --version was answered (the other flags are then not checked).
Options parse(int argc, char** argv, bool* early) {
  tool::Args args(argc, argv);
  Options o;
  auto& gp = o.gp;
  auto& sp = o.sp;
  bool have_keep = false;
  sp.n_ctx = 0;
  gp.sampler.temperature = 0.8f;
  gp.sampler.repeat_penalty = 1.0f;
  for (std::string f; args.next(f);) {
    if (f == "-h" || f == "--help") {
      std::printf(kUsage, tool::kSpeculativeUsage);
      *early = true;
      return o;
    }
    if (tool::standard_flag(f, kUsage, "edgellm-cli")) { *early = true; return o; }
    else if (tool::model_flag(args, f, o.m)) continue;
    else if (f == "-p" || f == "--prompt") { o.prompt = args.value(f); o.have_prompt = true; }
    else if (f == "-f" || f == "--file") { o.prompt = tool::read_text_file(args.value(f), f); o.have_prompt = true; }
    else if (f == "-n" || f == "--n-predict") gp.max_tokens = args.integer32(f, -1, tool::kMaxTokens);
    else if (f == "-c" || f == "--ctx-size") sp.n_ctx = tool::ctx_flag(args, f);
    else if (f == "-b" || f == "--batch-size") sp.n_batch = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--temp") gp.sampler.temperature = static_cast<float>(args.number(f, 0, 1e6));
    else if (f == "--top-k") gp.sampler.top_k = args.integer32(f, 0, 1 << 30);
    else if (f == "--top-p") gp.sampler.top_p = static_cast<float>(args.number(f, 0, 1));
    else if (f == "--min-p") gp.sampler.min_p = static_cast<float>(args.number(f, 0, 1));
    else if (f == "--repeat-penalty") gp.sampler.repeat_penalty = static_cast<float>(args.number(f, 1e-6, 1e6));
    else if (f == "--repeat-last-n") gp.sampler.penalty_last_n = args.integer32(f, -1, tool::kMaxContext);
    else if (f == "--frequency-penalty") gp.sampler.frequency_penalty = static_cast<float>(args.number(f, -1e6, 1e6));
    else if (f == "--presence-penalty") gp.sampler.presence_penalty = static_cast<float>(args.number(f, -1e6, 1e6));
    else if (f == "--seed" || f == "-s") gp.sampler.seed = static_cast<uint64_t>(args.integer(f, 0, INT64_MAX));
    else if (f == "--chat" || f == "-cnv") o.chat = true;
    else if (f == "--chat-template" || f == "--chat-template-file") { tool::chat_flag(args, f, o.chat_flags); o.chat = true; }
    else if (tool::chat_flag(args, f, o.chat_flags)) continue;
    else if (f == "--system") o.system_prompt = args.value(f);
    else if (f == "--stop") gp.stop.push_back(args.value(f));
    else if (tool::grammar_flag(args, f, o.grammar)) continue;
    else if (f == "--deadline-ms") gp.deadline_ms = args.number(f, 0, 1e12);
    else if (f == "--ignore-eos") gp.ignore_eos = true;
    else if (tool::kv_flag(args, f, sp)) continue;
    else if (tool::speculative_flag(args, f, gp.speculative, o.draft)) continue;
    else if (f == "--keep") { sp.n_keep = args.integer32(f, 0, tool::kMaxContext); have_keep = true; }
    else if (f == "--window") sp.n_window = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--prompt-cache") o.prompt_cache = args.value(f);
    else if (f == "--parallel") o.n_parallel = args.integer32(f, 1, 256);
    else if (f == "--timings") o.timings = true;
    else if (f == "--no-display-prompt") o.display_prompt = false;
    else if (f == "-v" || f == "--verbose") o.verbose = true;
    else if (f == "--no-repack") o.repack = false;
    else tool::unknown(f);
  }
  args.no_positional();
  sp.n_threads = o.m.threads;
  if (have_keep && sp.n_window == 0) edgellm::throw_error("--keep needs --window W (W >= 1)");
  if (o.n_parallel > 1 && o.chat) edgellm::throw_error("--parallel is not available with --chat");
  if (o.n_parallel > 1 && !o.prompt_cache.empty()) edgellm::throw_error("--prompt-cache is not available with --parallel");
  tool::check_speculative(gp.speculative, o.draft);
  return o;
}

// The model of -m (or the synthetic demo model, whose default prompt then fills o.prompt), with the
// draft model first: with --mem-budget its size is the target's less.
struct Loaded {
  std::shared_ptr<const edgellm::LlamaModel> draft_model;
  std::shared_ptr<const edgellm::LlamaModel> model;
  std::shared_ptr<const edgellm::Tokenizer> tok;
};

Loaded load(Options& o) {
  const auto& m = o.m;
  auto& sp = o.sp;
  Loaded l;
  l.draft_model = tool::load_draft(o.draft);  // first: the target's plan leaves its size free

  edgellm::LoadOptions load;
  load.repack = o.repack;
  load.mem_budget = m.mem_budget;
  load.reserved_bytes = tool::draft_reserved_bytes(l.draft_model.get());
  load.plan = edgellm::memory_plan_params(sp, o.n_parallel);
  std::shared_ptr<const edgellm::LlamaModel>& model = l.model;
  if (m.path.empty()) {
    std::fprintf(stderr, "edgellm-cli: no -m given: running a synthetic random-weight model (preset 'tiny', "
                         "q8_0), so the output is noise. Try -m ../shared/data/models/stories260K.gguf\n");
    const auto bytes = edgellm::build_synthetic_gguf(edgellm::synthetic_preset("tiny"), edgellm::DType::Q8_0);
    model = std::make_shared<const edgellm::LlamaModel>(edgellm::GgufFile::from_bytes(bytes, "synthetic-tiny.gguf"), load);
    if (!o.have_prompt && !o.chat) { o.prompt = "Hello"; o.have_prompt = true; }
  } else {
    if (::isatty(STDERR_FILENO)) load.progress = tool::load_progress(true, m.path);
    model = edgellm::LlamaModel::load(m.path, load);
  }
  const auto& cfg = model->config();
  l.tok = std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(model->file()));
  o.gp.grammar = tool::grammar_params(o.grammar, *l.tok);
  if (sp.n_ctx == 0) sp.n_ctx = std::min(cfg.n_ctx_train, 4096);
  if (sp.n_ctx > cfg.n_ctx_train)
    std::fprintf(stderr, "warning: -c %d is above the model's training context %d\n", sp.n_ctx, cfg.n_ctx_train);
  return l;
}

// -v: kernels, repacked matrices, residency and the KV cache's memory plan.
void describe(const edgellm::LlamaModel& m, const edgellm::SessionParams& sp) {
  const auto* model = &m;
  const auto& cfg = model->config();
  const auto& kt = model->kernel_table();
  std::fprintf(stderr, "edgellm %s, model %s: %d layers, dim %d, heads %d/%d, ffn %d, vocab %d, ctx_train %d\n",
               EDGELLM_VERSION_STRING, model->file().path().c_str(), cfg.n_layer, cfg.n_embd, cfg.n_head,
               cfg.n_head_kv, cfg.n_ff, cfg.n_vocab, cfg.n_ctx_train);
  std::fprintf(stderr, "%s", edgellm::describe_kernels(kt).c_str());
  std::fprintf(stderr, "%s", model->weights().describe_repack().c_str());
  std::fprintf(stderr, "%s", model->weights().describe_residency().c_str());
  const edgellm::PagedKvCache probe(model->kv_params(sp.n_ctx, sp.kv_block_size, sp.kv_max_bytes, sp.kv_type, sp.kv_recent_f32));
  const double kv_tok = static_cast<double>(probe.bytes_per_token());
  std::fprintf(stderr, "memory plan: weights %s (%s); KV %s %s per token (%d layers x 2 x %d), blocks of %d tokens = %s, "
                       "allocated as tokens arrive: %s at -c %d if full",
               edgellm::format_bytes(model->file().file_size()).c_str(), model->file().mapped() ? "mapped" : "in memory",
               edgellm::dtype_name(sp.kv_type), edgellm::format_bytes(static_cast<uint64_t>(kv_tok)).c_str(), cfg.n_layer, cfg.kv_dim(), sp.kv_block_size,
               edgellm::format_bytes(probe.block_bytes()).c_str(), edgellm::format_bytes(static_cast<uint64_t>(kv_tok * sp.n_ctx)).c_str(), sp.n_ctx);
  if (probe.shadow_bytes()) std::fprintf(stderr, "; f32 copy of the last %d positions %s per sequence", sp.kv_recent_f32, edgellm::format_bytes(probe.shadow_bytes()).c_str());
  if (sp.kv_max_bytes) std::fprintf(stderr, "; budget %s", edgellm::format_bytes(sp.kv_max_bytes).c_str());
  if (sp.n_window) std::fprintf(stderr, "; eviction keeps %d sink + %d recent tokens", sp.n_keep, sp.n_window);
  std::fputc('\n', stderr);
}

bool emit(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
  return true;
}

// One session's generations with the reports the flags ask for.
struct Generator {
  const Options& o;
  edgellm::Session& session;
  bool speculative;
  bool cache_read = false;

  void report(const edgellm::GenerateResult& r, bool kv_line) const {
    const bool verbose = o.verbose, timings = o.timings;
    // Stops the user did not ask for are said even without -v.
    if (!verbose && !timings) {
      if (r.reason == edgellm::StopReason::ContextFull)
        std::fprintf(stderr, "\n[stopped: the context of %d tokens is full; a larger -c, or --keep N --window W, goes on]\n",
                     session.params().n_ctx);
      else if (r.reason == edgellm::StopReason::Deadline)
        std::fprintf(stderr, "\n[stopped: the --deadline-ms budget ran out]\n");
    }
    if (verbose || timings) {
      std::fprintf(stderr, "\n[stop: %s] prompt %d tokens in %.1f ms (%.1f t/s), %zu tokens generated, decode %.2f t/s\n",
                   edgellm::stop_reason_name(r.reason), r.n_prompt, r.prefill_ms, r.prefill_tps(), r.tokens.size(),
                   r.decode_tps());
    }
    if (verbose && speculative) tool::print_speculative(r);
    if ((verbose || timings) && kv_line) {
      const auto& kv = session.kv_cache();
      std::fprintf(stderr, "KV cache: %d blocks in use (%d allocated at peak), %s, %d tokens held, %d evicted\n",
                   kv.blocks_used(), kv.blocks_allocated(), edgellm::format_bytes(kv.bytes_allocated()).c_str(),
                   session.n_past(), session.n_evicted());
    }
    if (timings)
      std::fprintf(stderr, "timings: ttft %.1f ms, per token p50 %.2f ms p90 %.2f ms p99 %.2f ms, peak RSS %s\n",
                   r.ttft_ms, edgellm::stats_percentile(r.token_ms, 50), edgellm::stats_percentile(r.token_ms, 90), edgellm::stats_percentile(r.token_ms, 99),
                   edgellm::format_bytes(r.peak_rss_bytes).c_str());
  }

  // A prompt's tokens after what the session holds. With --prompt-cache (llama.cpp's semantics)
  // the state saved in the file is restored first, the longest prefix it shares with the prompt
  // kept, and the state after the prompt (all of it but the last token, which generate() reads
  // for its logits) saved before generating.
  edgellm::GenerateResult generate_tokens(const std::vector<int32_t>& full) {
    const std::string& prompt_cache = o.prompt_cache;
    if (!prompt_cache.empty() && !cache_read) {
      cache_read = true;
      if (std::FILE* f = std::fopen(prompt_cache.c_str(), "rb")) {
        std::fclose(f);
        session.restore(prompt_cache);
      }
    }
    const int held = session.n_past();
    std::vector<int32_t> delta = session.keep_common_prefix(full);
    if (!prompt_cache.empty()) {
      if (o.verbose || o.timings)
        std::fprintf(stderr, "prompt cache %s: %zu of the prompt's %zu tokens reused (%d held)\n", prompt_cache.c_str(),
                     full.size() - delta.size(), full.size(), held);
      if (delta.size() > 1) session.eval(std::vector<int32_t>(delta.begin(), delta.end() - 1));
      session.save(prompt_cache);
      delta.erase(delta.begin(), delta.end() - 1);
    }
    return session.generate(delta, o.gp, emit);
  }
};

// --parallel N: N continuations of the prompt decoded in one batch.
int run_parallel(Generator& g) {
  const Options& o = g.o;
  const auto& gp = o.gp;
  if (!o.have_prompt) edgellm::throw_error("-p PROMPT is required");
  const auto rs = g.session.generate_parallel(o.prompt, o.n_parallel, gp);
  for (size_t i = 0; i < rs.size(); ++i) {
    std::printf("--- continuation %zu (seed %llu) ---\n%s\n", i + 1,
                static_cast<unsigned long long>(gp.sampler.seed + i), rs[i].text.c_str());
    g.report(rs[i], i + 1 == rs.size());
  }
  size_t total = 0;
  double ms = 0;
  for (const auto& r : rs) {
    total += r.tokens.size();
    ms = std::max(ms, r.prefill_ms + r.decode_ms);
  }
  if (o.verbose || o.timings)
    std::fprintf(stderr, "parallel: %d continuations, %zu tokens in %.1f ms (%.1f t/s overall, one weight pass per step)\n",
                 o.n_parallel, total, ms, ms > 0 ? static_cast<double>(total) * 1e3 / ms : 0.0);
  return 0;
}

// One continuation of -p.
int run_prompt(Generator& g, const edgellm::Tokenizer& tok, bool stdout_is_terminal) {
  const Options& o = g.o;
  const auto& gp = o.gp;
  if (!o.have_prompt) edgellm::throw_error("-p PROMPT is required (or --chat to read from stdin)");
  // As llama-cli, the prompt is shown before its continuation — on a terminal only, so what a
  // script reads from stdout stays the continuation alone.
  if (o.display_prompt && stdout_is_terminal) std::fputs(o.prompt.c_str(), stdout);
  const auto r = o.prompt_cache.empty()
                     ? g.session.generate(o.prompt, gp, emit)
                     : g.generate_tokens(tok.encode(o.prompt, gp.add_bos && tok.add_bos(), gp.parse_special));
  std::fputc('\n', stdout);
  g.report(r, true);
  return 0;
}

// Chat: the model's own template (or --chat-template / --chat-template-file), one user turn
// from -p, or turns from stdin. What the user types is tokenized as text: "<|im_end|>" typed
// in a message is those characters, not the control token.
int run_chat(Generator& g, const edgellm::LlamaModel& model, const edgellm::Tokenizer& tok, bool stdout_is_terminal) {
  const Options& o = g.o;
  tool::ChatFlags chat_flags = o.chat_flags;  // the template may set its kwargs (--reasoning-budget 0)
  const edgellm::ChatTemplate tmpl =
      tool::chat_template_of(chat_flags, model.file().get_string_or("tokenizer.chat_template", ""), tok);
  edgellm::ChatRequest req;
  req.kwargs = chat_flags.kwargs;
  if (!o.system_prompt.empty()) req.messages.push_back({"system", o.system_prompt});
  auto turn = [&](const std::string& user) {
    req.messages.push_back({"user", user});
    // Only the new tokens are read when the cache holds the conversation so far.
    const auto r = g.generate_tokens(tmpl.tokenize(req, tok));
    std::fputc('\n', stdout);
    g.report(r, true);
    req.messages.push_back({"assistant", r.text});
  };
  if (o.have_prompt) {
    turn(o.prompt);
    return 0;
  }
  const bool interactive = stdout_is_terminal && ::isatty(STDIN_FILENO);
  if (interactive)
    std::fprintf(stderr, "chat (%s template): type a message and Enter; Ctrl-D or an empty line ends\n",
                 tmpl.is_jinja() ? "the model's Jinja" : tmpl.name().c_str());
  for (std::string line;;) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line) || (interactive && line.empty())) break;
    if (!line.empty()) turn(line);
  }
  return 0;
}

int cli_main(int argc, char** argv) {
  bool early = false;
  Options o = parse(argc, argv, &early);
  if (early) return 0;
  const bool stdout_is_terminal = ::isatty(STDOUT_FILENO);
  const bool speculative = tool::has_draft_source(o.gp.speculative, o.draft);
  const Loaded l = load(o);
  const auto& model = l.model;
  const auto& sp = o.sp;
  if (o.verbose) describe(*model, sp);
  // Model + KV at the chosen context against this machine's RAM: shown with -v, and as a warning
  // naming the numbers whenever it does not fit.
  const auto plan = edgellm::plan_memory(model->config(), model->file().file_size(), edgellm::memory_plan_params(sp, o.n_parallel));
  if (o.verbose || (!plan.fits && !model->residency().streaming)) std::fputs(edgellm::format_memory_plan(plan).c_str(), stderr);

  edgellm::Session session(model, l.tok, sp);
  session.set_draft(l.draft_model, o.draft.layers);
  Generator g{o, session, speculative};
  if (!o.chat && o.n_parallel > 1) return run_parallel(g);
  if (!o.chat) return run_prompt(g, *l.tok, stdout_is_terminal);
  return run_chat(g, *model, *l.tok, stdout_is_terminal);
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] { return cli_main(argc, argv); });
}
