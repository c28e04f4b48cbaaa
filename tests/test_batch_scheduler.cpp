// BatchScheduler: requests decoded together equal the same requests run alone in a Session;
// decode steps carry several slots; a queue beyond the slots; prompt prefixes reused (shared
// blocks); cancellation frees the blocks; deadlines and bad requests.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <edgellm/engine/batch_scheduler.hpp>

#include "session_fixtures.hpp"

using namespace edgellm;
using namespace edgellm_test;

namespace {

SchedulerParams sched_params(int n_parallel, int n_ctx = 512) {
  SchedulerParams p;
  p.session = one_thread();
  p.session.n_ctx = n_ctx;
  p.n_parallel = n_parallel;
  return p;
}

GenerateParams greedy(int max_tokens) {
  GenerateParams gp;
  gp.max_tokens = max_tokens;
  gp.sampler.temperature = 0;
  return gp;
}

std::vector<int32_t> prompt_tokens(const Loaded& m, const std::string& text) {
  return m.tok->encode(text, m.tok->add_bos(), true);
}

// What a Session alone generates for the prompt.
GenerateResult alone(const Loaded& m, const std::string& prompt, const GenerateParams& gp, int n_ctx = 512) {
  SessionParams sp = one_thread();
  sp.n_ctx = n_ctx;
  Session s(m.model, m.tok, sp);
  return s.generate(prompt, gp);
}

void check_same_as_alone(const Loaded& m, int n_parallel, const GenerateParams& gp) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom went to the park",
                                            "One day, a bird", "Sam had a red ball"};
  BatchScheduler sched(m.model, m.tok, sched_params(n_parallel));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : prompts) jobs.push_back(sched.submit(prompt_tokens(m, p), gp));
  sched.run_until_idle();
  for (size_t i = 0; i < prompts.size(); ++i) {
    REQUIRE(jobs[i]->done());
    const JobResult& r = jobs[i]->result();
    const GenerateResult want = alone(m, prompts[i], gp);
    CHECK(r.error.empty());
    CHECK(r.text == want.text);
    CHECK(r.tokens == want.tokens);
    CHECK(r.reason == want.reason);
    CHECK(r.n_prompt == static_cast<int>(prompt_tokens(m, prompts[i]).size()));
  }
  const auto st = sched.stats();
  CHECK(st.max_step_tokens == std::min<int>(n_parallel, static_cast<int>(prompts.size())));
  CHECK(st.slots_busy == 0);
  CHECK(st.queued == 0);
}

}  // namespace

TEST_CASE("requests decoded together equal each request alone (synthetic model, greedy and seeded)") {
  const Loaded& m = synthetic();
  check_same_as_alone(m, 3, greedy(24));
  GenerateParams sampled = greedy(24);
  sampled.sampler.temperature = 0.9f;
  sampled.sampler.seed = 7;
  check_same_as_alone(m, 5, sampled);
}

TEST_CASE("requests decoded together equal each request alone (stories260K, greedy, queue beyond the slots)") {
  const Loaded* m = stories();
  if (!m) EDGELLM_SKIP("stories260K.gguf not found under ", kData);
  check_same_as_alone(*m, 2, greedy(64));  // 5 requests, 2 slots: 3 wait in the queue
  check_same_as_alone(*m, 5, greedy(64));
}

TEST_CASE("a common prompt prefix is evaluated once and its blocks are shared") {
  const Loaded& m = synthetic();
  const std::string system = long_text(25);
  BatchScheduler sched(m.model, m.tok, sched_params(2));
  const auto a = sched.submit(prompt_tokens(m, system + " A"), greedy(40));
  sched.step();  // a takes a slot and evaluates its whole prompt
  const auto b = sched.submit(prompt_tokens(m, system + " B"), greedy(40));
  sched.step();  // b forks a's sequence at the common prefix
  const int n_system = static_cast<int>(prompt_tokens(m, system).size());
  // Both running: fewer blocks than two separate copies of the prompt.
  const auto st = sched.stats();
  const int per_copy = (n_system + 16) / 16;
  CHECK(st.kv_sequences == 2);
  CHECK(st.kv_blocks_used < 2 * per_copy);
  CHECK(st.prompt_tokens_reused >= static_cast<uint64_t>(n_system - 16));
  sched.run_until_idle();
  CHECK(b->result().n_cached >= n_system - 1);
  CHECK(b->result().text == alone(m, system + " B", greedy(40)).text);
  CHECK(a->result().text == alone(m, system + " A", greedy(40)).text);
}

TEST_CASE("a finished request's sequence is kept for the next one with the same prefix (cache_prompt)") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(1));
  const auto toks = prompt_tokens(m, long_text(20));
  const auto first = sched.submit(toks, greedy(16));
  sched.run_until_idle();
  CHECK(sched.stats().cached_sequences == 1);
  const auto again = sched.submit(toks, greedy(16));
  sched.run_until_idle();
  CHECK(again->result().n_cached == static_cast<int>(toks.size()) - 1);  // only the last token again
  CHECK(again->result().text == first->result().text);
  // cache_prompt = false: nothing reused, and the sequence is not kept.
  const auto fresh = sched.submit(toks, greedy(16), false);
  sched.run_until_idle();
  CHECK(fresh->result().n_cached == 0);
  CHECK(fresh->result().text == first->result().text);
  CHECK(sched.stats().kv_sequences == 1);  // the kept one from before
}

