// Embeddings (engine/embedding.hpp): against llama.cpp's llama-embedding (tests/data/embed-*.json,
// made from ../shared/data models; see tests/data/README.md) within 1e-4 cosine; and, on the
// committed golden model, the batch split does not change a vector, pooling none's rows give mean /
// last / cls, normalisation, the GGUF key and option errors.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <edgellm/core/json.hpp>
#include <edgellm/engine/embedding.hpp>
#include <edgellm/gguf/writer.hpp>

#include "test_util.hpp"

using namespace edgellm;
using namespace edgellm_test;

namespace {

const std::string kEmbedDataDir = std::string(EDGELLM_SOURCE_DIR) + "/tests/data";

double embed_cosine(const float* a, const float* b, size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

struct EmbedFixture {
  std::shared_ptr<const LlamaModel> model;
  std::shared_ptr<const Tokenizer> tok;
  explicit EmbedFixture(const std::string& path)
      : model(LlamaModel::load(path)), tok(std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()))) {}
};

void check_embed_reference(const std::string& name) {
  const Json ref = Json::parse(read_file(kEmbedDataDir + "/" + name));
  const std::string model_path = kData + "/" + ref["model"].as_string();
  EDGELLM_SKIP_WITHOUT(model_path);
  EmbedFixture fx(model_path);
  EmbedParams p;
  p.pooling = parse_pooling(ref["pooling"].as_string());
  p.n_batch = 7;  // texts split across passes and several texts per pass
  Embedder e(fx.model, fx.tok, p);
  std::vector<std::string> texts;
  for (const Json& t : ref["texts"].as_array()) texts.push_back(t.as_string());
  const std::vector<Embedding> got = e.embed(texts);
  REQUIRE(got.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    CAPTURE(name);
    CAPTURE(i);
    std::vector<int32_t> want_tokens;
    for (const Json& t : ref["tokens"].at(i).as_array()) want_tokens.push_back(int32_t(t.as_int()));
    CHECK(e.tokenize(texts[i]) == want_tokens);
    const std::vector<float> want = ref["embeddings"].at(i).as_float_vector();
    REQUIRE(got[i].data.size() == want.size());
    CHECK(embed_cosine(got[i].data.data(), want.data(), want.size()) >= 1.0 - 1e-4);
  }
}

std::vector<float> embed_row_mean(const Embedding& e, int D) {
  std::vector<float> m(size_t(D), 0.0f);
  for (int r = 0; r < e.n_rows; ++r)
    for (int j = 0; j < D; ++j) m[size_t(j)] += e.data[size_t(r) * D + j] / float(e.n_rows);
  return m;
}

// The golden model with <arch>.pooling_type = value (a copy in memory).
std::shared_ptr<const LlamaModel> golden_with_pooling_key(uint32_t value) {
  const GgufFile src = GgufFile::open(kEmbedDataDir + "/golden-tiny-q4_0.gguf");
  GgufWriter w;
  w.copy_metadata(src);
  w.set_u32(src.get_string("general.architecture") + ".pooling_type", value);
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.type, t.shape(), t.data);
  return std::make_shared<const LlamaModel>(GgufFile::from_bytes(w.to_bytes(), "pooled.gguf"));
}

}  // namespace

TEST_CASE("embeddings: the pooling from the GGUF key, overridable") {
  const auto mean = golden_with_pooling_key(1);
  auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(mean->file()));
  CHECK(model_pooling(*mean) == Pooling::Mean);
  EmbedParams p;
  p.n_threads = 1;
  CHECK(Embedder(mean, tok, p).pooling() == Pooling::Mean);
  p.pooling = Pooling::Last;
  CHECK(Embedder(mean, tok, p).pooling() == Pooling::Last);
  CHECK(model_pooling(*golden_with_pooling_key(3)) == Pooling::Last);
  CHECK_THROWS_WITH_AS(model_pooling(*golden_with_pooling_key(4)), doctest::Contains("pooling_type' = 4 is not a pooling"), Error);
}

