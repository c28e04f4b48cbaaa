// DecodeLoop (engine/decode_loop.hpp) driven directly, as Session and BatchScheduler drive it, by a
// scripted DecodeHost: sequences come from the test's cache, make_room fails when the script says
// so, cancel probes answer from a flag, and every emitted piece and finished stream is recorded.
// The model is the tiny synthetic one built in memory (no model file, no shared data); the tokens
// DecodeLoop produces are checked against greedy decoding written out with model.forward alone.
// (Everything, the cases too, is in a namespace of its own: the engine group is one translation unit.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <edgellm/engine/decode_loop.hpp>

#include "session_fixtures.hpp"

namespace decode_loop_test {

using namespace edgellm;

constexpr int kCtx = 64;

// The host a test scripts. no_room(s, n): true, make_room throws (a full cache, a KV budget).
struct ScriptedHost final : DecodeHost {
  explicit ScriptedHost(PagedKvCache& c) : kv(c) {}
  void assign_sequence(DecodeStream& s) override { s.seq = kv.create_sequence(); }
  void make_room(DecodeStream& s, int n) override {
    room_asked.push_back(n);
    if (no_room && no_room(s, n)) throw_error("scripted host: no room for ", n, " tokens");
    EDGELLM_CHECK(kv.fits(s.seq, n), "scripted host: the cache has no room for ", n, " tokens");
  }
  bool cancelled(DecodeStream&) override { return cancel; }
  bool emit(DecodeStream&, const std::string&, const TokenAlternatives*) override {
    ++n_emits;
    return !consumer_cancels;
  }
  void finished(DecodeStream& s) override { ended.push_back(&s); }

  PagedKvCache& kv;
  std::function<bool(const DecodeStream&, int)> no_room;
  bool cancel = false;
  bool consumer_cancels = false;
  std::vector<int> room_asked;
  std::vector<const DecodeStream*> ended;
  int n_emits = 0;  // each token's text, and the held-back tail at the end
};

// A drafter that proposes the given continuation (right == true: the reference tokens, which the
// greedy verification accepts; false: each reference token + 1, which it rejects).
struct ScriptedDrafter final : Drafter {
  ScriptedDrafter(std::vector<int32_t> prompt_and_ref, bool right) : seq_(std::move(prompt_and_ref)), right_(right) {}
  void draft(int, const std::vector<int32_t>& tokens, int n_max, const SpeculativeParams&, const SamplerParams&,
             std::vector<int32_t>& out, DraftDistributions*) override {
    ++calls;
    out.clear();
    for (size_t i = tokens.size(); i < seq_.size() && static_cast<int>(out.size()) < n_max; ++i)
      out.push_back(right_ ? seq_[i] : (seq_[i] + 1) % 512);
  }
  int calls = 0;

