// Tests for text/sampler.hpp: greedy ties, penalty arithmetic, top-k/top-p/min-p/temperature on
// hand-computed cases, seeded draws (frequencies, reproducibility), robustness and bad params.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "edgellm/text/sampler.hpp"

using edgellm::Error;
using edgellm::Sampler;
using edgellm::SamplerParams;
using edgellm::TokenProb;

namespace {
constexpr float kMaxProbErr = 1e-5f;       // float probabilities vs hand-computed values
constexpr double kMaxFreqErr = 0.01;       // empirical frequency vs probability, 100k draws
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Plain softmax at temperature 1 with every filter off.
SamplerParams plain(float temp = 1.0f) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// Probability of each id (0 for ids not in the distribution).
std::vector<float> probs_by_id(Sampler& s, const std::vector<float>& logits) {
  std::vector<float> out(logits.size(), 0.0f);
  for (const TokenProb& tp : s.probabilities(logits.data(), int(logits.size()))) out[size_t(tp.id)] = tp.p;
  return out;
}

std::vector<float> softmax(const std::vector<float>& l) {
  double m = -1e30, sum = 0;
  for (float x : l) m = std::max(m, double(x));
  std::vector<float> out(l.size());
  for (float x : l) sum += std::exp(double(x) - m);
  for (size_t i = 0; i < l.size(); ++i) out[i] = float(std::exp(double(l[i]) - m) / sum);
  return out;
}

void check_probs(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("id ", i);
    CHECK(std::fabs(got[i] - want[i]) < kMaxProbErr);
  }
}
}  // namespace

TEST_CASE("sampler: greedy takes the argmax, ties to the lowest id") {
  SamplerParams p;
  p.temperature = 0.0f;
  Sampler s(p);
  const std::vector<float> a = {1, 3, 3, 2};
  CHECK(s.sample(a.data(), 4) == 1);
  const std::vector<float> b = {kNaN, -kInf, 5, kNaN, 4};
  CHECK(s.sample(b.data(), 5) == 2);
  const std::vector<float> c = {kNaN, kNaN};
  CHECK(s.sample(c.data(), 2) == 0);
  const std::vector<float> d = {1, kInf, kInf};
  CHECK(s.sample(d.data(), 3) == 1);
  p.temperature = -1.0f;  // negative is greedy too
  Sampler s2(p);
  CHECK(s2.sample(a.data(), 4) == 1);
}

TEST_CASE("sampler: repetition, frequency and presence penalties") {
  SamplerParams p = plain();
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  s.accept(0);
  s.accept(1);
  s.accept(1);
  s.accept(99);  // outside the vocabulary: ignored
  // Positive logit divided, negative multiplied, unseen untouched: {2,-2,1} -> {1,-4,1}.
  check_probs(probs_by_id(s, {2, -2, 1}), softmax({1, -4, 1}));
  // Zero counts as non-positive (multiplied: stays 0).
  check_probs(probs_by_id(s, {0, 0, 1}), softmax({0, 0, 1}));

  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.0f;
  Sampler f(p);
  for (int t : {0, 0, 1}) f.accept(t);
  // token 0: 2 - 2*0.5 - 1 = 0; token 1: -2 - 1*0.5 - 1 = -3.5; token 2 unchanged.
  check_probs(probs_by_id(f, {2, -2, 1}), softmax({0, -3.5f, 1}));

  // Greedy sees the penalised logits: 3/2 = 1.5 < 2.
  p = SamplerParams();
  p.temperature = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler g(p);
  const std::vector<float> l = {3, 2};
  CHECK(g.sample(l.data(), 2) == 0);
  g.accept(0);
  CHECK(g.sample(l.data(), 2) == 1);
  g.reset();
  CHECK(g.sample(l.data(), 2) == 0);
}

TEST_CASE("sampler: the penalty window keeps the last N tokens") {
  SamplerParams p = plain();
  p.repeat_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s(p);
  for (int t : {0, 1, 2}) s.accept(t);  // 0 has left the window
  check_probs(probs_by_id(s, {2, 2, 2, 2}), softmax({2, 1, 1, 2}));
  p.penalty_last_n = 0;  // off
  Sampler off(p);
  for (int t : {0, 1, 2}) off.accept(t);
  check_probs(probs_by_id(off, {2, 2, 2, 2}), softmax({2, 2, 2, 2}));
  p.penalty_last_n = -1;  // everything accepted
  Sampler all(p);
  for (int i = 0; i < 1000; ++i) all.accept(i % 3);
  check_probs(probs_by_id(all, {2, 2, 2, 2}), softmax({1, 1, 1, 2}));
}