TEST_CASE("a cancelled request stops before its next token and its blocks return to the pool") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(2));
  GenerateParams gp = greedy(-1);
  gp.ignore_eos = true;
  const auto job = sched.submit(prompt_tokens(m, long_text(30)), gp);
  const auto other = sched.submit(prompt_tokens(m, "Tom"), greedy(8));
  sched.step();
  sched.step();
  sched.step();
  job->cancel();
  sched.step();
  REQUIRE(job->done());
  CHECK(job->result().reason == StopReason::Cancelled);
  CHECK(job->result().tokens.size() == 3);  // the three steps before the cancel
  sched.run_until_idle();
  CHECK(other->result().reason == StopReason::MaxTokens);
  // Only the finished (not cancelled) request's sequence is kept.
  const auto st = sched.stats();
  CHECK(st.kv_sequences == 1);
  CHECK(st.cached_sequences == 1);
  const JobResult& o = other->result();
  // The last sampled token is evaluated only when generation goes on past it.
  const int held = o.n_prompt + static_cast<int>(o.tokens.size()) - (o.reason == StopReason::MaxTokens ? 1 : 0);
  CHECK(st.kv_blocks_used == (held + 15) / 16);
}

TEST_CASE("the worker thread serves jobs submitted from other threads; a queued job can be cancelled") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(1, 4096));
  GenerateParams slow = greedy(-1);
  slow.ignore_eos = true;
  sched.start();
  const auto running = sched.submit(prompt_tokens(m, "Tom"), slow);
  const auto queued = sched.submit(prompt_tokens(m, "the cat"), greedy(4));
  queued->cancel();
  // The running job streams text through wait().
  std::string text;
  while (text.size() < 8) {
    auto out = running->wait(std::chrono::milliseconds(1000));
    REQUIRE_FALSE(out.done);
    text += out.text();
  }
  running->cancel();
  const JobResult& r = running->wait_done();
  CHECK(r.reason == StopReason::Cancelled);
  CHECK(r.text.compare(0, text.size(), text) == 0);
  CHECK(queued->wait_done().reason == StopReason::Cancelled);
  CHECK(queued->result().tokens.empty());
  sched.stop();
  CHECK(sched.stats().kv_sequences == 0);
}

TEST_CASE("deadline_ms ends a request with reason Deadline; stop strings; n_probs alternatives") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(2, 4096));
  GenerateParams gp = greedy(-1);
  gp.ignore_eos = true;
  gp.deadline_ms = 20;
  const auto job = sched.submit(prompt_tokens(m, "Tom"), gp);
  sched.run_until_idle();
  CHECK(job->result().reason == StopReason::Deadline);

  const GenerateResult ref = alone(m, "the cat", greedy(20));
  REQUIRE(ref.text.size() > 6);
  GenerateParams st = greedy(20);
  st.stop = {ref.text.substr(3, 3)};
  const auto stopped = sched.submit(prompt_tokens(m, "the cat"), st, true, 3);
  sched.run_until_idle();
  CHECK(stopped->result().reason == StopReason::StopString);
  CHECK(stopped->result().text == ref.text.substr(0, ref.text.find(st.stop[0])));
  auto out = stopped->wait(std::chrono::milliseconds(0));
  REQUIRE(out.pieces.size() == stopped->result().tokens.size());
  for (const auto& piece : out.pieces) {
    const TokenAlternatives& a = piece.probs;
    REQUIRE(a.top.size() == 3);
    CHECK(a.top[0].id == a.id);  // greedy: the chosen token is the most likely
    CHECK(a.top[0].p >= a.top[1].p);
  }
}

TEST_CASE("bad requests are refused at submit and the scheduler goes on") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(1, 64));
  CHECK_THROWS_AS(sched.submit({}, greedy(4)), Error);
  CHECK_THROWS_AS(sched.submit(std::vector<int32_t>(64, 1), greedy(4)), Error);  // no room to generate
  CHECK_THROWS_AS(sched.submit({1, 2, 1 << 20}, greedy(4)), Error);
  GenerateParams bad = greedy(4);
  bad.sampler.top_p = 2;
  CHECK_THROWS_AS(sched.submit({1, 2}, bad), Error);
  SchedulerParams tiny_queue = sched_params(1, 64);
  tiny_queue.max_queue = 0;
  BatchScheduler full(m.model, m.tok, tiny_queue);
  full.submit({1, 2}, greedy(4));
  CHECK_THROWS_AS(full.submit({1, 2}, greedy(4)), Error);
  // A request that reaches the context ends with "length", not an error.
  const auto j = sched.submit(std::vector<int32_t>(60, 3), greedy(-1));
  sched.run_until_idle();
  CHECK(j->result().error.empty());
  CHECK((j->result().reason == StopReason::ContextFull || j->result().reason == StopReason::EndOfGeneration));
}
