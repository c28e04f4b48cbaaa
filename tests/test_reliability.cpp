// Reliability of the engine: several Sessions sharing one model from several threads (equal to
// running them one after another; also built with ThreadSanitizer by .ci/run), cancellation from
// another thread, and resource limits that throw Error and leave the model and sessions usable.
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

#include <edgellm/engine/session.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/model/synthetic.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "test_util.hpp"

using edgellm_test::dir_exists;
using edgellm_test::kData;
using edgellm_test::path_exists;
using edgellm_test::read_file;

using namespace edgellm;

namespace {



// A model and its tokenizer, shared read-only by every session of a test.
struct Loaded {
  std::shared_ptr<const LlamaModel> model;
  std::shared_ptr<const Tokenizer> tok;
};

const std::vector<uint8_t>& synthetic_bytes() {
  static const std::vector<uint8_t> bytes = build_synthetic_gguf(synthetic_preset("tiny"), DType::Q8_0);
  return bytes;
}

Loaded load_bytes(const std::vector<uint8_t>& bytes) {
  auto model = std::make_shared<const LlamaModel>(GgufFile::from_bytes(bytes, "synthetic-tiny.gguf"));
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
  return {model, tok};
}

// The tiny synthetic model (vocab 512, 2 layers): needs no shared data.
const Loaded& synthetic() {
  static const Loaded m = load_bytes(synthetic_bytes());
  return m;
}

// stories260K when the shared data is there (a real, trained model), else null.
const Loaded* stories() {
  static const Loaded m = [] {
    const std::string path = kData + "/models/stories260K.gguf";
    if (!path_exists(path)) return Loaded{};
    auto model = LlamaModel::load(path);
    return Loaded{model, std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()))};
  }();
  return m.model ? &m : nullptr;
}

// Sessions run on one thread unless a test says otherwise: on a loaded 2-core machine a pool of two
// waits for its descheduled worker at every matmul, which makes tests slow, not more thorough.
SessionParams one_thread() {
  SessionParams p;
  p.n_threads = 1;
  return p;
}

// One conversation of the concurrency test: its own prompt, sampler seed and session shape.
struct Job {
  std::string prompt;
  GenerateParams gp;
  SessionParams sp = one_thread();
};

std::vector<Job> make_jobs(int n, int max_tokens, bool pool_of_two) {
  const char* prompts[] = {"Once upon a time", "The little dog", "She said hello to", "In the morning the sun",
                           "Tom and Lily went", "A big red ball"};
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j;
    j.prompt = prompts[i % 6];
    j.gp.max_tokens = max_tokens;
    j.gp.ignore_eos = true;
    j.gp.sampler.temperature = i % 3 == 0 ? 0.0f : 0.9f;  // greedy and seeded draws
    j.gp.sampler.seed = 100 + static_cast<uint64_t>(i);
    j.gp.sampler.repeat_penalty = i % 2 ? 1.1f : 1.0f;
    j.sp.n_ctx = 256;
    j.sp.n_batch = 1 + 3 * i;  // prefill chunking differs between sessions
    j.sp.n_threads = i == 1 && pool_of_two ? 2 : 1;  // the pool also runs under ThreadSanitizer
    if (i % 2) {  // half of them evict, so eviction also runs concurrently
      j.sp.n_ctx = 64;
      j.sp.n_keep = 4;
      j.sp.n_window = 24;
    }
    jobs.push_back(j);
  }
  return jobs;
}

// Two turns per job on a fresh session (the second continues the first's history).
std::vector<int32_t> run_job(const Loaded& m, const Job& j) {
  Session s(m.model, m.tok, j.sp);
  GenerateResult a = s.generate(j.prompt, j.gp);
  GenerateResult b = s.generate(" and then", j.gp);
  std::vector<int32_t> out = a.tokens;
  out.push_back(-1);  // turn separator
  out.insert(out.end(), b.tokens.begin(), b.tokens.end());
  return out;
}