TEST_CASE("sampler: top-k, top-p, min-p and temperature") {
  const std::vector<float> l5 = {0, 1, 2, 3, 4};
  SamplerParams p = plain();
  p.top_k = 2;
  Sampler k2(p);
  check_probs(probs_by_id(k2, l5), {0, 0, 0, float(1 / (1 + std::exp(1.0))), float(1 / (1 + std::exp(-1.0)))});
  for (int k : {5, 6, 1000, 0, -3}) {  // >= vocab or <= 0: off
    p.top_k = k;
    Sampler s(p);
    check_probs(probs_by_id(s, l5), softmax(l5));
  }
  p.top_k = 1;
  Sampler k1(p);
  check_probs(probs_by_id(k1, l5), {0, 0, 0, 0, 1});

  // Probabilities 0.5, 0.3, 0.15, 0.05.
  const std::vector<float> lp = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  p = plain();
  p.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  Sampler tp(p);
  check_probs(probs_by_id(tp, lp), {0.625f, 0.375f, 0, 0});
  p.top_p = 0.85f;
  Sampler tp2(p);
  check_probs(probs_by_id(tp2, lp), {0.5f / 0.95f, 0.3f / 0.95f, 0.15f / 0.95f, 0});
  p.top_p = 0.0f;  // only the best
  Sampler tp0(p);
  check_probs(probs_by_id(tp0, lp), {1, 0, 0, 0});
  p.top_p = 1.0f;
  Sampler tp1(p);
  check_probs(probs_by_id(tp1, lp), {0.5f, 0.3f, 0.15f, 0.05f});

  p = plain();
  p.min_p = 0.2f;  // keeps p >= 0.1
  Sampler mp(p);
  check_probs(probs_by_id(mp, lp), {0.5f / 0.95f, 0.3f / 0.95f, 0.15f / 0.95f, 0});
  p.min_p = 1.0f;  // only the max
  Sampler mp1(p);
  check_probs(probs_by_id(mp1, lp), {1, 0, 0, 0});

  // Temperature 0.5 on {0, ln 2}: weights 1 and 4.
  Sampler t(plain(0.5f));
  check_probs(probs_by_id(t, {0, std::log(2.0f)}), {0.2f, 0.8f});
  // Top-p over a big vocabulary needs more than the first sorted chunk.
  std::vector<float> flat(5000, 0.0f);
  flat[17] = 1.0f;
  p = plain();
  p.top_p = 0.9f;
  Sampler big(p);
  const auto d = big.probabilities(flat.data(), int(flat.size()));
  const double total = std::exp(1.0) + 4999.0;
  size_t want = 1;
  for (double cum = std::exp(1.0); cum < 0.9f * total; cum += 1.0) ++want;
  CHECK(d.size() == want);
  CHECK(d[0].id == 17);
}

TEST_CASE("sampler: seeded draws follow the distribution and repeat exactly") {
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplerParams p = plain();
  p.seed = 1234;
  Sampler s(p);
  std::vector<int> counts(3, 0);
  std::vector<int32_t> first;
  constexpr int kDraws = 100000;
  int out_of_range = 0;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t t = s.sample(l.data(), 3);
    if (t < 0 || t >= 3) {
      ++out_of_range;
      continue;
    }
    ++counts[size_t(t)];
    if (i < 16) first.push_back(t);
  }
  REQUIRE(out_of_range == 0);
  CHECK(std::fabs(counts[0] / double(kDraws) - 0.5) < kMaxFreqErr);
  CHECK(std::fabs(counts[1] / double(kDraws) - 0.3) < kMaxFreqErr);
  CHECK(std::fabs(counts[2] / double(kDraws) - 0.2) < kMaxFreqErr);
  // Same seed -> same tokens; reset() restarts the sequence; and the sequence is pinned, since
  // mt19937_64 and our uniform draw are fully specified (no std::*_distribution).
  s.reset();
  std::vector<int32_t> again;
  for (int i = 0; i < 16; ++i) again.push_back(s.sample(l.data(), 3));
  CHECK(again == first);
  const std::vector<int32_t> kPinned = {2, 0, 2, 2, 0, 2, 2, 2, 0, 1, 2, 0, 0, 2, 0, 1};  // x86 and qemu arm64
  CHECK(first == kPinned);
  p.seed = 1235;
  Sampler other(p);
  std::vector<int32_t> diff;
  for (int i = 0; i < 16; ++i) diff.push_back(other.sample(l.data(), 3));
  CHECK(diff != first);
}

