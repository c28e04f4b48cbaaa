// libFuzzer target for the sampler: arbitrary parameters (NaN/inf temperature, top-k beyond the
// vocabulary or negative, p = 0 or 1 or out of range, penalties) and logits (NaN, +-inf, huge,
// denormal), with a history of accepted ids (some outside the vocabulary). Bad parameters throw
// Error; otherwise every draw is a valid id and probabilities() is a distribution.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <edgellm/text/sampler.hpp>

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_sampler: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

// Reads values off the front of the input; zeros once it runs out.
struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t u8() { return n ? (--n, *p++) : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(u8()) << (8 * i);
    return v;
  }
  // Mostly the values that matter (special and boundary values), sometimes any bit pattern.
  float f32() {
    static const float kPick[] = {0.0f, -0.0f, 1.0f, 0.5f, 0.95f, -1.0f, 2.0f, 1e-8f, 1e30f, -1e30f,
                                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::max(), 0.8f};
    const uint8_t k = u8();
    if (k < 200) return kPick[k % 16];
    const uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  edgellm::SamplerParams sp;
  sp.temperature = in.f32();
  sp.top_k = static_cast<int32_t>(in.u32()) % 5000;
  sp.top_p = in.f32();
  sp.min_p = in.f32();
  sp.repeat_penalty = in.f32();
  sp.frequency_penalty = in.f32();
  sp.presence_penalty = in.f32();
  sp.penalty_last_n = static_cast<int>(static_cast<int8_t>(in.u8()));
  sp.seed = in.u32();
  const int n_vocab = 1 + static_cast<int>(in.u32() % 3000);

  bool valid = true;
  try {
    edgellm::Sampler::validate(sp);
  } catch (const edgellm::Error&) {
    valid = false;
  }
  std::unique_ptr<edgellm::Sampler> s;
  try {
    s.reset(new edgellm::Sampler(sp));
  } catch (const edgellm::Error&) {
    if (valid) fail("the constructor rejected parameters validate() accepts");
    return 0;
  }
  if (!valid) fail("the constructor accepted parameters validate() rejects");

  // Logits: a pattern of fuzzed values over the whole vocabulary.
  std::vector<float> pattern(1 + in.u8() % 64);
  for (float& v : pattern) v = in.f32();
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = pattern[(i * 7 + i / pattern.size()) % pattern.size()];
  for (int k = in.u8() % 8; k > 0; --k) logits[in.u32() % logits.size()] = in.f32();
  // History, ids possibly outside the vocabulary.
  for (int k = in.u8() % 32; k > 0; --k) s->accept(static_cast<int32_t>(in.u32()) % (2 * n_vocab + 1) - 1);

  try {
    for (int round = 0; round < 3; ++round) {
      const int32_t id = s->sample(logits.data(), n_vocab);
      if (id < 0 || id >= n_vocab) fail("sample() returned an id outside the vocabulary");
      const std::vector<edgellm::TokenProb> probs = s->probabilities(logits.data(), n_vocab);
      if (probs.empty()) fail("probabilities() is empty");
      double sum = 0;
      for (const auto& tp : probs) {
        if (tp.id < 0 || tp.id >= n_vocab) fail("probabilities() has an id outside the vocabulary");
        if (!(tp.p >= 0.0f && tp.p <= 1.0f)) fail("probabilities() has a p outside [0, 1]");
        sum += tp.p;
      }
      if (std::fabs(sum - 1.0) > 1e-3) fail("probabilities() does not sum to 1");
      s->accept(id);
    }
    // Misuse is an Error, not a crash.
    try {
      s->sample(nullptr, n_vocab);
      fail("sample(nullptr) did not throw");
    } catch (const edgellm::Error&) {
    }
    try {
      s->sample(logits.data(), 0);
      fail("sample(n_vocab = 0) did not throw");
    } catch (const edgellm::Error&) {
    }
  } catch (const edgellm::Error& e) {
    std::fprintf(stderr, "fuzz_sampler: unexpected Error: %s\n", e.what());
    std::abort();
  }
  return 0;
}