void check_concurrent_equals_sequential(const Loaded& m, int n_jobs, int max_tokens, bool pool_of_two) {
  const std::vector<Job> jobs = make_jobs(n_jobs, max_tokens, pool_of_two);
  std::vector<std::vector<int32_t>> sequential;
  for (const Job& j : jobs) sequential.push_back(run_job(m, j));

  std::vector<std::vector<int32_t>> concurrent(jobs.size());
  std::vector<std::string> errors(jobs.size());
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < static_cast<int>(jobs.size())) std::this_thread::yield();  // start together
      try {
        concurrent[i] = run_job(m, jobs[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(errors[i] == "");
    CHECK(sequential[i].size() == static_cast<size_t>(2 * max_tokens + 1));
    CHECK(concurrent[i] == sequential[i]);
  }
}

std::string long_text(int words) {
  std::string t;
  for (int i = 0; i < words; ++i) t += (i % 7 == 3) ? " Tom" : " the cat";
  return t;
}

// A text of exactly n tokens when encoded without BOS (n >= 4 for the synthetic byte-level vocab).
std::string text_of_tokens(const Tokenizer& tok, int n) {
  std::string t(static_cast<size_t>(n), 'x');
  for (int guard = 0; guard < 4 * n; ++guard) {
    const int got = static_cast<int>(tok.encode(t, false, false).size());
    if (got == n) return t;
    if (got > n) t.pop_back();
    else t.push_back('x');
  }
  throw_error("test: no text of ", n, " tokens");
}

}  // namespace

// ---- concurrency ----

TEST_CASE("concurrent sessions on one synthetic model equal the same sessions run one after another") {
  check_concurrent_equals_sequential(synthetic(), /*n_jobs=*/4, /*max_tokens=*/40, /*pool_of_two=*/true);
}

TEST_CASE("concurrent sessions on stories260K equal the same sessions run one after another") {
  const Loaded* m = stories();
  if (!m) {
    MESSAGE("skipped: " << kData << "/models/stories260K.gguf not found");
    return;
  }
  check_concurrent_equals_sequential(*m, /*n_jobs=*/4, /*max_tokens=*/60, /*pool_of_two=*/false);
}

TEST_CASE("sessions keep the model alive after the loader drops it") {
  Loaded m = load_bytes(synthetic_bytes());
  const std::vector<Job> jobs = make_jobs(2, /*max_tokens=*/10, /*pool_of_two=*/false);
  const std::vector<int32_t> expect0 = run_job(m, jobs[0]), expect1 = run_job(m, jobs[1]);
  std::vector<int32_t> got0, got1;
  std::atomic<int> started{0};
  auto worker = [&started](std::shared_ptr<Session> s, const Job& j, std::vector<int32_t>* out) {
    started.fetch_add(1);
    *out = s->generate(j.prompt, j.gp).tokens;
    out->push_back(-1);
    const std::vector<int32_t> b = s->generate(" and then", j.gp).tokens;
    out->insert(out->end(), b.begin(), b.end());
  };
  auto s0 = std::make_shared<Session>(m.model, m.tok, jobs[0].sp);
  auto s1 = std::make_shared<Session>(m.model, m.tok, jobs[1].sp);
  std::thread t0(worker, s0, std::cref(jobs[0]), &got0), t1(worker, s1, std::cref(jobs[1]), &got1);
  s0.reset();
  s1.reset();
  while (started.load() < 2) std::this_thread::yield();
  const std::weak_ptr<const LlamaModel> weak = m.model;
  m = Loaded{};  // the loader's references are gone; the sessions hold the model
  t0.join();
  t1.join();
  CHECK(got0 == expect0);
  CHECK(got1 == expect1);
  CHECK(weak.expired());  // and it is freed with the last session
}

TEST_CASE("the shared tokenizer encodes and decodes concurrently with the same results") {
  const Loaded& m = synthetic();
  const std::string text = "Hello <s> world</s> \xF0\x9F\x98\x80 t300 \xFF\xFE" + long_text(50);
  const std::vector<int32_t> ids = m.tok->encode(text, true, true);
  const std::string back = m.tok->decode(ids);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int k = 0; k < 20; ++k)
        if (m.tok->encode(text, true, true) != ids || m.tok->decode(ids) != back) mismatches.fetch_add(1);
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches.load() == 0);
}

// ---- cancellation ----

