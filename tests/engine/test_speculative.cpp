// Speculative decoding (engine/speculative.hpp, verified in DecodeLoop): greedy output equals plain
// greedy output token for token on every shared model for each draft source (prompt lookup, a
// draft model of the same vocabulary, early exit), resident and with the weights streamed under a
// memory budget; stop rules per accepted token; seeded sampling unchanged (one-hot drafts); the
// mechanism check (the target as its own draft accepts everything: n_max + 1 tokens per pass);
// rejection sampling of sampled drafts keeps the target's distribution (chi-square); a draft model
// of another vocabulary is an Error.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <edgellm/engine/session.hpp>
#include <edgellm/engine/speculative.hpp>

#include "session_fixtures.hpp"

using namespace edgellm;
using namespace edgellm_test;

namespace {

GenerateParams spec_greedy(int max_tokens) {
  GenerateParams gp;
  gp.max_tokens = max_tokens;
  gp.sampler.temperature = 0;
  return gp;
}

Loaded spec_load(const std::string& path, const LoadOptions* opt = nullptr) {
  auto model = opt ? LlamaModel::load(path, *opt) : LlamaModel::load(path);
  return Loaded{model, std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()))};
}

// One generation on a fresh one-thread session, with an optional draft source.
GenerateResult spec_run(const Loaded& m, const std::string& prompt, const GenerateParams& gp,
                   std::shared_ptr<const LlamaModel> draft = nullptr, int draft_layers = 0) {
  SessionParams sp = one_thread();
  sp.n_ctx = 256;
  Session s(m.model, m.tok, sp);
  s.set_draft(std::move(draft), draft_layers);
  return s.generate(prompt, gp);
}

void spec_same(const GenerateResult& plain, const GenerateResult& spec, const char* what) {
  INFO(what);
  CHECK(spec.tokens == plain.tokens);
  CHECK(spec.text == plain.text);
  CHECK(spec.reason == plain.reason);
}

// Plain greedy vs lookup, early exit (1 layer) and the draft model `draft` (may be the target).
void spec_sources(const Loaded& m, const std::string& prompt, int n, std::shared_ptr<const LlamaModel> draft) {
  GenerateParams gp = spec_greedy(n);
  const GenerateResult plain = spec_run(m, prompt, gp);
  REQUIRE(plain.tokens.size() > 0);
  CHECK(plain.n_drafted == 0);
  GenerateParams look = gp;
  look.speculative.lookup = true;
  look.speculative.n_max = 4;
  const GenerateResult lk = spec_run(m, prompt, look);
  spec_same(plain, lk, "prompt lookup");
  GenerateParams spec = gp;
  spec.speculative.n_max = 3;
  const GenerateResult ee = spec_run(m, prompt, spec, nullptr, 1);
  spec_same(plain, ee, "early exit after 1 layer");
  CHECK(ee.n_drafted > 0);
  const GenerateResult dm = spec_run(m, prompt, spec, draft);
  spec_same(plain, dm, "draft model");
  CHECK(dm.n_drafted > 0);
  CHECK(dm.n_passes + dm.n_accepted >= static_cast<int>(dm.tokens.size()) - 1);
  MESSAGE(m.model->file().path(), ": lookup ", lk.n_accepted, "/", lk.n_drafted, ", early exit ", ee.n_accepted, "/",
          ee.n_drafted, ", draft model ", dm.n_accepted, "/", dm.n_drafted);
}

}  // namespace

TEST_CASE("speculative greedy output equals plain greedy output on every shared model, each draft source") {
  // Each family's draft model is one of its smaller quantizations (same vocabulary).
  struct Family {
    std::string dir, prefix, draft;
    std::vector<std::string> types;
  };
  const std::vector<Family> families = {
      {"models", "tiny-llama-256-", "Q4_0",
       {"f32", "F16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q2_K"}},
      {"iq/models", "tiny-llama-256-", "Q2_K_S-imat",
       {"IQ1_S-imat", "IQ1_M-imat", "IQ2_XXS-imat", "IQ2_XS-imat", "IQ2_S-imat", "IQ2_M-imat", "IQ3_XXS-imat",
        "IQ3_S-imat", "IQ3_M-imat", "IQ4_NL-imat", "IQ4_XS-imat", "TQ1_0-imat", "TQ2_0-imat", "Q4_K_M-imat"}},
      {"qwen/models", "tiny-qwen2-256-", "Q4_K_M", {"f32", "Q8_0", "Q4_K_M"}},
      {"qwen/models", "tiny-qwen3-256-", "Q4_K_M", {"f32", "Q8_0", "Q4_K_M"}},
  };
  for (const Family& f : families) {
    const std::string base = kData + "/" + f.dir + "/" + f.prefix;
    if (!path_exists(base + f.draft + ".gguf")) {
      EDGELLM_SKIP_PART(base + f.draft + ".gguf not found");
      continue;
    }
    const Loaded draft = spec_load(base + f.draft + ".gguf");
    for (const std::string& t : f.types) {
      const std::string path = base + t + ".gguf";
      if (!path_exists(path)) {
        EDGELLM_SKIP_PART(path, " not found");
        continue;
      }
      spec_sources(spec_load(path), "Hello world, this is", 20, draft.model);
    }
  }
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  spec_sources(*st, "Once upon a time, there was a little girl named Lily.", 40, st->model);
}