TEST_CASE("embeddings equal llama-embedding: llama, mean pooling") { check_embed_reference("embed-stories260K-mean.json"); }

TEST_CASE("embeddings equal llama-embedding: qwen3, last pooling") { check_embed_reference("embed-tiny-qwen3-256-f32-last.json"); }

TEST_CASE("embeddings: batch split, pooling from rows, normalisation (golden model)") {
  EmbedFixture fx(kEmbedDataDir + "/golden-tiny-q4_0.gguf");
  const int D = fx.model->config().n_embd;
  const std::vector<std::vector<int32_t>> toks = {{1, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309}, {1, 400}, {1, 410, 411, 412, 413}};
  CHECK(model_pooling(*fx.model) == Pooling::None);  // no <arch>.pooling_type key

  EmbedParams none;
  none.pooling = Pooling::None;
  none.normalize = false;
  none.n_threads = 1;
  const std::vector<Embedding> rows = Embedder(fx.model, fx.tok, none).embed_tokens(toks);
  REQUIRE(rows.size() == 3);
  for (size_t i = 0; i < toks.size(); ++i) {
    CHECK(rows[i].n_rows == int(toks[i].size()));
    CHECK(rows[i].n_tokens == int(toks[i].size()));
  }
  for (Pooling pl : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    for (int n_batch : {1, 4, 512}) {
      CAPTURE(pooling_name(pl));
      CAPTURE(n_batch);
      EmbedParams p;
      p.pooling = pl;
      p.normalize = false;
      p.n_batch = n_batch;
      p.n_threads = 2;
      const std::vector<Embedding> got = Embedder(fx.model, fx.tok, p).embed_tokens(toks);
      for (size_t i = 0; i < toks.size(); ++i) {
        REQUIRE(got[i].n_rows == 1);
        std::vector<float> want = pl == Pooling::Mean ? embed_row_mean(rows[i], D) : std::vector<float>(size_t(D));
        if (pl != Pooling::Mean) {
          const size_t r = pl == Pooling::Cls ? 0 : size_t(rows[i].n_rows - 1);
          std::copy_n(rows[i].data.data() + r * D, D, want.data());
        }
        for (int j = 0; j < D; ++j) REQUIRE(got[i].data[size_t(j)] == doctest::Approx(want[size_t(j)]).epsilon(1e-4));
      }
    }
  }
  EmbedParams norm;
  norm.pooling = Pooling::Mean;
  const std::vector<Embedding> unit = Embedder(fx.model, fx.tok, norm).embed_tokens(toks);
  for (const Embedding& e : unit) {
    double ss = 0;
    for (float v : e.data) ss += double(v) * v;
    CHECK(ss == doctest::Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("embeddings: option and input errors") {
  CHECK(parse_pooling("mean") == Pooling::Mean);
  CHECK(parse_pooling("last") == Pooling::Last);
  CHECK_THROWS_WITH_AS(parse_pooling("rank", "--pooling"), doctest::Contains("--pooling: unknown pooling 'rank'"), Error);
  EmbedFixture fx(kEmbedDataDir + "/golden-tiny-q4_0.gguf");
  EmbedParams p;
  p.n_threads = 1;
  Embedder e(fx.model, fx.tok, p);
  CHECK_THROWS_WITH_AS(e.embed_tokens({{1, 2}, {}}), doctest::Contains("input 1 has no tokens"), Error);
  CHECK_THROWS_WITH_AS(e.embed_tokens({{1, 99999}}), doctest::Contains("outside the vocabulary"), Error);
  p.n_ctx = 3;
  Embedder short_ctx(fx.model, fx.tok, p);
  CHECK_THROWS_WITH_AS(short_ctx.embed_tokens({{1, 2, 3, 4}}), doctest::Contains("more than the context of 3"), Error);
  p.n_batch = 0;
  CHECK_THROWS_AS(Embedder(fx.model, fx.tok, p), Error);
}
