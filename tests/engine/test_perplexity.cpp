// Tests for engine/perplexity.hpp: log-softmax, PPL and its error, KL-divergence on hand-computed
// cases; llama-perplexity's chunking; the base-file round trip; stories260K vs perplexity.json.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/engine/perplexity.hpp>
#include <edgellm/text/tokenizer.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {
constexpr double kExact = 1e-9;
// Ours uses an F32 KV cache, llama.cpp's figures an F16 one: PPL agrees to about 0.01%.
constexpr double kMaxPplRelErr = 1e-3;
// arm64 tests run under qemu, where the 58 windows take minutes: there the first 8 windows are
// compared with our x86 result for them (127.2531), which checks the arm64 kernels end to end.
#if defined(__aarch64__)
constexpr int kPplChunks = 8;
constexpr double kPplChunksExpect = 127.2531;
#else
constexpr int kPplChunks = -1;  // all, against perplexity.json
constexpr double kPplChunksExpect = 0;
#endif

}  // namespace

TEST_CASE("log_softmax_at: uniform and two-token rows by hand") {
  const float uniform[4] = {2, 2, 2, 2};
  CHECK(log_softmax_at(uniform, 4, 3) == doctest::Approx(-std::log(4.0)).epsilon(kExact));
  // logits (0, ln 3): p = (1/4, 3/4)
  const float two[2] = {0.0f, static_cast<float>(std::log(3.0))};
  CHECK(log_softmax_at(two, 2, 0) == doctest::Approx(std::log(0.25)).epsilon(1e-7));
  CHECK(log_softmax_at(two, 2, 1) == doctest::Approx(std::log(0.75)).epsilon(1e-7));
  // large logits do not overflow
  const float big[2] = {1000.0f, 1000.0f};
  CHECK(log_softmax_at(big, 2, 1) == doctest::Approx(-std::log(2.0)).epsilon(kExact));
  CHECK_THROWS_AS(log_softmax_at(big, 2, 2), Error);
  float row[2];
  log_softmax_row(two, 2, row);
  CHECK(row[1] == doctest::Approx(std::log(0.75)).epsilon(1e-6));
}

TEST_CASE("PplAccumulator: PPL = exp(mean nll), error = PPL * sd / sqrt(n - 1)") {
  PplAccumulator a;
  // log-probs ln(1/2), ln(1/8): nll 0.693, 2.079; mean = ln 4 -> PPL 4
  a.add(std::log(0.5));
  a.add(std::log(0.125));
  CHECK(a.count() == 2);
  CHECK(a.ppl() == doctest::Approx(4.0).epsilon(kExact));
  // population variance of nll = (ln 4 - ln 2)^2 = ln(2)^2; error = 4 * ln 2 / sqrt(1)
  CHECK(a.ppl_error() == doctest::Approx(4.0 * std::log(2.0)).epsilon(1e-9));
  PplAccumulator one;
  one.add(-1.0);
  CHECK(one.ppl_error() == 0.0);
}

TEST_CASE("kl_divergence by hand, argmax, sample stats") {
  // base p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3)
  const float b[2] = {static_cast<float>(std::log(0.5)), static_cast<float>(std::log(0.5))};
  const float q[2] = {static_cast<float>(std::log(0.25)), static_cast<float>(std::log(0.75))};
  CHECK(kl_divergence(b, q, 2) == doctest::Approx(0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0)).epsilon(1e-6));
  CHECK(kl_divergence(b, b, 2) == 0.0);
  CHECK(argmax_row(q, 2) == 1);
  SampleStats s;
  for (double v : {1.0, 2.0, 3.0, 4.0, 10.0}) s.add(v);
  CHECK(s.mean() == doctest::Approx(4.0));
  CHECK(s.quantile(0.5) == 3.0);
  CHECK(s.quantile(1.0) == 10.0);
  // sd = sqrt(((9+4+1+0+36)/4)) = sqrt(12.5); error = sd / sqrt(5)
  CHECK(s.mean_error() == doctest::Approx(std::sqrt(12.5 / 5)).epsilon(1e-12));
}

