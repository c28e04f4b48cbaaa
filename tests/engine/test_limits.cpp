// Resource limits and bad input: sizes, sampler values, prompts longer than the context, the KV
// byte budget, a model whose tensors lie outside the file. Each throws Error and leaves the model
// and every session usable.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>


#include "session_fixtures.hpp"

using namespace edgellm;
using namespace edgellm_test;

TEST_CASE("zero and negative sizes are clear errors") {
  const Loaded& m = synthetic();
  auto make = [&](SessionParams p) { Session s(m.model, m.tok, p); };
  auto params = [](auto edit) {
    SessionParams p = one_thread();
    p.n_ctx = 64;
    edit(p);
    return p;
  };
  CHECK_THROWS_WITH_AS(make(params([](SessionParams& p) { p.n_ctx = 0; })), doctest::Contains("n_ctx"), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.n_ctx = -5; })), Error);
  CHECK_THROWS_WITH_AS(make(params([](SessionParams& p) { p.n_batch = 0; })), doctest::Contains("n_batch"), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.n_batch = -1; })), Error);
  CHECK_THROWS_WITH_AS(make(params([](SessionParams& p) { p.kv_block_size = 0; })), doctest::Contains("block size"), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.kv_block_size = -16; })), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.n_keep = -1; p.n_window = 8; })), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.n_window = -1; })), Error);
  CHECK_THROWS_AS(make(params([](SessionParams& p) { p.kv_recent_f32 = -1; p.kv_type = DType::F16; })), Error);
  // A window that leaves no room in the context.
  CHECK_THROWS_WITH_AS(make(params([](SessionParams& p) { p.n_keep = 4; p.n_window = 64; })),
                       doctest::Contains("no room"), Error);
  // A negative thread count means "default", as 0 does.
  CHECK_NOTHROW(make(params([](SessionParams& p) { p.n_threads = -3; })));

  Session s(m.model, m.tok, params([](SessionParams&) {}));
  CHECK_THROWS_WITH_AS(s.eval({}), doctest::Contains("nothing to evaluate"), Error);
  CHECK_THROWS_WITH_AS(s.eval({-1}), doctest::Contains("outside the vocabulary"), Error);
  CHECK_THROWS_WITH_AS(s.eval({1, 5, 100000}), doctest::Contains("outside the vocabulary"), Error);
  CHECK(s.n_past() == 0);
  GenerateParams gp;
  gp.add_bos = false;
  CHECK_THROWS_WITH_AS(s.generate("", gp), doctest::Contains("empty"), Error);
  gp.add_bos = true;
  CHECK_THROWS_AS(s.generate_parallel("Hi", 0, gp), Error);
  CHECK_THROWS_AS(s.generate_parallel("Hi", -2, gp), Error);
  gp.max_tokens = 0;
  const GenerateResult r0 = s.generate("Hi", gp);
  CHECK(r0.reason == StopReason::MaxTokens);
  CHECK(r0.tokens.empty());
  // The session still works after all of the above.
  gp.max_tokens = 4;
  gp.ignore_eos = true;
  CHECK(s.generate(" there", gp).tokens.size() == 4);
}

TEST_CASE("bad sampler parameters are clear errors and the session stays usable") {
  const Loaded& m = synthetic();
  SessionParams sp = one_thread();
  sp.n_ctx = 128;
  Session s(m.model, m.tok, sp);
  GenerateParams bad;
  bad.max_tokens = 4;
  bad.sampler.top_p = 1.5f;
  CHECK_THROWS_WITH_AS(s.generate("Hi", bad), doctest::Contains("top_p"), Error);
  // A call rejected for its parameters leaves the conversation as it was (strong guarantee, as
  // for eval()).
  CHECK(s.n_past() == 0);
  bad.sampler.top_p = 0.9f;
  bad.sampler.temperature = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(s.generate("Hi", bad), doctest::Contains("temperature"), Error);
  CHECK(s.n_past() == 0);
  CHECK(s.n_past() == static_cast<int>(s.history().size()));
  GenerateParams ok;
  ok.max_tokens = 4;
  ok.ignore_eos = true;
  CHECK(s.generate(" again", ok).tokens.size() == 4);
}

TEST_CASE("a prompt longer than the context is an error and the session and others stay usable") {
  const Loaded& m = synthetic();
  SessionParams sp = one_thread();
  sp.n_ctx = 32;
  Session s(m.model, m.tok, sp);
  Session other(m.model, m.tok, sp);
  GenerateParams gp;
  gp.max_tokens = 4;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0;
  const GenerateResult before = other.generate("Once", gp);
  other.reset();

  CHECK_THROWS_WITH_AS(s.generate(text_of_tokens(*m.tok, 40), gp), doctest::Contains("longer than the context"), Error);
  CHECK(s.n_past() == 0);
  CHECK(s.history().empty());
  const GenerateResult r = s.generate("Once", gp);
  CHECK(r.tokens == before.tokens);  // as if the failed call never happened
  // A prompt that fits alone but not after what is held.
  const int held = s.n_past();
  CHECK_THROWS_WITH_AS(s.generate(text_of_tokens(*m.tok, sp.n_ctx - held + 1), gp), doctest::Contains("does not fit"), Error);
  CHECK(s.n_past() == held);
  CHECK(s.n_past() == static_cast<int>(s.history().size()));
  CHECK(other.generate("Once", gp).tokens == before.tokens);

  // Without eviction generation stops at the context; with it, it goes on.
  s.reset();
  gp.max_tokens = 100;
  const GenerateResult full = s.generate("Once", gp);
  CHECK(full.reason == StopReason::ContextFull);
  CHECK(s.n_past() == sp.n_ctx);
  CHECK_THROWS_WITH_AS(s.eval({5}), doctest::Contains("context"), Error);
  CHECK(s.n_past() == sp.n_ctx);
}