TEST_CASE("mechanism check: the target as its own draft accepts every draft, n_max + 1 tokens per target pass") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  GenerateParams gp = spec_greedy(21);  // the first token, then 4 passes of 1 + 4 tokens
  gp.speculative.n_max = 4;
  const GenerateResult plain = spec_run(*st, "Once upon a time", spec_greedy(21));
  const GenerateResult r = spec_run(*st, "Once upon a time", gp, st->model);
  spec_same(plain, r, "self draft");
  CHECK(r.n_drafted == 16);
  CHECK(r.n_accepted == r.n_drafted);
  CHECK(r.n_passes == 4);
  CHECK(r.tokens_per_pass() == doctest::Approx(5.0));
}

TEST_CASE("speculative decoding under a memory budget (streamed target) equals plain resident decoding") {
  // The synthetic tiny preset made deeper and wider (as test_weight_stream's) so that it streams at
  // its minimum budget: the shared tiny files are too small for a ring to pay.
  SyntheticSpec spec = synthetic_preset("tiny");
  spec.n_embd = 256;
  spec.n_ff = 768;
  spec.n_layer = 6;
  const std::vector<uint8_t> bytes = build_synthetic_gguf(spec, DType::Q8_0);
  const Loaded resident = load_bytes(bytes);
  const std::string prompt = "Hello world, this is";
  const GenerateResult plain = spec_run(resident, prompt, spec_greedy(16));
  LoadOptions opt;
  opt.plan.n_ctx = 256;
  opt.plan.n_threads = 1;
  uint64_t lo = 1, hi = uint64_t(64) << 20;  // the minimum budget, to 64 KiB
  while (hi - lo > (uint64_t(64) << 10)) {
    opt.mem_budget = lo + (hi - lo) / 2;
    try {
      LlamaModel m(GgufFile::from_bytes(bytes, "stream.gguf"), opt);
      hi = opt.mem_budget;
    } catch (const Error&) {
      lo = opt.mem_budget + 1;
    }
  }
  opt.mem_budget = hi;
  const Loaded m{std::make_shared<const LlamaModel>(GgufFile::from_bytes(bytes, "stream.gguf"), opt), resident.tok};
  REQUIRE(m.model->residency().streaming);
  GenerateParams gp = spec_greedy(16);
  spec_same(plain, spec_run(m, prompt, gp), "streamed, plain");
  gp.speculative.lookup = true;
  spec_same(plain, spec_run(m, prompt, gp), "streamed, lookup");
  gp.speculative.lookup = false;
  const GenerateResult dm = spec_run(m, prompt, gp, resident.model);
  spec_same(plain, dm, "streamed target, resident draft model");
  CHECK(dm.n_accepted == dm.n_drafted);  // the draft is the target's file
  spec_same(plain, spec_run(m, prompt, gp, nullptr, 2), "streamed, early exit");
}

