// edgellm-bench: what one run asked for (Options), the model it measured (LoadedModel) and what
// each test measured (Test, RunTime, Result): shared by the runner (bench.cpp) and the printers
// (bench_print.hpp).
#pragma once
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
#include <edgellm/quant/mix.hpp>
#include <edgellm/runtime/memory_stats.hpp>
#include <edgellm/runtime/thread_pool.hpp>
#include <edgellm/runtime/timer.hpp>
#include <edgellm/tools/bench_stats.hpp>
#include <edgellm/tools/synthetic.hpp>

#include "common.hpp"
#include "speculative_flags.hpp"

namespace bench {

struct Options {
  std::string model_path, preset, mix = "Q4_K_M", write_gguf, output = "md", kv_type = "f16";
  uint64_t seed = 1234;
  std::vector<int> n_prompt = {512}, n_gen = {128}, n_depth = {0}, threads;
  std::vector<std::pair<int, int>> pg;
  std::vector<int> verify_rows;  // --verify-rows: drafted rows k of each verify pass (empty: the usual tests)
  int reps = 5, n_batch = 512, delay_s = 0;
  bool membw = false, warmup = true, verbose = false, plan = false, repack = true;
  edgellm::SyntheticBlocks blocks = edgellm::SyntheticBlocks::Quantized;  // --synthetic-blocks
  uint64_t mem_budget = 0;  // --mem-budget (0: detected; models that fit load as without one)
  // Speculative decoding (-md, --lookup, --draft-layers and their parameters): the -n rows decode
  // greedily through the speculative token loop.
  edgellm::SpeculativeParams spec;
  tool::DraftFlags draft;
  bool speculative() const { return tool::has_draft_source(spec, draft); }
  // --grammar-file / --json-schema / --json-schema-file: -n rows generate under the grammar
  // (repeated: a complete sentence starts the next), through the same token loop.
  tool::GrammarFlags grammar;
  bool constrained() const { return !grammar.flag.empty(); }
  bool session_loop = false;  // --session-loop: -n rows through the same loop without a grammar (a grammar row's baseline)
  bool session_rows() const { return speculative() || constrained() || session_loop; }
};

struct LoadedModel {
  std::shared_ptr<const edgellm::LlamaModel> model;
  std::shared_ptr<const edgellm::LlamaModel> draft;  // -md (null: none, or another draft source)
  std::string filename, type_name;  // type_name: "Q4_K - Medium"-like mix name from general.file_type
  uint64_t size_bytes = 0, n_params = 0;
  int n_ctx = 0;  // tokens of the longest test (-d + -p + -n)
};


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
  // Speculative -n rows: target passes that evaluated a generated token, tokens drafted for them
  // and drafts accepted, summed over the timed runs (hash: of the generated tokens).
  bool speculative = false;
  int64_t n_passes = 0, n_drafted = 0, n_accepted = 0;
  double grammar_ms = 0;  // constrained -n rows: time in the grammar's masks and steps, all runs
  double acceptance() const { return n_drafted > 0 ? double(n_accepted) / double(n_drafted) : 0; }
  double tokens_per_pass() const { return n_passes > 0 ? double(n_passes + n_accepted) / double(n_passes) : 0; }
};

}  // namespace bench
