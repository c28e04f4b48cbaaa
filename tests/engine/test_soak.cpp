// Short soak: a few thousand tokens with "sinks + window" eviction on stories260K (the synthetic
// tiny model without shared data); resident memory and KV blocks must not grow once warmed up.
// The long run (100,000 tokens) is bench_soak, see docs/RELIABILITY.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/stat.h>

#include <edgellm/engine/session.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/tools/synthetic.hpp>
#include <edgellm/runtime/memory_stats.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "test_util.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define EDGELLM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDGELLM_TEST_ASAN 1
#endif
#endif

using namespace edgellm;

namespace {

using edgellm_test::kData;

constexpr int kWarmupTokens = 600;   // past the context twice: every path (eviction too) has run
constexpr int kSoakTokens = 3000;    // measured after the warm-up
constexpr int kChunkTokens = 500;    // tokens per generate() call (results are dropped between calls)
// Growth allowed over kSoakTokens: the session's token history (4 bytes a token) plus allocator
// and page granularity. A leak of one KV block per eviction alone would exceed it on stories260K
// only slowly, so the block count is checked exactly as well.
constexpr uint64_t kMaxRssGrowthBytes = 1u << 20;

}  // namespace

TEST_CASE("soak: generation with eviction keeps memory flat") {
  std::shared_ptr<const LlamaModel> model;
  const std::string path = kData + "/models/stories260K.gguf";
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    model = LlamaModel::load(path);
  } else {
    MESSAGE("stories260K.gguf not found under " << kData << ": soaking the synthetic tiny model");
    model = std::make_shared<const LlamaModel>(
        GgufFile::from_bytes(build_synthetic_gguf(synthetic_preset("tiny"), DType::Q8_0), "synthetic-tiny.gguf"));
  }
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));

  SessionParams sp;
  sp.n_ctx = 256;
  sp.kv_block_size = 16;
  sp.n_keep = 4;
  sp.n_window = 128;
  sp.n_threads = 1;
  Session s(model, tok, sp);
  GenerateParams gp;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0.8f;
  gp.sampler.repeat_penalty = 1.1f;

  auto run = [&](int n_tokens, const std::string& prompt) {
    int done = 0;
    for (bool first = true; done < n_tokens; first = false) {
      gp.max_tokens = std::min(kChunkTokens, n_tokens - done);
      const GenerateResult r = s.generate(first ? prompt : std::string(), gp);
      REQUIRE(r.reason == StopReason::MaxTokens);
      REQUIRE(static_cast<int>(r.tokens.size()) == gp.max_tokens);
      done += gp.max_tokens;
      CHECK(s.n_past() <= sp.n_ctx);
    }
  };
  run(kWarmupTokens, "Once upon a time");
  const int evicted0 = s.n_evicted();
  CHECK(evicted0 > 0);
  const int blocks0 = s.kv_cache().blocks_allocated();
  const uint64_t rss0 = current_rss_bytes();

  run(kSoakTokens, std::string());

  const uint64_t rss1 = current_rss_bytes();
  const int64_t growth = static_cast<int64_t>(rss1) - static_cast<int64_t>(rss0);
  MESSAGE("soak: " << kSoakTokens << " tokens, RSS " << rss0 / 1024 << " KiB -> " << rss1 / 1024 << " KiB ("
                   << growth / 1024 << " KiB), " << s.n_evicted() << " tokens evicted, "
                   << s.kv_cache().blocks_allocated() << " KV blocks");
  CHECK(s.n_evicted() >= evicted0 + kSoakTokens - sp.n_ctx);
  CHECK(s.kv_cache().blocks_allocated() == blocks0);  // the pool reached its size during warm-up
  CHECK(blocks0 <= sp.n_ctx / sp.kv_block_size + 1);
  if (rss0 == 0) {
    MESSAGE("no /proc/self/status: RSS not checked");
    return;
  }
#if defined(EDGELLM_TEST_ASAN)
  MESSAGE("AddressSanitizer quarantines freed memory: RSS growth not checked");
#else
  CHECK(growth <= static_cast<int64_t>(kMaxRssGrowthBytes));
#endif
}

// The session's token history mirrors its KV sequence: evicted tokens leave it too, so an endless
// generation does not grow by 4 bytes a token.
TEST_CASE("soak: the token history of an evicting session is bounded by the context") {
  auto model = std::make_shared<const LlamaModel>(
      GgufFile::from_bytes(build_synthetic_gguf(synthetic_preset("tiny"), DType::Q8_0), "synthetic-tiny.gguf"));
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  SessionParams sp;
  sp.n_ctx = 64;
  sp.n_keep = 4;
  sp.n_window = 24;
  sp.n_threads = 1;
  Session s(model, tok, sp);
  GenerateParams gp;
  gp.max_tokens = 300;
  gp.ignore_eos = true;
  REQUIRE(s.generate("Once", gp).tokens.size() == 300);
  CHECK(s.n_evicted() > 0);
  CHECK(s.history().size() <= static_cast<size_t>(sp.n_ctx));
}
