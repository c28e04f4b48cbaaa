// edgellm-perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [-t T] [--kl-divergence-base F [--kl-divergence]]:
// perplexity with llama-perplexity's chunking (engine/perplexity.hpp); per chunk "[i]PPL" lines and,
// last, "Final estimate: PPL = X +/- Y". With --kl-divergence-base F alone the base model's
// log-probs are saved to F; adding --kl-divergence compares MODEL against F (mean KLD, top-1, ΔPPL).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <edgellm/engine/perplexity.hpp>
#include <edgellm/runtime/timer.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "common.hpp"

namespace {

using namespace edgellm;

const char* kUsage =
    "usage: edgellm-perplexity -m MODEL.gguf -f TEXT.txt [-c CTX=512] [--chunks N] [-t THREADS]\n"
    "                          [--kl-divergence-base FILE [--kl-divergence]] [--mem-budget MIB]\n"
    "  --mem-budget MIB         memory the model may use; what does not fit streams from storage\n"
    "  --kl-divergence-base F   alone: save the model's log-probs of the scored positions to F\n"
    "  --kl-divergence          compare the model against F (tokens come from F; -f not needed)\n";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("file ", path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Options {
  tool::ModelFlags m;
  std::string text, kl_base;
  int n_ctx = 512, chunks = -1;
  bool kl_compare = false;
};

int run_perplexity(const Options& o, const LlamaModel& model, const Tokenizer& tok, ThreadPool& pool) {
  const std::vector<int32_t> tokens = tok.encode(read_text(o.text), tok.add_bos(), /*parse_special=*/false);
  const PplChunking c = PplChunking::make(tokens.size(), o.n_ctx, o.chunks);
  const int n_vocab = model.config().n_vocab;
  std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, scoring positions %d..%d of each\n", tokens.size(),
               c.n_chunk, c.n_ctx, c.first, c.n_ctx - 2);
  std::vector<int32_t> all_windows;
  for (int i = 0; i < c.n_chunk; ++i) {
    const auto w = c.window(tokens, i, tok.add_bos(), tok.bos());
    all_windows.insert(all_windows.end(), w.begin(), w.end());
  }
  std::unique_ptr<KlBaseWriter> base;
  if (!o.kl_base.empty()) base = std::make_unique<KlBaseWriter>(o.kl_base, c, n_vocab, all_windows);

  LlamaContext ctx(&pool);
  PplAccumulator acc;
  std::vector<float> logits, logp(base ? size_t(c.n_scored()) * size_t(n_vocab) : 0);
  Timer clock;
  for (int i = 0; i < c.n_chunk; ++i) {
    const std::vector<int32_t> w(all_windows.begin() + std::ptrdiff_t(i) * c.n_ctx, all_windows.begin() + std::ptrdiff_t(i + 1) * c.n_ctx);
    eval_window(model, ctx, w, c.first, logits);
    for (int j = 0; j < c.n_scored(); ++j) {
      const float* row = logits.data() + size_t(j) * size_t(n_vocab);
      acc.add(log_softmax_at(row, n_vocab, w[size_t(c.first + j + 1)]));
      if (base) log_softmax_row(row, n_vocab, logp.data() + size_t(j) * size_t(n_vocab));
    }
    if (base) base->add_chunk(logp);
    if (i == 0) std::fprintf(stderr, "perplexity: %.2f s per chunk\n", clock.seconds());
    std::printf("[%d]%.4f\n", i + 1, acc.ppl());
    std::fflush(stdout);
  }
  if (base) {
    base->close();
    std::fprintf(stderr, "saved base log-probs to %s\n", o.kl_base.c_str());
  }
  std::fprintf(stderr, "perplexity: %lld scored tokens in %.2f s\n", static_cast<long long>(acc.count()), clock.seconds());
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", acc.ppl(), acc.ppl_error());
  return 0;
}

int run_kl(const Options& o, const LlamaModel& model, ThreadPool& pool) {
  KlBaseReader base(o.kl_base);
  const PplChunking c = base.chunking();
  const int n_vocab = model.config().n_vocab;
  if (base.n_vocab() != n_vocab) throw_error("file ", o.kl_base, ": base vocabulary has ", base.n_vocab(), " tokens, the model ", n_vocab);
  const int n_chunk = o.chunks >= 0 ? std::min(o.chunks, c.n_chunk) : c.n_chunk;
  LlamaContext ctx(&pool);
  PplAccumulator ppl_q, ppl_b;
  SampleStats kld, dp;
  int64_t same_top = 0, n_pos = 0;
  std::vector<float> logits, blogp, logp(static_cast<size_t>(n_vocab));
  std::printf("chunk   PPL(Q)     PPL(base)  ln(PPL(Q)/PPL(base))  mean KLD    same top\n");
  for (int i = 0; i < n_chunk; ++i) {
    const std::vector<int32_t> w = base.window(i);
    base.next_chunk(blogp);
    eval_window(model, ctx, w, c.first, logits);
    for (int j = 0; j < c.n_scored(); ++j) {
      const float* row = logits.data() + size_t(j) * size_t(n_vocab);
      const float* brow = blogp.data() + size_t(j) * size_t(n_vocab);
      const int32_t next = w[size_t(c.first + j + 1)];
      log_softmax_row(row, n_vocab, logp.data());
      ppl_q.add(logp[size_t(next)]);
      ppl_b.add(brow[next]);
      kld.add(kl_divergence(brow, logp.data(), n_vocab));
      dp.add(std::exp(double(logp[size_t(next)])) - std::exp(double(brow[next])));
      same_top += argmax_row(brow, n_vocab) == argmax_row(logp.data(), n_vocab) ? 1 : 0;
      ++n_pos;
    }
    std::printf("%5d %10.4f %10.4f %21.6f %11.6f %9.3f%%\n", i + 1, ppl_q.ppl(), ppl_b.ppl(), std::log(ppl_q.ppl() / ppl_b.ppl()),
                kld.mean(), 100.0 * double(same_top) / double(n_pos));
    std::fflush(stdout);
  }
  std::printf("\nMean PPL(Q)          : %.6f +/- %.6f\n", ppl_q.ppl(), ppl_q.ppl_error());
  std::printf("Mean PPL(base)       : %.6f +/- %.6f\n", ppl_b.ppl(), ppl_b.ppl_error());
  std::printf("Delta PPL            : %.6f\n", ppl_q.ppl() - ppl_b.ppl());
  std::printf("ln(PPL(Q)/PPL(base)) : %.6f\n", std::log(ppl_q.ppl() / ppl_b.ppl()));
  std::printf("Mean KLD             : %.6f +/- %.3g\n", kld.mean(), kld.mean_error());
  std::printf("Median KLD           : %.6f\n", kld.quantile(0.5));
  std::printf("99.0%% KLD            : %.6f\n", kld.quantile(0.99));
  std::printf("Maximum KLD          : %.6f\n", kld.quantile(1.0));
  std::printf("Mean Delta p         : %.4f%% +/- %.4f%%\n", 100 * dp.mean(), 100 * dp.mean_error());
  std::printf("Same top p           : %.3f%% (%lld / %lld)\n", 100.0 * double(same_top) / double(n_pos),
              static_cast<long long>(same_top), static_cast<long long>(n_pos));
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl_q.ppl(), ppl_q.ppl_error());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    Options o;
    for (std::string f; args.next(f);) {
      if (tool::standard_flag(f, kUsage, "edgellm-perplexity")) return 0;
      else if (tool::model_flag(args, f, o.m)) continue;
      else if (tool::chunked_text_flag(args, f, o.text, o.n_ctx, o.chunks)) continue;
      else if (f == "--kl-divergence-base") o.kl_base = args.value(f);
      else if (f == "--kl-divergence") o.kl_compare = true;
      else tool::unknown(f);
    }
    args.no_positional();
    if (o.m.path.empty()) throw_error("-m MODEL is required (see --help)");
    if (o.kl_compare && o.kl_base.empty()) throw_error("--kl-divergence needs --kl-divergence-base FILE");
    if (!o.kl_compare && o.text.empty()) throw_error("-f TEXT is required");

    LoadOptions lo;
    lo.mem_budget = o.m.mem_budget;
    lo.plan.n_ctx = o.n_ctx;
    lo.plan.n_batch = o.n_ctx;
    lo.plan.n_threads = o.m.threads;
    auto model = LlamaModel::load(o.m.path, lo);
    ThreadPool pool(o.m.threads > 0 ? o.m.threads : default_thread_count());
    if (o.kl_compare) return run_kl(o, *model, pool);
    const Tokenizer tok(Vocab::from_gguf(model->file()));
    return run_perplexity(o, *model, tok, pool);
  });
}
