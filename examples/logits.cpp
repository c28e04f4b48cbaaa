// edgellm-logits -m M -p TEXT -n N [--top K] [--kv-type f32|f16|q8_0] [-t T]: one JSON object in the schema
// of ../shared/data/reference/*.json — prompt tokens (BOS where the vocabulary adds one), a logits
// row per prompt position then one after each greedy step but the last, greedy tokens, greedy text
// as hex. The prompt is evaluated as one batch; the KV cache stores F32 unless --kv-type says otherwise.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <edgellm/model/llama.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "common.hpp"

namespace {

const char* kUsage =
    "usage: edgellm-logits -m MODEL.gguf -p TEXT [-n N] [--top K] [--kv-type f32|f16|q8_0] [-t THREADS]\n"
    "                      [--mem-budget MIB] [-v]\n"
    "  --mem-budget MIB: memory the model may use; what does not fit streams from storage (same logits)\n"
    "  prints prompt tokens, logits rows, greedy tokens and greedy text (hex) as one JSON object\n";

void print_row(std::string& out, const float* row, int n_vocab, int top) {
  char buf[48];
  out += '[';
  if (top <= 0) {
    for (int j = 0; j < n_vocab; ++j) {
      std::snprintf(buf, sizeof buf, j ? ", %.9g" : "%.9g", static_cast<double>(row[j]));
      out += buf;
    }
  } else {
    std::vector<int> idx(static_cast<size_t>(n_vocab));
    for (int j = 0; j < n_vocab; ++j) idx[static_cast<size_t>(j)] = j;
    const int k = std::min(top, n_vocab);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int j = 0; j < k; ++j) {
      std::snprintf(buf, sizeof buf, "%s[%d, %.9g]", j ? ", " : "", idx[static_cast<size_t>(j)], static_cast<double>(row[idx[static_cast<size_t>(j)]]));
      out += buf;
    }
  }
  out += ']';
}

int argmax(const float* row, int n) {
  int best = 0;
  for (int j = 1; j < n; ++j)
    if (row[j] > row[best]) best = j;
  return best;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += static_cast<char>(c); }
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += static_cast<char>(c);
  }
  return o + "\"";
}

struct Options {
  tool::ModelFlags m;
  std::string prompt;
  int n = 16, top = 0;
  bool verbose = false;
  edgellm::DType kv_dtype = edgellm::DType::F32;
};

// *early: true when --help or --version was answered (the other flags are then not checked).
Options parse(int argc, char** argv, bool* early) {
  tool::Args args(argc, argv);
  Options o;
  auto& m = o.m;
  std::string kv_type = "f32";
  bool have_prompt = false;
  for (std::string f; args.next(f);) {
    if (tool::standard_flag(f, kUsage, "edgellm-logits")) { *early = true; return o; }
    else if (tool::model_flag(args, f, m)) continue;
    else if (f == "-p" || f == "--prompt") { o.prompt = args.value(f); have_prompt = true; }
    else if (f == "-n" || f == "--n-predict") o.n = args.integer32(f, 1, tool::kMaxTokens);
    else if (f == "--top") o.top = args.integer32(f, 0, 1 << 30);
    else if (f == "--kv-type") kv_type = args.value(f);
    else if (f == "-v" || f == "--verbose") o.verbose = true;
    else tool::unknown(f);
  }
  if (m.path.empty()) edgellm::throw_error("-m MODEL is required (see --help)");
  if (!have_prompt) edgellm::throw_error("-p TEXT is required");
  o.kv_dtype = tool::kv_type_from(kv_type, "--kv-type");
  return o;
}

// The prompt's tokens first (the vocabulary alone), so the budget can plan KV for exactly them.
std::vector<int32_t> prompt_tokens(const Options& o) {
  std::vector<int32_t> ptoks;
  {
    const edgellm::GgufFile vf = edgellm::GgufFile::open(o.m.path);
    const edgellm::Tokenizer vt(edgellm::Vocab::from_gguf(vf));
    ptoks = vt.encode(o.prompt, vt.add_bos(), /*parse_special=*/true);
  }
  if (ptoks.empty()) edgellm::throw_error("the prompt gives no tokens");
  return ptoks;
}

