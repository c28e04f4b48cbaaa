// edgellm-imatrix -m MODEL -f TEXT [-c N] [--chunks N] [-b N] [-o OUT] [--output-format gguf|dat]:
// the importance matrix of MODEL over TEXT, as llama-imatrix computes it (quant/imatrix.hpp), for
// edgellm-quantize --imatrix. The text is cut into chunks of -c tokens (the first of each replaced
// by BOS when the vocabulary adds one; a short tail is dropped), -b / -c chunks are evaluated at a
// time as separate sequences, and every token of every chunk adds the squares of each matmul
// weight's input columns (weights of the layers, "blk.*"; the output too with --process-output).
// Per chunk "[i]PPL" on stdout (llama-imatrix's perplexity: the second half of each chunk), a
// progress line on stderr when it is a terminal.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include <edgellm/engine/perplexity.hpp>
#include <edgellm/quant/imatrix.hpp>
#include <edgellm/runtime/timer.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "common.hpp"

namespace {

using namespace edgellm;

const char* kUsage =
    "usage: edgellm-imatrix -m MODEL.gguf -f TEXT.txt [-c CTX=512] [--chunks N] [-b BATCH=2048] [-t THREADS]\n"
    "                       [-o OUT=imatrix.gguf] [--output-format gguf|dat] [--process-output] [--no-ppl]\n"
    "                       [--kv-type f16|f32|q8_0] [--compare REF] [--mem-budget MIB]\n"
    "  -c CTX            tokens per chunk (llama-imatrix's -c); the text must hold at least 2 chunks\n"
    "  --chunks N        use only the first N chunks\n"
    "  -b BATCH          tokens per forward pass: BATCH / CTX chunks at a time (as llama-imatrix)\n"
    "  -o OUT            the matrix file; --output-format dat writes llama.cpp's legacy format\n"
    "  --process-output  also collect output.weight's inputs (llama-imatrix --process-output)\n"
    "  --no-ppl          do not compute the perplexity of the chunks' second halves\n"
    "  --kv-type T       KV cache type (default f16, llama-imatrix's default cache)\n"
    "  --compare REF     also compare with the matrix in REF (e.g. llama-imatrix's on the same text):\n"
    "                    fail when an entry is missing, counts differ or a sum differs by more than\n"
    "                    --compare-tolerance (relative, default 1e-3)\n";

// llama-imatrix leaves out matmuls of fewer input rows than this (its collector's rule).
constexpr int kMinRowsCollected = 16;

struct Options {
  tool::ModelFlags m;
  std::string text, out = "imatrix.gguf";
  int n_ctx = 512, chunks = -1, n_batch = 2048;
  bool dat = false, process_output = false, ppl = true;
  DType kv_type = DType::F16;
  std::string compare;
  double compare_tolerance = 1e-3;
};

// --compare: the largest relative difference of a sum between `ours` and `ref` (same entries and
// counts required); throws when an entry is missing, counts differ or the difference exceeds tol.
void compare_imatrix(const Imatrix& ours, const std::string& ref_path, double tol) {
  const Imatrix ref = load_imatrix(ref_path);
  EDGELLM_CHECK(ref.format == ImatrixFormat::Gguf, "--compare ", ref_path, ": a .dat matrix has no raw sums (give the GGUF one)");
  double worst = 0;
  std::string where = "-";
  for (const auto& kv : ref.entries) {
    const ImatrixEntry* e = ours.find(kv.first);
    EDGELLM_CHECK(e != nullptr, "--compare ", ref_path, ": entry '", kv.first, "' is not in ours");
    EDGELLM_CHECK(e->counts == kv.second.counts && e->sums.size() == kv.second.sums.size(), "--compare ", ref_path,
                  ": entry '", kv.first, "' has other counts or another size");
    for (size_t i = 0; i < e->sums.size(); ++i) {
      const double r = kv.second.sums[i], d = std::fabs(double(e->sums[i]) - r) / std::max(std::fabs(r), 1e-30);
      if (d > worst) {
        worst = d;
        where = kv.first + "[" + std::to_string(i) + "]";
      }
    }
  }
  EDGELLM_CHECK(ours.entries.size() == ref.entries.size(), "--compare ", ref_path, ": ", ours.entries.size(),
                " entries here, ", ref.entries.size(), " there");
  std::printf("compare %s: %zu entries, max relative difference %.3g at %s\n", ref_path.c_str(), ref.entries.size(), worst,
              where.c_str());
  if (worst > tol) throw_error("--compare ", ref_path, ": max relative difference ", worst, " at ", where, " exceeds ", tol);
}

// "[####      ] 12/117 chunks, 0.05 s/chunk, 6 s left", redrawn in place; nothing when stderr is
// not a terminal.
void progress(int done, int total, double seconds) {
  if (!isatty(fileno(stderr))) return;
  constexpr int kWidth = 30;
  const int fill = total ? kWidth * done / total : kWidth;
  const double per = done ? seconds / done : 0.0;
  std::fprintf(stderr, "\r[%.*s%*s] %d/%d chunks, %.2f s/chunk, %.0f s left ", fill, "##############################",
               kWidth - fill, "", done, total, per, per * (total - done));
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

int run_imatrix(const Options& o, const LlamaModel& model, const Tokenizer& tok, ThreadPool& pool) {
  const std::vector<int32_t> tokens = tok.encode(tool::read_text_file(o.text, "-f"), tok.add_bos(), /*parse_special=*/false);
  if (tokens.size() < 2 * static_cast<size_t>(o.n_ctx))
    throw_error("file ", o.text, ": ", tokens.size(), " tokens, fewer than the ", 2 * o.n_ctx, " that two chunks of -c ",
                o.n_ctx, " need");
  const PplChunking c = PplChunking::make(tokens.size(), o.n_ctx, o.chunks);
  const int n_seq = std::max(1, o.n_batch / o.n_ctx);      // chunks per forward pass
  const int n_batch = std::min(o.n_batch, n_seq * o.n_ctx);  // tokens per forward pass
  const int n_vocab = model.config().n_vocab;
  std::fprintf(stderr, "imatrix: %zu tokens, %d chunks of %d, %d per pass, batches of %d tokens\n", tokens.size(), c.n_chunk,
               c.n_ctx, n_seq, n_batch);

  ImatrixCollector collector(o.n_ctx);
  const std::string output_name = model.weights().output_name();
  LlamaContext ctx(&pool);
  ctx.set_matmul_observer([&](const std::string& weight, const float* x, int n_rows, int n_cols) {
    if (n_rows < kMinRowsCollected) return;
    if (weight.compare(0, 4, "blk.") == 0 || (o.process_output && weight == output_name)) collector.add(weight, x, n_rows, n_cols);
  });

  PplAccumulator acc;
  Timer clock;
  for (int i = 0; i < c.n_chunk; i += n_seq) {
    const int n_seq_pass = std::min(n_seq, c.n_chunk - i);
    PagedKvCache kv(model.kv_params(c.n_ctx, 16, 0, o.kv_type));
    std::vector<int> seqs;
    std::vector<std::vector<int32_t>> windows;
    for (int s = 0; s < n_seq_pass; ++s) {
      seqs.push_back(kv.create_sequence());
      windows.push_back(c.window(tokens, i + s, tok.add_bos(), tok.bos()));
    }
    // Each sequence's chunk in pieces of n_batch tokens (one piece unless -b < -c).
    for (int j0 = 0; j0 < c.n_ctx; j0 += n_batch) {
      const int n_piece = std::min(n_batch, c.n_ctx - j0);
      Batch b;
      for (int s = 0; s < n_seq_pass; ++s)
        for (int k = j0; k < j0 + n_piece; ++k) {
          const bool scored = o.ppl && k >= c.first && k < c.n_ctx - 1;
          b.add(windows[size_t(s)][size_t(k)], k, seqs[size_t(s)], scored || o.process_output);
        }
      model.forward(ctx, kv, b);
      if (!o.ppl) continue;
      for (int r = 0, out = 0; r < b.size(); ++r) {
        if (!b.logits[size_t(r)]) continue;
        const int s = r / n_piece, k = j0 + r % n_piece;
        if (k >= c.first && k < c.n_ctx - 1) acc.add(log_softmax_at(ctx.logits(out), n_vocab, windows[size_t(s)][size_t(k + 1)]));
        ++out;
      }
    }
    if (o.ppl) {
      std::printf("[%d]%.4f\n", i + n_seq_pass, acc.ppl());
      std::fflush(stdout);
    }
    progress(i + n_seq_pass, c.n_chunk, clock.seconds());
  }
  if (o.ppl) std::printf("Final estimate: PPL = %.4f +/- %.5f\n", acc.ppl(), acc.ppl_error());

  const Imatrix m = collector.result({o.text});
  if (o.dat) save_imatrix_dat(m, o.out);
  else save_imatrix_gguf(m, o.out);
  std::fprintf(stderr, "imatrix: %zu entries over %d chunks of %d tokens in %.2f s, saved to %s (%s)\n", m.entries.size(),
               m.chunk_count, m.chunk_size, clock.seconds(), o.out.c_str(), o.dat ? "legacy .dat" : "GGUF");
  if (!o.compare.empty()) compare_imatrix(m, o.compare, o.compare_tolerance);
  return 0;
}

// The command line into o; false when it only asked for --help / --version (answered).
bool parse_options(int argc, char** argv, Options& o) {
  tool::Args args(argc, argv);
  for (std::string f; args.next(f);) {
    if (tool::standard_flag(f, kUsage, "edgellm-imatrix")) return false;
    else if (tool::model_flag(args, f, o.m)) continue;
    else if (tool::chunked_text_flag(args, f, o.text, o.n_ctx, o.chunks)) continue;
    else if (f == "-b" || f == "--batch-size") o.n_batch = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "-o" || f == "--output-file") o.out = args.value(f);
    else if (f == "--output-format") {
      const std::string v = args.value(f);
      if (v != "gguf" && v != "dat") throw_error("option --output-format: expected gguf or dat, got '", v, "'");
      o.dat = v == "dat";
    }
    else if (f == "--process-output") o.process_output = true;
    else if (f == "--no-ppl") o.ppl = false;
    else if (f == "--kv-type" || f == "-ctk" || f == "-ctv") o.kv_type = tool::kv_type_from(args.value(f), f);
    else if (f == "--compare") o.compare = args.value(f);
    else if (f == "--compare-tolerance") o.compare_tolerance = args.number(f, 0, 1);
    else tool::unknown(f);
  }
  args.no_positional();
  if (o.m.path.empty()) throw_error("-m MODEL is required (see --help)");
  if (o.text.empty()) throw_error("-f TEXT is required (see --help)");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    Options o;
    if (!parse_options(argc, argv, o)) return 0;

    const int n_seq = std::max(1, o.n_batch / o.n_ctx);
    LoadOptions lo;
    lo.mem_budget = o.m.mem_budget;
    lo.plan.n_ctx = n_seq * o.n_ctx;
    lo.plan.n_batch = std::min(o.n_batch, n_seq * o.n_ctx);
    lo.plan.n_threads = o.m.threads;
    auto model = LlamaModel::load(o.m.path, lo);
    ThreadPool pool(o.m.threads > 0 ? o.m.threads : default_thread_count());
    const Tokenizer tok(Vocab::from_gguf(model->file()));
    return run_imatrix(o, *model, tok, pool);
  });
}