 private:
  std::vector<int32_t> seq_;
  bool right_;
};

int32_t greedy_pick(const float* row, int n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

// Greedy decoding written out: the prompt in chunks of `chunk` prefilled rows, then one decoded row
// a token (the batches DecodeLoop builds for one stream).
std::vector<int32_t> greedy_by_hand(const std::vector<int32_t>& prompt, int n, int chunk) {
  const LlamaModel& m = *edgellm_test::synthetic().model;
  const int nv = m.config().n_vocab;
  LlamaContext ctx;
  PagedKvCache kv(m.kv_params(kCtx));
  const int s = kv.create_sequence();
  Batch b;
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(chunk)) {
    b.clear();
    b.n_generated = 0;
    for (size_t j = i; j < std::min(prompt.size(), i + static_cast<size_t>(chunk)); ++j)
      b.add(prompt[j], static_cast<int32_t>(j), s, j + 1 == prompt.size());
    m.forward(ctx, kv, b);
  }
  std::vector<int32_t> out{greedy_pick(ctx.logits(0), nv)};
  while (static_cast<int>(out.size()) < n) {
    b.clear();
    b.add(out.back(), kv.n_tokens(s), s, true);
    b.n_generated = 1;
    m.forward(ctx, kv, b);
    out.push_back(greedy_pick(ctx.logits(0), nv));
  }
  return out;
}

const std::vector<int32_t> kPromptA = {1, 17, 300, 4, 99};
const std::vector<int32_t> kPromptB = {1, 250, 7, 42};

// A loop over the synthetic model with its own cache and context.
struct LoopRig {
  explicit LoopRig(int chunk = 2, Drafter* drafter = nullptr, bool no_room_is_context_full = false)
      : kv(edgellm_test::synthetic().model->kv_params(kCtx)), host(kv),
        loop(*edgellm_test::synthetic().model, *edgellm_test::synthetic().tok, ctx, kv, host,
             params(chunk, drafter, no_room_is_context_full)) {}
  static DecodeLoopParams params(int chunk, Drafter* drafter, bool full) {
    DecodeLoopParams p;
    p.n_ctx = kCtx;
    p.chunk = chunk;
    p.drafter = drafter;
    p.no_room_is_context_full = full;
    return p;
  }
  // Steps until every stream is done (at most max_steps); returns the steps' statistics.
  std::vector<DecodeStepStats> run(const std::vector<DecodeStream*>& streams, int max_steps = 100) {
    std::vector<DecodeStepStats> st;
    while (static_cast<int>(st.size()) < max_steps &&
           std::any_of(streams.begin(), streams.end(), [](const DecodeStream* s) { return !s->done; }))
      st.push_back(loop.step(streams));
    return st;
  }
  LlamaContext ctx;
  PagedKvCache kv;
  ScriptedHost host;
  DecodeLoop loop;
};

// A greedy stream of `prompt` generating max_tokens (EOS does not end it: the model is random).
void init_stream(DecodeStream& s, const std::vector<int32_t>& prompt, int max_tokens) {
  s.prompt = prompt;
  s.gp.max_tokens = max_tokens;
  s.gp.sampler.temperature = 0;
  s.gp.ignore_eos = true;
}

std::string error_of(const DecodeStream& s) {
  REQUIRE(s.error);
  try {
    std::rethrow_exception(s.error);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}


TEST_CASE("decode loop: the prompt a chunk a step, then greedy tokens equal to model.forward by hand") {
  LoopRig rig(2);
  DecodeStream s;
  init_stream(s, kPromptA, 6);
  const std::vector<DecodeStepStats> st = rig.run({&s});
  REQUIRE(s.done);
  CHECK_FALSE(s.error);
  CHECK(s.r.reason == StopReason::MaxTokens);
  CHECK(s.r.tokens == greedy_by_hand(kPromptA, 6, 2));
  // 3 chunks (2 + 2 + 1 prompt rows), 5 decoded tokens, then the 6th ends the stream unevaluated.
  REQUIRE(st.size() == 9);
  CHECK(st[0].prompt_tokens == 2);
  CHECK(st[2].prompt_tokens == 1);
  CHECK(st[3].generated == 1);
  CHECK(st[8].generated == 0);
  CHECK(rig.kv.n_tokens(s.seq) == static_cast<int>(kPromptA.size()) + 5);
  CHECK(s.held.size() == kPromptA.size() + 5);
  CHECK(rig.host.ended.size() == 1);
  CHECK(rig.host.n_emits == 6 + 1);  // each token's text, then the held-back tail
  CHECK(s.r.n_passes == 5);
}

TEST_CASE("decode loop: cancel by the host before the next token or chunk, and by the consumer at emit") {
  SUBCASE("host probe while reading the prompt") {
    LoopRig rig(2);
    DecodeStream s;
    init_stream(s, kPromptA, 6);
    rig.loop.step({&s});
    rig.host.cancel = true;
    const DecodeStepStats st = rig.loop.step({&s});
    CHECK(s.done);
    CHECK(s.r.reason == StopReason::Cancelled);
    CHECK(st.prompt_tokens == 0);
    CHECK(s.r.tokens.empty());
    CHECK(rig.kv.n_tokens(s.seq) == 2);  // the chunk read before the cancel stays
    CHECK(rig.host.ended.size() == 1);
  }
  SUBCASE("host probe while generating: no token after it") {
    LoopRig rig(8);
    DecodeStream s;
    init_stream(s, kPromptA, 6);
    rig.loop.step({&s});  // the whole prompt
    rig.loop.step({&s});  // the first token
    REQUIRE(s.r.tokens.size() == 1);
    rig.host.cancel = true;
    rig.loop.step({&s});
    CHECK(s.done);
    CHECK(s.r.reason == StopReason::Cancelled);
    CHECK(s.r.tokens.size() == 1);
  }
  SUBCASE("the consumer refuses a piece") {
    LoopRig rig(8);
    DecodeStream s;
    init_stream(s, kPromptA, 6);
    rig.host.consumer_cancels = true;
    rig.run({&s});
    CHECK(s.r.reason == StopReason::Cancelled);
    CHECK(s.r.tokens.size() == 1);  // the token whose text was refused is recorded, not evaluated
    CHECK(rig.kv.n_tokens(s.seq) == static_cast<int>(kPromptA.size()));
  }
}

TEST_CASE("decode loop: make_room failing for a prompt chunk fails that stream, for a token ends it or fails it") {
  SUBCASE("prompt chunk: the stream fails with the host's Error, the other stream goes on") {
    LoopRig rig(8);
    DecodeStream a, b;
    init_stream(a, kPromptA, 4);
    init_stream(b, kPromptB, 4);
    rig.host.no_room = [&](const DecodeStream& s, int) { return &s == &b; };
    rig.run({&a, &b});
    CHECK(b.done);
    CHECK(error_of(b).find("scripted host: no room for 4 tokens") != std::string::npos);
    CHECK(a.r.reason == StopReason::MaxTokens);
    CHECK(a.r.tokens == greedy_by_hand(kPromptA, 4, 8));
  }
  SUBCASE("a generated token: the stream fails (Session throws it) or, no_room_is_context_full, ends with ContextFull") {
    for (const bool full : {false, true}) {
      CAPTURE(full);
      LoopRig rig(8, nullptr, full);
      DecodeStream s;
      init_stream(s, kPromptA, 6);
      rig.host.no_room = [](const DecodeStream& d, int n) { return n == 1 && d.r.tokens.size() == 3; };
      rig.run({&s});
      CHECK(s.r.tokens == greedy_by_hand(kPromptA, 3, 8));  // the third found no room: kept, not evaluated
      CHECK(rig.kv.n_tokens(s.seq) == static_cast<int>(kPromptA.size()) + 2);
      if (full) {
        CHECK_FALSE(s.error);
        CHECK(s.r.reason == StopReason::ContextFull);  // the server's "length"
      } else {
        CHECK(error_of(s).find("no room for 1 tokens") != std::string::npos);
      }
    }
  }
}

TEST_CASE("decode loop: a forward pass failing with a prompt chunk is retried without it, failing only that stream") {
  LoopRig rig(8);
  DecodeStream a, b;
  init_stream(a, kPromptA, 5);
  init_stream(b, {1, 250, 100000, 7}, 4);  // a token outside the vocabulary: the model's forward throws
  rig.loop.step({&a, &b});                  // a's prompt (b waits: one chunk a step)
  REQUIRE(a.generating);
  const DecodeStepStats st = rig.loop.step({&a, &b});  // a's first token with b's chunk: fails, then a alone
  CHECK(b.done);
  CHECK(error_of(b).find("outside the vocabulary") != std::string::npos);
  CHECK(st.generated == 1);
  CHECK(st.prompt_tokens == 0);
  CHECK_FALSE(a.done);
  CHECK(rig.kv.n_tokens(b.seq) == 0);  // the failed pass left nothing of b in the cache
  rig.run({&a, &b});
  CHECK(a.r.reason == StopReason::MaxTokens);
  CHECK(a.r.tokens == greedy_by_hand(kPromptA, 5, 8));
  CHECK(rig.kv.n_tokens(a.seq) == static_cast<int>(kPromptA.size()) + 4);
}

TEST_CASE("decode loop: a failing pass without generated tokens fails its prompt chunk's stream (nothing to retry)") {
  LoopRig rig(8);
  DecodeStream c;
  init_stream(c, {1, 100000}, 4);
  const DecodeStepStats st = rig.loop.step({&c});
  CHECK(c.done);
  CHECK(error_of(c).find("outside the vocabulary") != std::string::npos);
  CHECK(st.prompt_tokens == 0);
  CHECK(rig.kv.n_tokens(c.seq) == 0);
  CHECK(rig.host.ended.size() == 1);
}

TEST_CASE("decode loop: a deadline ends a stream before its chunk, and before evaluating its next token") {
  SUBCASE("already past at the first chunk: no forward pass") {
    LoopRig rig(8);
    DecodeStream s;
    init_stream(s, kPromptA, 6);
    s.gp.deadline_ms = 50;
    s.waited_ms = 60;  // queued longer than the budget
    const DecodeStepStats st = rig.loop.step({&s});
    CHECK(s.done);
    CHECK(s.r.reason == StopReason::Deadline);
    CHECK(st.prompt_tokens == 0);
    CHECK(s.seq < 0);  // no sequence was assigned
  }
  SUBCASE("past while generating: the sampled token is kept, not evaluated") {
    LoopRig rig(8);
    DecodeStream s;
    init_stream(s, kPromptA, 6);
    s.gp.deadline_ms = 1e9;
    rig.loop.step({&s});
    rig.loop.step({&s});
    REQUIRE(s.r.tokens.size() == 1);
    s.waited_ms = 2e9;
    const DecodeStepStats st = rig.loop.step({&s});
    CHECK(s.r.reason == StopReason::Deadline);
    CHECK(s.r.tokens == greedy_by_hand(kPromptA, 2, 8));
    CHECK(st.generated == 0);
    CHECK(rig.kv.n_tokens(s.seq) == static_cast<int>(kPromptA.size()) + 1);
  }
}

TEST_CASE("decode loop: speculative rows are verified in one pass, accepted drafts or not the tokens are greedy's") {
  const std::vector<int32_t> ref = greedy_by_hand(kPromptA, 10, 8);
  std::vector<int32_t> prompt_and_ref = kPromptA;
  prompt_and_ref.insert(prompt_and_ref.end(), ref.begin(), ref.end());
  for (const bool right : {true, false}) {
    CAPTURE(right);
    ScriptedDrafter drafter(prompt_and_ref, right);
    LoopRig rig(8, &drafter);
    DecodeStream s;
    init_stream(s, kPromptA, 10);
    s.gp.speculative.n_max = 3;
    const std::vector<DecodeStepStats> st = rig.run({&s});
    CHECK(s.r.reason == StopReason::MaxTokens);
    CHECK(s.r.tokens == ref);
    CHECK(drafter.calls > 0);
    CHECK(s.r.n_drafted > 0);
    // The cache holds the evaluated tokens only: rejected drafts were truncated away.
    CHECK(rig.kv.n_tokens(s.seq) == static_cast<int>(s.held.size()));
    if (right) {
      CHECK(s.r.n_accepted == s.r.n_drafted);
      CHECK(s.r.n_passes < 9);  // accepted drafts are tokens without a pass of their own
      CHECK(std::any_of(st.begin(), st.end(), [](const DecodeStepStats& x) { return x.generated > 1; }));
    } else {
      CHECK(s.r.n_accepted == 0);
      CHECK(s.r.n_passes == 9);
    }
  }
}

}  // namespace decode_loop_test