TEST_CASE("chunking is llama-perplexity's: n / n_ctx windows, BOS first, second half scored") {
  std::vector<int32_t> toks(300);
  for (int i = 0; i < 300; ++i) toks[size_t(i)] = 100 + i;
  const PplChunking c = PplChunking::make(toks.size(), 128, -1);
  CHECK(c.n_chunk == 2);  // 300 / 128, the tail dropped
  CHECK(c.first == 64);
  CHECK(c.n_scored() == 63);  // positions 64..126 predict tokens 65..127
  const auto w = c.window(toks, 1, /*add_bos=*/true, /*bos=*/1);
  CHECK(w.size() == 128);
  CHECK(w[0] == 1);
  CHECK(w[1] == 100 + 129);
  CHECK(c.window(toks, 1, false, 1)[0] == 100 + 128);
  CHECK(PplChunking::make(toks.size(), 64, 3).n_chunk == 3);
  CHECK_THROWS_WITH_AS(PplChunking::make(200, 128, -1), doctest::Contains("at least 2 * n_ctx = 256"), Error);
}

TEST_CASE("KL base file round trip and bad files") {
  const std::string path = std::string(EDGELLM_BINARY_DIR) + "/test_perplexity.kld";
  PplChunking c;
  c.n_ctx = 8;
  c.n_chunk = 2;
  c.first = 4;
  std::vector<int32_t> toks(16);
  for (int i = 0; i < 16; ++i) toks[size_t(i)] = i;
  {
    KlBaseWriter w(path, c, /*n_vocab=*/3, toks);
    for (int k = 0; k < 2; ++k) {
      std::vector<float> lp(size_t(c.n_scored()) * 3);
      for (size_t i = 0; i < lp.size(); ++i) lp[i] = -float(i) - 10.0f * float(k);
      w.add_chunk(lp);
    }
    w.close();
  }
  KlBaseReader r(path);
  CHECK(r.n_vocab() == 3);
  CHECK(r.chunking().n_ctx == 8);
  CHECK(r.chunking().n_chunk == 2);
  CHECK(r.chunking().first == 4);
  CHECK(r.window(1)[0] == 8);
  std::vector<float> lp;
  r.next_chunk(lp);
  r.next_chunk(lp);
  REQUIRE(lp.size() == 9);
  CHECK(lp[8] == -18.0f);
  CHECK_THROWS_AS(r.next_chunk(lp), Error);  // past the end
  {
    std::ofstream bad(path, std::ios::binary);
    bad << "NOTAKLD1xxxxxxxxxxxxxxxx";
  }
  CHECK_THROWS_WITH_AS(KlBaseReader{path}, doctest::Contains("not an edgellm KL-divergence base file"), Error);
  std::remove(path.c_str());
}

TEST_CASE("stories260K: PPL over the shared text equals llama.cpp's (perplexity.json)") {
  const std::string data = EDGELLM_SHARED_DATA;
  EDGELLM_SKIP_WITHOUT(data + "/reference/perplexity.json");
  const Json ref = Json::parse(read_file(data + "/reference/perplexity.json"));
  const int n_ctx = static_cast<int>(ref["n_ctx"].as_int());
  auto model = LlamaModel::load(data + "/models/stories260K.gguf");
  const Tokenizer tok(Vocab::from_gguf(model->file()));
  const auto tokens = tok.encode(read_file(data + "/" + ref["text"].as_string()), tok.add_bos(), false);
  const PplChunking c = PplChunking::make(tokens.size(), n_ctx, kPplChunks);
  if (kPplChunks < 0) CHECK(c.n_chunk == ref["chunks"].as_int());
  ThreadPool pool(2);
  LlamaContext ctx(&pool);
  PplAccumulator acc;
  std::vector<float> logits;
  const int n_vocab = model->config().n_vocab;
  for (int i = 0; i < c.n_chunk; ++i) {
    const auto w = c.window(tokens, i, tok.add_bos(), tok.bos());
    eval_window(*model, ctx, w, c.first, logits);
    for (int j = 0; j < c.n_scored(); ++j) acc.add(log_softmax_at(logits.data() + size_t(j) * size_t(n_vocab), n_vocab, w[size_t(c.first + j + 1)]));
  }
  const double expect = kPplChunks < 0 ? ref["ppl"]["stories260K.gguf"].as_number() : kPplChunksExpect;
  MESSAGE("PPL ours ", acc.ppl(), " llama.cpp ", expect);
  CHECK(acc.count() == int64_t(c.n_chunk) * c.n_scored());
  CHECK(std::fabs(acc.ppl() / expect - 1) < kMaxPplRelErr);
}
