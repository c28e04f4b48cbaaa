// Time to the first token of a conversation whose long system prompt (~500 tokens) was prefilled
// before: cold (the whole prompt evaluated) against a session restored from a file saved by
// Session::save (the file read, its KV blocks copied in, the last token evaluated). The median of
// --runs of each, the ratio, the file's size and the CPU.
//   bench_session_restore [-m MODEL.gguf] [--tokens N] [--runs R] [-t THREADS] [--kv-type f32|f16|q8_0]
// Default model: ../shared/data/models/tiny-llama-256-Q4_0.gguf.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <edgellm/engine/session.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/text/tokenizer.hpp>
#include <edgellm/tools/bench_stats.hpp>

#include "cpu_name.hpp"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A system prompt of about n tokens: a list of house rules, numbered.
std::vector<int32_t> system_prompt(const edgellm::Tokenizer& tok, int n) {
  std::string text = "You are a helpful assistant for a small library. Follow these rules.";
  std::vector<int32_t> ids = tok.encode(text, tok.add_bos(), false);
  for (int i = 1; static_cast<int>(ids.size()) < n; ++i) {
    text += " Rule " + std::to_string(i) + ": be kind to readers, answer briefly, and name the shelf of each book.";
    ids = tok.encode(text, tok.add_bos(), false);
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(EDGELLM_SHARED_DATA) + "/models/tiny-llama-256-Q4_0.gguf";
  int n_tokens = 500, runs = 5, threads = 0;
  edgellm::DType kv = edgellm::DType::F32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "-m" && has) path = argv[++i];
    else if (a == "--tokens" && has) n_tokens = std::atoi(argv[++i]);
    else if (a == "--runs" && has) runs = std::atoi(argv[++i]);
    else if (a == "-t" && has) threads = std::atoi(argv[++i]);
    else if (a == "--kv-type" && has && edgellm::dtype_from_name(argv[i + 1], &kv)) ++i;
    else {
      std::fprintf(stderr, "usage: bench_session_restore [-m MODEL.gguf] [--tokens N] [--runs R] [-t THREADS] [--kv-type T]\n");
      return 1;
    }
  }
  try {
    const auto model = edgellm::LlamaModel::load(path);
    const auto tok = std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(model->file()));
    edgellm::SessionParams sp;
    sp.n_ctx = n_tokens + 64;
    sp.n_threads = threads;
    sp.kv_type = kv;
    std::vector<int32_t> prompt = system_prompt(*tok, n_tokens);
    edgellm::GenerateParams gp;
    gp.max_tokens = 1;
    gp.sampler.temperature = 0;
    const std::string file = "bench_session_restore.state";
    {
      edgellm::Session s(model, tok, sp);
      s.eval(std::vector<int32_t>(prompt.begin(), prompt.end() - 1));
      s.save(file);
    }
    std::vector<double> cold, warm;
    int32_t cold_token = -1, warm_token = -2;
    for (int r = 0; r < runs; ++r) {
      {
        edgellm::Session s(model, tok, sp);
        const auto t0 = std::chrono::steady_clock::now();
        const auto res = s.generate(prompt, gp);
        cold.push_back(ms_since(t0));
        cold_token = res.tokens.empty() ? -1 : res.tokens[0];
      }
      {
        edgellm::Session s(model, tok, sp);
        const auto t0 = std::chrono::steady_clock::now();
        s.restore(file);
        const auto res = s.generate(s.keep_common_prefix(prompt), gp);
        warm.push_back(ms_since(t0));
        warm_token = res.tokens.empty() ? -1 : res.tokens[0];
      }
    }
    std::FILE* f = std::fopen(file.c_str(), "rb");
    long bytes = 0;
    if (f) {
      std::fseek(f, 0, SEEK_END);
      bytes = std::ftell(f);
      std::fclose(f);
    }
    std::remove(file.c_str());
    const double c = edgellm::stats_percentile(cold, 50), w = edgellm::stats_percentile(warm, 50);
    std::printf("model %s, %d-token prompt, KV %s, %d runs, cpu: %s\n", path.c_str(), n_tokens, edgellm::dtype_name(kv), runs,
                cpu_name().c_str());
    std::printf("first token: cold prefill %.2f ms, after restore %.2f ms (file %.1f KiB): %.1fx sooner%s\n", c, w,
                static_cast<double>(bytes) / 1024.0, c / w, cold_token == warm_token ? "" : " (first tokens differ!)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