TEST_CASE("stop rules apply per accepted token: max tokens, stop strings, EOS, seeded sampling") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  const std::string prompt = "Once upon a time, there was a little girl named Lily. She";
  const GenerateResult full = spec_run(*st, prompt, spec_greedy(48));
  REQUIRE(full.text.size() > 20);
  for (int n : {1, 2, 3, 5, 8, 13}) {  // every max_tokens ends at the same token
    GenerateParams gp = spec_greedy(n);
    gp.speculative.n_max = 4;
    spec_same(spec_run(*st, prompt, spec_greedy(n)), spec_run(*st, prompt, gp, st->model), "max tokens, self draft");
  }
  // A stop string from the middle of the plain text: cut at the same place.
  GenerateParams stop = spec_greedy(48);
  stop.stop = {full.text.substr(full.text.size() / 2, 4)};
  const GenerateResult plain_stop = spec_run(*st, prompt, stop);
  CHECK(plain_stop.reason == StopReason::StopString);
  stop.speculative.n_max = 5;
  spec_same(plain_stop, spec_run(*st, prompt, stop, st->model), "stop string, self draft");
  stop.speculative.lookup = true;
  spec_same(plain_stop, spec_run(*st, prompt, stop), "stop string, lookup");
  // Until EOS (a story ends): the same end.
  GenerateParams eos = spec_greedy(400);
  const GenerateResult plain_eos = spec_run(*st, "Once upon a time", eos);
  eos.speculative.n_max = 6;
  spec_same(plain_eos, spec_run(*st, "Once upon a time", eos, st->model, 3), "until EOS, early exit");
  // Sampling with a seed: drafts are one-hot, so each row is sampled as plain decoding samples it.
  GenerateParams sampled = spec_greedy(40);
  sampled.sampler.temperature = 0.8f;
  sampled.sampler.seed = 42;
  const GenerateResult plain_sampled = spec_run(*st, prompt, sampled);
  sampled.speculative.n_max = 4;
  spec_same(plain_sampled, spec_run(*st, prompt, sampled, nullptr, 2), "seeded sampling, early exit");
  sampled.speculative.lookup = true;
  spec_same(plain_sampled, spec_run(*st, prompt, sampled), "seeded sampling, lookup");
}

TEST_CASE("speculative: parallel continuations and a chat's second turn equal plain decoding") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  SessionParams sp = one_thread();
  sp.n_ctx = 256;
  GenerateParams gp = spec_greedy(24);
  gp.sampler.temperature = 0.7f;
  Session plain(st->model, st->tok, sp);
  const auto want = plain.generate_parallel("Lily and Tom", 3, gp);
  Session spec(st->model, st->tok, sp);
  spec.set_draft(nullptr, 2);
  gp.speculative.n_max = 3;
  const auto got = spec.generate_parallel("Lily and Tom", 3, gp);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) spec_same(want[i], got[i], "parallel continuation");
  // Two turns in one session: the draft's cache follows the history.
  GenerateParams g = spec_greedy(12);
  const GenerateResult a1 = plain.generate(" The end.", g), a2 = plain.generate(" Then", g);
  g.speculative.n_max = 3;
  const GenerateResult b1 = spec.generate(" The end.", g), b2 = spec.generate(" Then", g);
  spec_same(a1, b1, "turn 1");
  spec_same(a2, b2, "turn 2");
}

TEST_CASE("prompt lookup drafts the continuation of the longest recent n-gram match") {
  LookupDrafter d;
  std::vector<int32_t> out;
  SpeculativeParams p;
  d.draft(0, {1, 2, 3, 4, 9, 2, 3, 4, 7, 8, 5, 3, 4}, 3, p, SamplerParams(), out, nullptr);
  CHECK(out == std::vector<int32_t>{7, 8, 5});  // "3 4" last seen before 7 8 5 (the 3-gram "5 3 4" is new)
  d.draft(0, {1, 2, 3, 4, 9, 2, 3, 4, 7, 8, 2, 3, 4}, 2, p, SamplerParams(), out, nullptr);
  CHECK(out == std::vector<int32_t>{7, 8});  // the 3-gram "2 3 4": its latest earlier occurrence
  d.draft(0, {5, 6, 7}, 4, p, SamplerParams(), out, nullptr);
  CHECK(out.empty());
  d.draft(0, {5, 6, 5}, 4, p, SamplerParams(), out, nullptr);
  CHECK(out == std::vector<int32_t>{6, 5});  // the continuation runs to the end of the tokens
}