TEST_CASE("n_batch larger than the context works: same tokens as small batches") {
  const Loaded& m = synthetic();
  GenerateParams gp;
  gp.max_tokens = 8;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0;
  SessionParams big = one_thread();
  big.n_ctx = 48;
  big.n_batch = 4096;
  SessionParams small = big;
  small.n_batch = 1;
  Session a(m.model, m.tok, big), b(m.model, m.tok, small);
  const std::string prompt = text_of_tokens(*m.tok, 36);
  const GenerateResult ra = a.generate(prompt, gp), rb = b.generate(prompt, gp);
  CHECK(ra.n_prompt == rb.n_prompt);
  CHECK(ra.tokens == rb.tokens);
  // The prompt is still bounded by the context, whatever the batch.
  a.reset();
  CHECK_THROWS_WITH_AS(a.generate(text_of_tokens(*m.tok, 60), gp), doctest::Contains("longer than the context"), Error);
}

TEST_CASE("the KV byte budget is an error without a policy and evicts with one") {
  const Loaded& m = synthetic();
  const size_t block_bytes = PagedKvCache(m.model->kv_params(1024, 16)).block_bytes();
  GenerateParams gp;
  gp.max_tokens = 200;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0;

  SessionParams sp = one_thread();
  sp.n_ctx = 1024;
  sp.kv_block_size = 16;
  sp.kv_max_bytes = 3 * block_bytes;  // 48 tokens
  Session s(m.model, m.tok, sp);
  Session other(m.model, m.tok, sp);  // its own cache and budget
  CHECK_THROWS_WITH_AS(s.generate("Once upon a time", gp), doctest::Contains("budget"), Error);
  CHECK(s.n_past() == 48);
  CHECK(s.n_past() == static_cast<int>(s.history().size()));
  CHECK(s.kv_cache().bytes_allocated() <= sp.kv_max_bytes);
  // A prompt beyond the budget fails whole and leaves the held tokens alone.
  s.reset();
  CHECK_THROWS_WITH_AS(s.generate(text_of_tokens(*m.tok, 100), gp), doctest::Contains("budget"), Error);
  CHECK(s.n_past() == 0);
  // Other sessions and the same one after reset() work.
  GenerateParams few = gp;
  few.max_tokens = 5;
  CHECK(other.generate("Once upon a time", few).tokens.size() == 5);
  CHECK(s.generate("Once upon a time", few).tokens.size() == 5);

  // With "sinks + window" the budget is a bound, not an error.
  SessionParams ev = sp;
  ev.kv_max_bytes = 4 * block_bytes;
  ev.n_keep = 4;
  ev.n_window = 24;
  Session e(m.model, m.tok, ev);
  const GenerateResult r = e.generate("Once upon a time", gp);
  CHECK(r.reason == StopReason::MaxTokens);
  CHECK(r.tokens.size() == 200);
  CHECK(e.n_evicted() > 0);
  CHECK(e.kv_cache().bytes_allocated() <= ev.kv_max_bytes);
}

TEST_CASE("a model whose tensors lie outside the file is an error and loaded models stay usable") {
  const Loaded& good = synthetic();
  Session s(good.model, good.tok, one_thread());
  GenerateParams gp;
  gp.max_tokens = 4;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0;
  const GenerateResult before = s.generate("Once", gp);
  s.reset();

  const std::vector<uint8_t>& bytes = synthetic_bytes();
  // Cut into the tensor data.
  for (size_t cut : {size_t(1), size_t(1000), bytes.size() / 3}) {
    CAPTURE(cut);
    const std::vector<uint8_t> truncated(bytes.begin(), bytes.end() - static_cast<std::ptrdiff_t>(cut));
    CHECK_THROWS_AS(load_bytes(truncated), Error);
  }
  // Move one tensor's offset past the end, and to where offset + size overflows. Tensor info:
  // name (u64 length + bytes), n_dims u32, dims u64[n_dims], type u32, offset u64.
  const std::string name = "blk.1.ffn_down.weight";
  const auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  REQUIRE(it != bytes.end());
  size_t at = static_cast<size_t>(it - bytes.begin()) + name.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, &bytes[at], 4);
  REQUIRE(n_dims == 2);
  at += 4 + 8 * n_dims + 4;
  for (uint64_t off : {uint64_t(1) << 40, std::numeric_limits<uint64_t>::max() - 64, uint64_t(bytes.size())}) {
    CAPTURE(off);
    std::vector<uint8_t> bad = bytes;
    std::memcpy(&bad[at], &off, 8);
    CHECK_THROWS_AS(load_bytes(bad), Error);
  }
  // The loaded model did not notice.
  CHECK(s.generate("Once", gp).tokens == before.tokens);
}