TEST_CASE("cancel() from another thread stops generation within one token") {
  const Loaded& m = synthetic();
  SessionParams sp = one_thread();
  sp.n_ctx = 512;
  GenerateParams gp;
  gp.max_tokens = 200;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0;  // greedy: every run takes the same path
  constexpr int kCancelAtPiece = 5;

  // Reference: the callback itself stops at piece k, so the result holds exactly the tokens
  // sampled up to that moment.
  size_t tokens_at_piece = 0;
  {
    Session s(m.model, m.tok, sp);
    int pieces = 0;
    const GenerateResult r = s.generate("Once upon", gp, [&](const std::string&) { return ++pieces < kCancelAtPiece; });
    REQUIRE(r.reason == StopReason::Cancelled);
    tokens_at_piece = r.tokens.size();
  }
  // The same run, but at piece k another thread calls cancel() while the generating thread waits
  // for it: tokens sampled after the cancel request must be at most one.
  Session s(m.model, m.tok, sp);
  std::mutex mu;
  std::condition_variable cv;
  bool asked = false, done = false;
  std::thread canceller([&] {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return asked; });
    s.cancel();
    done = true;
    cv.notify_all();
  });
  int pieces = 0;
  const GenerateResult r = s.generate("Once upon", gp, [&](const std::string&) {
    if (++pieces == kCancelAtPiece) {
      std::unique_lock<std::mutex> lk(mu);
      asked = true;
      cv.notify_all();
      cv.wait(lk, [&] { return done; });
    }
    return true;
  });
  canceller.join();
  CHECK(r.reason == StopReason::Cancelled);
  CHECK(r.tokens.size() >= tokens_at_piece);
  CHECK(r.tokens.size() <= tokens_at_piece + 1);

  // The session goes on: the next call is not cancelled by the old request.
  gp.max_tokens = 3;
  const GenerateResult next = s.generate(" then", gp);
  CHECK(next.reason == StopReason::MaxTokens);
  CHECK(next.tokens.size() == 3);
}

TEST_CASE("cancel() at any moment of an endless generation returns promptly with reason cancelled") {
  const Loaded& m = synthetic();
  SessionParams sp = one_thread();
  sp.n_ctx = 128;
  sp.n_keep = 4;
  sp.n_window = 64;  // eviction: nothing but cancel() ends this generation
  GenerateParams gp;
  gp.max_tokens = -1;
  gp.ignore_eos = true;
  gp.sampler.temperature = 0.8f;
  Session s(m.model, m.tok, sp);
  std::atomic<int> pieces{0};
  std::atomic<bool> cancelled{false};
  std::atomic<int> pieces_after_cancel{0};
  std::thread canceller([&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (pieces.load() < 150 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    s.cancel();
    cancelled.store(true);
  });
  const GenerateResult r = s.generate("Once", gp, [&](const std::string&) {
    if (cancelled.load()) pieces_after_cancel.fetch_add(1);
    pieces.fetch_add(1);
    return true;
  });
  canceller.join();
  CHECK(r.reason == StopReason::Cancelled);
  CHECK(s.n_evicted() > 0);  // ran past the context: the policy evicted, it did not stop
  // After cancel() returned the loop samples no new token (a flushed tail may still arrive).
  CHECK(pieces_after_cancel.load() <= 2);
}

TEST_CASE("cancel() during a long prefill stops between chunks and the session stays consistent") {
  const Loaded& m = synthetic();
  SessionParams sp = one_thread();
  sp.n_ctx = 2048;
  sp.n_batch = 8;
  Session s(m.model, m.tok, sp);
  const std::string prompt = text_of_tokens(*m.tok, 2000);
  GenerateParams gp;
  gp.max_tokens = 10;
  std::atomic<bool> started{false};
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    s.cancel();
  });
  started.store(true);
  const GenerateResult r = s.generate(prompt, gp);
  canceller.join();
  if (r.reason == StopReason::Cancelled) {
    CHECK(r.tokens.empty());
    CHECK(s.n_past() % sp.n_batch == 0);  // whole chunks only
    CHECK(s.n_past() < r.n_prompt);
  } else {
    MESSAGE("the prefill finished before the cancel request arrived");
    CHECK(r.reason == StopReason::MaxTokens);
  }
  CHECK(s.n_past() == static_cast<int>(s.history().size()));
  s.reset();
  gp.max_tokens = 2;
  gp.ignore_eos = true;
  CHECK(s.generate("Hello", gp).tokens.size() == 2);
}

// ---- resource limits ----

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