TEST_CASE("speculative: a draft model of another vocabulary and bad draft parameters are clear errors") {
  const Loaded* st = stories();
  const std::string other = kData + "/qwen/models/tiny-qwen2-256-Q4_K_M.gguf";
  if (!st || !path_exists(other)) EDGELLM_SKIP("stories260K or tiny-qwen2-256-Q4_K_M not found");
  Session s(st->model, st->tok, one_thread());
  CHECK_THROWS_WITH_AS(s.set_draft(LlamaModel::load(other)), doctest::Contains("draft model"), Error);
  CHECK_THROWS_WITH_AS(s.set_draft(nullptr, 99), doctest::Contains("--draft-layers"), Error);
  GenerateParams gp = spec_greedy(4);
  gp.speculative.n_min = 5;
  CHECK_THROWS_WITH_AS(s.generate("Hi", gp), doctest::Contains("--draft-min"), Error);
  gp.speculative.n_min = 0;
  gp.speculative.p_min = 2;
  CHECK_THROWS_WITH_AS(s.generate("Hi", gp), doctest::Contains("--draft-p-min"), Error);
  CHECK(s.n_past() == 0);
}

namespace {

// Two-sample chi-square of equal-size samples (counts per token): bins with fewer than 10 draws in
// both samples together are pooled; returns (statistic, degrees of freedom).
std::pair<double, int> spec_chi_square(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b) {
  std::map<int32_t, std::pair<int, int>> bins;
  for (const auto& [t, n] : a) bins[t].first += n;
  for (const auto& [t, n] : b) bins[t].second += n;
  double stat = 0;
  int df = -1, pool_a = 0, pool_b = 0;
  auto add = [&](int x, int y) {
    stat += double(x - y) * double(x - y) / double(x + y);
    ++df;
  };
  for (const auto& [t, c] : bins) {
    if (c.first + c.second < 10) {
      pool_a += c.first;
      pool_b += c.second;
    } else {
      add(c.first, c.second);
    }
  }
  if (pool_a + pool_b > 0) add(pool_a, pool_b);
  return {stat, df};
}

// The chi-square quantile for significance 1e-4 (Wilson-Hilferty: z = 3.719).
double spec_chi_square_limit(int df) {
  const double k = df, z = 3.719;
  return k * std::pow(1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k)), 3.0);
}

}  // namespace

TEST_CASE("rejection sampling of sampled drafts keeps the target's distribution (stories260K, chi-square)") {
  const Loaded* st = stories();
  if (!st) EDGELLM_SKIP("stories260K not found");
  // The full distribution at temperature 1 (no top-k / top-p / min-p cut), drafts sampled from the
  // target's first 4 of 5 layers: p_draft differs from p_target, so both rejection branches run.
  GenerateParams gp = spec_greedy(4);
  gp.sampler.temperature = 1.0f;
  gp.sampler.top_k = 0;
  gp.sampler.top_p = 1.0f;
  gp.sampler.min_p = 0.0f;
  SessionParams sp = one_thread();
  sp.n_ctx = 64;
  Session plain(st->model, st->tok, sp), spec(st->model, st->tok, sp);
  spec.set_draft(nullptr, 4);
  GenerateParams sg = gp;
  sg.speculative.n_max = 2;
  sg.speculative.sample_drafts = true;
  constexpr int kSamples = 1500;
  const char* kPrompt = "Tom and Lily";
  std::map<int32_t, int> first_a, first_b, second_a, second_b;
  int drafted = 0, accepted = 0;
  for (int i = 0; i < kSamples; ++i) {
    gp.sampler.seed = sg.sampler.seed = 1000 + static_cast<uint64_t>(i);
    plain.reset();
    spec.reset();
    const GenerateResult a = plain.generate(kPrompt, gp);
    const GenerateResult b = spec.generate(kPrompt, sg);
    REQUIRE(a.tokens.size() >= 2);
    REQUIRE(b.tokens.size() >= 2);
    ++first_a[a.tokens[0]];
    ++first_b[b.tokens[0]];
    ++second_a[a.tokens[1]];
    ++second_b[b.tokens[1]];  // drawn by verification: an accepted draft or a residual sample
    drafted += b.n_drafted;
    accepted += b.n_accepted;
  }
  CHECK(accepted >= 100);  // both branches taken many times
  CHECK(drafted - accepted >= 100);
  for (const auto* pair : {&first_a, &second_a}) {
    const auto& other = pair == &first_a ? first_b : second_b;
    const auto [stat, df] = spec_chi_square(*pair, other);
    const std::string which = pair == &first_a ? "first" : "second";
    MESSAGE(which, " token: chi-square ", stat, " with ", df, " degrees of freedom, limit ",
            spec_chi_square_limit(df), "; drafts accepted ", accepted, " of ", drafted);
    REQUIRE(df >= 1);
    CHECK(stat < spec_chi_square_limit(df));
  }
}