TEST_CASE("sampler: odd logits never crash") {
  Sampler s(plain());
  const std::vector<float> one = {0.3f};
  CHECK(s.sample(one.data(), 1) == 0);
  const std::vector<float> nans = {kNaN, kNaN, kNaN};
  CHECK(s.sample(nans.data(), 3) == 0);
  const std::vector<float> ninf = {-kInf, -kInf};
  CHECK(s.sample(ninf.data(), 2) == 0);
  // +inf tokens share the probability.
  const std::vector<float> pinf = {1, kInf, 2, kInf};
  check_probs(probs_by_id(s, pinf), {0, 0.5f, 0, 0.5f});
  for (int i = 0; i < 50; ++i) {
    const int32_t t = s.sample(pinf.data(), 4);
    CHECK((t == 1 || t == 3));
  }
  // Mixed NaN / huge values with every filter on.
  SamplerParams p;
  p.temperature = 1e-6f;
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.2f;
  Sampler f(p);
  f.accept(2);
  const std::vector<float> mixed = {kNaN, 3e38f, -3e38f, 1e-30f, kNaN};
  CHECK(f.sample(mixed.data(), 5) == 1);
  p.temperature = 1e30f;
  Sampler hot(p);
  const int32_t t = hot.sample(mixed.data(), 5);
  CHECK((t >= 0 && t < 5));
}

TEST_CASE("sampler: invalid parameters and inputs throw") {
  auto with = [](auto change) {
    SamplerParams p;
    change(p);
    return p;
  };
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.top_p = 1.5f; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.top_p = -0.1f; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.min_p = kNaN; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.min_p = 2.0f; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.repeat_penalty = 0.0f; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.repeat_penalty = kInf; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.temperature = kNaN; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.frequency_penalty = kNaN; })), Error);
  CHECK_THROWS_AS(Sampler(with([](SamplerParams& p) { p.penalty_last_n = -2; })), Error);
  CHECK_THROWS_WITH_AS(Sampler(with([](SamplerParams& p) { p.top_p = 2.0f; })),
                       "sampler: top_p must be in [0, 1], got 2", Error);
  Sampler s;
  const float l[2] = {0, 1};
  CHECK_THROWS_AS(s.sample(nullptr, 2), Error);
  CHECK_THROWS_AS(s.sample(l, 0), Error);
  CHECK_THROWS_AS(s.sample(l, -5), Error);
}

TEST_CASE("sampler: logit_bias (OpenAI's): added before the rest, -100 bans") {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f};
  SamplerParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{1, -100.0f}};
  Sampler greedy_ban(p);
  CHECK(greedy_ban.sample(logits.data(), 4) == 2);  // the argmax (1) is banned: next best
  p.logit_bias = {{3, 2.75f}};                      // 0.5 + 2.75 = 3.25 > 3
  Sampler greedy_up(p);
  CHECK(greedy_up.sample(logits.data(), 4) == 3);
  p.logit_bias = {{1, -100.0f}, {99, 5.0f}};  // an id beyond this row is ignored
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler dist(p);
  const std::vector<TokenProb> probs = dist.probabilities(logits.data(), 4);
  double sum = 0;
  for (const TokenProb& t : probs) {
    CHECK(t.id != 1);  // banned: not in the distribution
    sum += t.p;
  }
  CHECK(probs.size() == 3);
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  // The others keep their softmax ratios: p(2) / p(0) = e^(2 - 1).
  double p0 = 0, p2 = 0;
  for (const TokenProb& t : probs) {
    if (t.id == 0) p0 = t.p;
    if (t.id == 2) p2 = t.p;
  }
  CHECK(p2 / p0 == doctest::Approx(std::exp(1.0)).epsilon(1e-5));
  for (int i = 0; i < 200; ++i) CHECK(dist.sample(logits.data(), 4) != 1);
  SamplerParams bad;
  bad.logit_bias = {{-1, 1.0f}};
  CHECK_THROWS_AS(Sampler::validate(bad), Error);
  bad.logit_bias = {{0, std::nanf("")}};
  CHECK_THROWS_AS(Sampler::validate(bad), Error);
}
