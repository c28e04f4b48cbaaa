// BatchScheduler: requests decoded together equal the same requests run alone in a Session;
// decode steps carry several slots; a queue beyond the slots; prompt prefixes reused (shared
// blocks); cancellation frees the blocks (also through the client probe, with a real socket);
// a long prompt is read a chunk per step while running requests go on; deadlines and bad requests.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <edgellm/engine/batch_scheduler.hpp>
#include "client_socket.hpp"  // examples/server/

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
  do sched.step();  // a takes a slot and evaluates its whole prompt, a chunk a step
  while (sched.stats().slots_prefilling > 0);
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
  SchedulerParams p = sched_params(2);
  p.prefill_chunk = 0;  // a whole prompt per step
  BatchScheduler sched(m.model, m.tok, p);
  GenerateParams gp = greedy(-1);
  gp.ignore_eos = true;
  const auto job = sched.submit(prompt_tokens(m, long_text(30)), gp);
  const auto other = sched.submit(prompt_tokens(m, "Tom"), greedy(8));
  sched.step();  // job's prompt
  sched.step();  // job's first token, other's prompt
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

TEST_CASE("the worker thread serves jobs submitted from other threads, a queued job can be cancelled") {
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

TEST_CASE("deadline_ms ends a request with reason Deadline, stop strings, n_probs alternatives") {
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

namespace {

// A long prompt (cache_prompt off: every token evaluated) arrives while `a` generates: each step
// while it is read carries exactly one prompt chunk and a's next token; both texts equal alone.
void check_long_prompt_interleaved(const Loaded& m, const std::string& a_prompt, const std::string& long_prompt) {
  SchedulerParams p = sched_params(2, 2048);
  p.prefill_chunk = 16;
  BatchScheduler sched(m.model, m.tok, p);
  const auto long_toks = prompt_tokens(m, long_prompt);
  const int want_chunks = (static_cast<int>(long_toks.size()) + 15) / 16;
  REQUIRE(want_chunks >= 4);
  GenerateParams ga = greedy(want_chunks + 40);
  ga.ignore_eos = true;  // a keeps generating through the long prompt's prefill
  const auto a = sched.submit(prompt_tokens(m, a_prompt), ga);
  sched.step();  // a's prompt
  sched.step();  // a's first token
  const auto l = sched.submit(long_toks, greedy(24), false);
  int steps = 0, a_tokens_meanwhile = 0;
  for (;;) {
    const auto before = sched.stats();
    sched.step();
    const auto after = sched.stats();
    ++steps;
    CHECK(after.prefill_chunks - before.prefill_chunks == 1);  // one chunk per step ...
    a_tokens_meanwhile += static_cast<int>(after.step_tokens - before.step_tokens);
    CHECK(after.step_tokens - before.step_tokens == 1);        // ... beside a's next token
    if (after.slots_prefilling == 0) break;
    REQUIRE(steps < 1000);
  }
  CHECK(steps == want_chunks);
  CHECK(a_tokens_meanwhile == want_chunks);  // a never waited for the long prompt
  MESSAGE("a ", long_toks.size(), "-token prompt read in ", steps, " chunks of 16; the running request got ",
          a_tokens_meanwhile, " tokens meanwhile");
  CHECK_FALSE(a->done());
  sched.run_until_idle();
  CHECK(l->result().n_cached == 0);
  CHECK(l->result().n_prompt == static_cast<int>(long_toks.size()));
  const GenerateResult want_a = alone(m, a_prompt, ga, 2048);
  const GenerateResult want_l = alone(m, long_prompt, greedy(24), 2048);
  CHECK(a->result().tokens == want_a.tokens);
  CHECK(a->result().text == want_a.text);
  CHECK(l->result().tokens == want_l.tokens);
  CHECK(l->result().text == want_l.text);
  CHECK(sched.stats().prefill_tokens >= long_toks.size());
}

}  // namespace

TEST_CASE("a long prompt is read a chunk per step while running requests go on generating (texts equal alone)") {
  check_long_prompt_interleaved(synthetic(), "Tom", long_text(60));
  const Loaded* m = stories();
  if (!m) EDGELLM_SKIP("stories260K.gguf not found under ", kData);
  std::string story;
  for (int i = 0; i < 12; ++i) story += "Once upon a time, there was a little girl named Lily. She liked to play in the park. ";
  check_long_prompt_interleaved(*m, "The little dog", story);
}

TEST_CASE("requests whose prompts share a prefix with one still being read reuse all of it") {
  const Loaded& m = synthetic();
  SchedulerParams p = sched_params(2, 2048);
  p.prefill_chunk = 16;
  BatchScheduler sched(m.model, m.tok, p);
  const std::string system = long_text(40);
  const auto a = sched.submit(prompt_tokens(m, system + " A"), greedy(8));
  const auto b = sched.submit(prompt_tokens(m, system + " B"), greedy(8));
  sched.run_until_idle();
  const int n_system = static_cast<int>(prompt_tokens(m, system).size());
  CHECK(b->result().n_cached >= n_system - 1);  // b's prefill starts after a's: it forks all of a's prompt
  CHECK(b->result().text == alone(m, system + " B", greedy(8), 2048).text);
  CHECK(a->result().text == alone(m, system + " A", greedy(8), 2048).text);
}

TEST_CASE("the client probe cancels a request before its next token, chunk, or admission") {
  const Loaded& m = synthetic();
  SchedulerParams p = sched_params(2, 2048);
  p.prefill_chunk = 16;
  BatchScheduler sched(m.model, m.tok, p);
  GenerateParams gp = greedy(-1);
  gp.ignore_eos = true;
  // Generating: the probe says "gone" after the 5th token; the 6th is never sampled.
  std::atomic<bool> gone_a{false};
  const auto a = sched.submit(prompt_tokens(m, "Tom"), gp, true, 0, false, [&] { return gone_a.load(); });
  sched.step();  // prompt
  for (int i = 0; i < 5; ++i) sched.step();
  gone_a = true;
  sched.step();
  REQUIRE(a->done());
  CHECK(a->result().reason == StopReason::Cancelled);
  CHECK(a->result().tokens.size() == 5);
  // Reading its prompt: no chunk after the probe says "gone".
  std::atomic<bool> gone_b{false};
  const auto b = sched.submit(prompt_tokens(m, long_text(60)), gp, false, 0, false, [&] { return gone_b.load(); });
  sched.step();
  const uint64_t chunks = sched.stats().prefill_chunks;
  gone_b = true;
  sched.step();
  REQUIRE(b->done());
  CHECK(b->result().reason == StopReason::Cancelled);
  CHECK(b->result().tokens.empty());
  CHECK(sched.stats().prefill_chunks == chunks);
  // Queued: ends at admission, nothing evaluated.
  const auto c = sched.submit(prompt_tokens(m, "the cat"), gp, true, 0, false, [] { return true; });
  sched.step();
  REQUIRE(c->done());
  CHECK(c->result().reason == StopReason::Cancelled);
  CHECK(sched.stats().prefill_chunks == chunks);
  const auto st = sched.stats();
  CHECK(st.cancelled == 3);
  CHECK(st.kv_sequences == 0);  // cancelled sequences are not kept
  CHECK(st.kv_blocks_used == 0);
}

namespace {

// A connected loopback TCP pair: {client, server side}.
std::pair<int, int> tcp_pair() {
  const int lst = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(lst >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(listen(lst, 1) == 0);
  socklen_t len = sizeof(a);
  REQUIRE(getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  const int cli = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  const int srv = accept(lst, nullptr, nullptr);
  REQUIRE(srv >= 0);
  close(lst);
  return {cli, srv};
}

}  // namespace

TEST_CASE("ClientSocket: pipelined bytes are not a close, a closed client is gone") {
  auto [cli, srv] = tcp_pair();
  ClientSocket cs(srv);
  CHECK_FALSE(cs.gone());
  REQUIRE(write(cli, "GET", 3) == 3);  // a pipelined next request
  CHECK_FALSE(cs.gone());
  char buf[3];
  REQUIRE(read(srv, buf, 3) == 3);
  close(cli);
  CHECK(cs.gone());
  cs.detach();
  CHECK_FALSE(cs.gone());  // detached: never probes the descriptor again
  close(srv);
}

TEST_CASE("a job whose client socket closes is cancelled before its next token (worker thread)") {
  const Loaded& m = synthetic();
  BatchScheduler sched(m.model, m.tok, sched_params(1, 4096));
  auto [cli, srv] = tcp_pair();
  auto conn = std::make_shared<ClientSocket>(srv);
  GenerateParams gp = greedy(-1);
  gp.ignore_eos = true;
  sched.start();
  const auto job = sched.submit(prompt_tokens(m, "Tom"), gp, true, 0, true, [conn] { return conn->gone(); });
  std::string text;
  while (text.size() < 8) {
    auto out = job->wait(std::chrono::milliseconds(1000));
    REQUIRE_FALSE(out.done);
    text += out.text();
  }
  const auto t0 = std::chrono::steady_clock::now();
  close(cli);
  const uint64_t tokens_at_close = sched.stats().step_tokens;  // this job's only (one slot)
  const JobResult& r = job->wait_done();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  conn->detach();
  close(srv);
  CHECK(r.reason == StopReason::Cancelled);
  CHECK(r.tokens.size() <= tokens_at_close + 1);  // at most the token of the step under way
  CHECK(ms < 2000);
  MESSAGE("closed client noticed after ", ms, " ms (", r.tokens.size(), " tokens generated)");
  sched.stop();
  CHECK(sched.stats().kv_sequences == 0);
}

TEST_CASE("a kept sequence saved and restored into another scheduler is reused with the same text (/slots)") {
  const Loaded& m = synthetic();
  const auto toks = prompt_tokens(m, long_text(20));
  BatchScheduler a(m.model, m.tok, sched_params(1));
  const auto first = a.submit(toks, greedy(16));
  a.run_until_idle();
  CHECK_THROWS_WITH_AS(a.snapshot_kept(1), doctest::Contains("no kept sequence 1 (1 kept"), Error);
  const SessionSnapshot snap = a.snapshot_kept(0);
  CHECK(snap.tokens.size() >= toks.size());
  BatchScheduler b(m.model, m.tok, sched_params(1));
  b.start();  // restore_kept on the worker thread, between steps
  b.restore_kept(snap, "kept.state");
  const auto job = b.submit(toks, greedy(16));
  const JobResult& again = job->wait_done();
  CHECK(again.n_cached == static_cast<int>(toks.size()) - 1);
  CHECK(again.text == first->result().text);
  CHECK(b.erase_kept(0) > 0);
  b.stop();
  SchedulerParams other = sched_params(1);
  other.session.kv_type = DType::F16;
  BatchScheduler c(m.model, m.tok, other);
  CHECK_THROWS_WITH_AS(c.restore_kept(snap, "kept.state"), doctest::Contains("holds a f32 KV cache"), Error);
}