std::shared_ptr<const edgellm::LlamaModel> load(const Options& o, int n_ctx) {
  const auto& m = o.m;
  edgellm::LoadOptions lo;
  lo.mem_budget = m.mem_budget;
  lo.plan.n_ctx = n_ctx;
  lo.plan.n_batch = n_ctx;
  lo.plan.n_threads = m.threads;
  lo.plan.kv_type = o.kv_dtype;
  auto model = edgellm::LlamaModel::load(m.path, lo);
  if (o.verbose) std::fprintf(stderr, "%s%s", model->weights().describe_repack().c_str(), model->weights().describe_residency().c_str());
  return model;
}

// The prompt as one batch, then o.n greedy steps: the logits rows (printed), the tokens and their text.
struct Greedy {
  std::string rows;
  std::vector<int32_t> greedy;
  std::string text;
};

Greedy run(const Options& o, const edgellm::LlamaModel& m, const std::vector<int32_t>& ptoks, int n_ctx) {
  const auto* model = &m;
  const int n = o.n, top = o.top;
  const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(model->file()));
  const auto& cfg = model->config();
  edgellm::ThreadPool pool(o.m.threads > 0 ? o.m.threads : edgellm::default_thread_count());
  edgellm::PagedKvCache kv(model->kv_params(n_ctx, 16, 0, o.kv_dtype));
  const int seq = kv.create_sequence();
  edgellm::LlamaContext ctx(&pool);

  Greedy g;
  std::string& rows = g.rows;
  edgellm::Batch b;
  for (size_t i = 0; i < ptoks.size(); ++i) b.add(ptoks[i], static_cast<int32_t>(i), seq, true);
  model->forward(ctx, kv, b);
  for (int i = 0; i < ctx.n_outputs(); ++i) {
    if (!rows.empty()) rows += ",\n  ";
    print_row(rows, ctx.logits(i), cfg.n_vocab, top);
  }
  const float* last = ctx.logits(ctx.n_outputs() - 1);
  for (int step = 0; step < n; ++step) {
    const int32_t id = argmax(last, cfg.n_vocab);
    g.greedy.push_back(id);
    g.text += tok.token_to_piece(id, /*special=*/true);
    if (step + 1 == n) break;
    b.clear();
    b.add(id, static_cast<int32_t>(ptoks.size()) + step, seq, true);
    model->forward(ctx, kv, b);
    last = ctx.logits(0);
    rows += ",\n  ";
    print_row(rows, last, cfg.n_vocab, top);
  }
  return g;
}

void print_json(const std::string& prompt, int n_vocab, const std::vector<int32_t>& ptoks, const Greedy& g) {
  const auto& greedy = g.greedy;
  std::string out = "{\"prompt\": " + json_string(prompt) + ", \"n_vocab\": " + std::to_string(n_vocab) +
                    ", \"prompt_tokens\": [";
  for (size_t i = 0; i < ptoks.size(); ++i) out += (i ? ", " : "") + std::to_string(ptoks[i]);
  out += "],\n \"logits\": [\n  " + g.rows + "],\n \"greedy_tokens\": [";
  for (size_t i = 0; i < greedy.size(); ++i) out += (i ? ", " : "") + std::to_string(greedy[i]);
  out += "],\n \"greedy_text_hex\": \"";
  static const char* hex = "0123456789abcdef";
  for (unsigned char c : g.text) { out += hex[c >> 4]; out += hex[c & 15]; }
  out += "\"}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int logits_main(int argc, char** argv) {
  bool early = false;
  const Options o = parse(argc, argv, &early);
  if (early) return 0;
  const std::vector<int32_t> ptoks = prompt_tokens(o);
  const int n_ctx = static_cast<int>(ptoks.size()) + o.n;
  const auto model = load(o, n_ctx);
  print_json(o.prompt, model->config().n_vocab, ptoks, run(o, *model, ptoks, n_ctx));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] { return logits_main(argc, argv); });
}
