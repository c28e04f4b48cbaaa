// Several Sessions sharing one model from several threads equal running them one after another
// (also built with ThreadSanitizer by .ci/run), and cancellation from another thread.
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

namespace {

// One conversation of the concurrency test: its own prompt, sampler seed and session shape.
struct SessionJob {
  std::string prompt;
  GenerateParams gp;
  SessionParams sp = one_thread();
};

std::vector<SessionJob> make_jobs(int n, int max_tokens, bool pool_of_two) {
  const char* prompts[] = {"Once upon a time", "The little dog", "She said hello to", "In the morning the sun",
                           "Tom and Lily went", "A big red ball"};
  std::vector<SessionJob> jobs;
  for (int i = 0; i < n; ++i) {
    SessionJob j;
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
std::vector<int32_t> run_job(const Loaded& m, const SessionJob& j) {
  Session s(m.model, m.tok, j.sp);
  GenerateResult a = s.generate(j.prompt, j.gp);
  GenerateResult b = s.generate(" and then", j.gp);
  std::vector<int32_t> out = a.tokens;
  out.push_back(-1);  // turn separator
  out.insert(out.end(), b.tokens.begin(), b.tokens.end());
  return out;
}

void check_concurrent_equals_sequential(const Loaded& m, int n_jobs, int max_tokens, bool pool_of_two) {
  const std::vector<SessionJob> jobs = make_jobs(n_jobs, max_tokens, pool_of_two);
  std::vector<std::vector<int32_t>> sequential;
  for (const SessionJob& j : jobs) sequential.push_back(run_job(m, j));

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

}  // namespace

TEST_CASE("concurrent sessions on one synthetic model equal the same sessions run one after another") {
  check_concurrent_equals_sequential(synthetic(), /*n_jobs=*/4, /*max_tokens=*/40, /*pool_of_two=*/true);
}

TEST_CASE("concurrent sessions on stories260K equal the same sessions run one after another") {
  const Loaded* m = stories();
  if (!m) EDGELLM_SKIP(kData, "/models/stories260K.gguf not found");
  check_concurrent_equals_sequential(*m, /*n_jobs=*/4, /*max_tokens=*/60, /*pool_of_two=*/false);
}

TEST_CASE("sessions keep the model alive after the loader drops it") {
  Loaded m = load_bytes(synthetic_bytes());
  const std::vector<SessionJob> jobs = make_jobs(2, /*max_tokens=*/10, /*pool_of_two=*/false);
  const std::vector<int32_t> expect0 = run_job(m, jobs[0]), expect1 = run_job(m, jobs[1]);
  std::vector<int32_t> got0, got1;
  std::atomic<int> started{0};
  auto worker = [&started](std::shared_ptr<Session> s, const SessionJob& j, std::vector<int32_t>* out) {
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
