// edgellm-bench helpers: statistics, logits hash, flag lists, JSON/CSV escaping; and the synthetic
// model builder (mix types, same file for any thread count).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <edgellm/core/error.hpp>
#include <edgellm/gguf/reader.hpp>
#include <edgellm/model/llama.hpp>
#include <edgellm/tools/bench_stats.hpp>
#include <edgellm/tools/synthetic.hpp>
#include <edgellm/runtime/thread_pool.hpp>

using namespace edgellm;

namespace {
constexpr double kStatsTol = 1e-12;
}

TEST_CASE("bench_stats: mean, sample stddev, percentiles") {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(stats_mean(v) == doctest::Approx(5.0).epsilon(kStatsTol));
  CHECK(stats_stddev(v) == doctest::Approx(std::sqrt(32.0 / 7.0)).epsilon(kStatsTol));
  CHECK(stats_stddev({3.0}) == 0.0);
  CHECK(stats_mean({}) == 0.0);
  CHECK(stats_percentile({1, 2, 3, 4}, 50) == doctest::Approx(2.5));
  CHECK(stats_percentile({4, 1, 3, 2}, 0) == 1.0);
  CHECK(stats_percentile({4, 1, 3, 2}, 100) == 4.0);
  std::vector<double> r;
  for (int i = 1; i <= 101; ++i) r.push_back(double(102 - i));  // 101 .. 1, unsorted order
  CHECK(stats_percentile(r, 90) == doctest::Approx(91.0));
  CHECK(stats_percentile(r, 99) == doctest::Approx(100.0));
  CHECK(stats_percentile({7.0}, 99) == 7.0);
  CHECK_THROWS_AS(stats_percentile(r, 101), Error);
}

TEST_CASE("bench_stats: logits hash is FNV-1a of the bytes and sees any bit") {
  // FNV-1a 32 of no bytes is the offset basis; of the 4 zero bytes of 0.0f a known value.
  CHECK(logits_hash(nullptr, 0) == 2166136261u);
  const float zero = 0.0f, neg_zero = -0.0f;
  CHECK(logits_hash(&zero, 1) == 0x4b95f515u);
  CHECK(logits_hash(&zero, 1) != logits_hash(&neg_zero, 1));
  std::vector<float> a = {1.f, 2.f, 3.f}, b = a;
  CHECK(logits_hash(a.data(), 3) == logits_hash(b.data(), 3));
  b[2] = std::nextafter(3.f, 4.f);
  CHECK(logits_hash(a.data(), 3) != logits_hash(b.data(), 3));
  CHECK(format_hash(0x1234abcdu) == "#1234abcd");
  CHECK(format_hash(0xfu) == "#0000000f");
}

TEST_CASE("bench_stats: comma lists of flag values") {
  CHECK(parse_int_list("512", "-p", 0, 1 << 20) == std::vector<int>{512});
  CHECK(parse_int_list("1,2,4", "-t", 1, 1024) == std::vector<int>{1, 2, 4});
  CHECK_THROWS_AS(parse_int_list("1,,2", "-t", 1, 1024), Error);
  CHECK_THROWS_AS(parse_int_list("1,x", "-t", 1, 1024), Error);
  CHECK_THROWS_AS(parse_int_list("0", "-t", 1, 1024), Error);
  CHECK(split_list("md", "-o") == std::vector<std::string>{"md"});
}

TEST_CASE("bench_stats: llama-bench ranges in flag values") {
  CHECK(parse_int_list("1-4", "-t", 1, 1024) == std::vector<int>{1, 2, 3, 4});
  CHECK(parse_int_list("0-64+32", "-d", 0, 1 << 20) == std::vector<int>{0, 32, 64});
  CHECK(parse_int_list("0-70+32", "-d", 0, 1 << 20) == std::vector<int>{0, 32, 64});  // last not reached
  CHECK(parse_int_list("128-512*2", "-p", 0, 1 << 20) == std::vector<int>{128, 256, 512});
  CHECK(parse_int_list("128-600*2,8", "-p", 0, 1 << 20) == std::vector<int>{128, 256, 512, 8});
  CHECK(parse_int_list("5-5", "-t", 1, 1024) == std::vector<int>{5});
  CHECK_THROWS_AS(parse_int_list("4-1", "-t", 1, 1024), Error);        // backwards
  CHECK_THROWS_AS(parse_int_list("1-4+0", "-t", 1, 1024), Error);      // no progress
  CHECK_THROWS_AS(parse_int_list("0-8*2", "-p", 0, 1 << 20), Error);   // 0 * m never grows
  CHECK_THROWS_AS(parse_int_list("1-8*1", "-p", 0, 1 << 20), Error);
  CHECK_THROWS_AS(parse_int_list("1-", "-t", 1, 1024), Error);
  CHECK_THROWS_AS(parse_int_list("-3", "-t", 1, 1024), Error);         // no negative values
  CHECK_THROWS_AS(parse_int_list("1-4+", "-t", 1, 1024), Error);
  CHECK_THROWS_AS(parse_int_list("1-4/2", "-t", 1, 1024), Error);
  CHECK_THROWS_AS(parse_int_list("1-2000", "-t", 1, 1024), Error);     // 1025 is outside [1, 1024]
  CHECK_THROWS_AS(parse_int_list("0-1000000", "-p", 0, 1 << 20), Error);  // too many values
  try {
    parse_int_list("4-1", "-t", 1, 1024);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("-t") != std::string::npos);
    CHECK(std::string(e.what()).find("4-1") != std::string::npos);
  }
}

TEST_CASE("bench_stats: JSON and CSV escaping") {
  CHECK(json_quote("a\"b\\c\n") == "\"a\\\"b\\\\c\\u000a\"");
  CHECK(json_quote("llama 1B Q4_0") == "\"llama 1B Q4_0\"");
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
}

TEST_CASE("synthetic: mix types follow llama.cpp's rules, file independent of thread count") {
  // Rows of 256: the K-quant types themselves.
  const SyntheticSpec k{"k256", 512, 256, 2, 4, 2, 512, 2048, 10000.f, false};
  const std::vector<DType> types = synthetic_mix_types(k, quant_mix("Q4_K_M"));
  const std::vector<SyntheticTensor> kts = synthetic_tensors(k);
  REQUIRE(types.size() == kts.size());
  for (size_t i = 0; i < kts.size(); ++i) {
    if (kts[i].name.find("norm") != std::string::npos) CHECK(types[i] == DType::F32);
    if (kts[i].name == "output.weight") CHECK(types[i] == DType::Q6_K);
    if (kts[i].name == "blk.0.attn_q.weight") CHECK(types[i] == DType::Q4_K);
  }
  // Rows of 128 do not split into 256-blocks: llama.cpp's fallbacks (q4_K -> q5_0, q6_K -> q8_0).
  const SyntheticSpec s = synthetic_preset("tiny");
  const std::vector<SyntheticTensor> ts = synthetic_tensors(s);
  const std::vector<DType> tiny_types = synthetic_mix_types(s, quant_mix("Q4_K_M"));
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].name == "output.weight") CHECK(tiny_types[i] == DType::Q8_0);
    if (ts[i].name == "blk.0.attn_q.weight") CHECK(tiny_types[i] == DType::Q5_0);
  }
  const auto one = build_synthetic_gguf(s, quant_mix("Q4_K_M"), 7);
  ThreadPool pool(2);
  size_t calls = 0, last_total = 0;
  const auto two = build_synthetic_gguf(s, quant_mix("Q4_K_M"), 7, "", [&](size_t, size_t total) {
    ++calls;
    last_total = total;
  }, &pool);
  CHECK(one == two);
  CHECK(calls == ts.size());
  CHECK(last_total == ts.size());
  const GgufFile f = GgufFile::from_bytes(one);
  CHECK(f.tensors().size() == ts.size());
  CHECK(build_synthetic_gguf(s, quant_mix("Q4_K_M"), 8) != one);
}

TEST_CASE("qwen: bench presets qwen2.5-1.5b / qwen3-1.7b have the published shapes, and shrunk copies load as qwen2 / qwen3") {
  for (const char* name : {"qwen2.5-1.5b", "qwen3-1.7b"}) {
    CAPTURE(name);
    const SyntheticSpec s = synthetic_preset(name);
    const bool q2 = s.arch == "qwen2";
    CHECK(s.arch == (q2 ? "qwen2" : "qwen3"));
    CHECK(s.n_vocab == 151936);
    CHECK(s.head_size() == 128);
    CHECK(s.tied);
    CHECK(s.rope_base == 1e6f);
    CHECK(s.rms_eps == 1e-6f);
    CHECK(s.n_embd == (q2 ? 1536 : 2048));
    CHECK(s.n_ff == (q2 ? 8960 : 6144));
    CHECK(s.n_head_kv == (q2 ? 2 : 8));
    size_t biases = 0, qk_norms = 0;
    for (const SyntheticTensor& t : synthetic_tensors(s)) {
      biases += t.name.find(".bias") != std::string::npos;
      qk_norms += t.name.find("attn_q_norm") != std::string::npos || t.name.find("attn_k_norm") != std::string::npos;
      CHECK(t.name != "output.weight");  // tied
    }
    CHECK(biases == (q2 ? 3u * 28 : 0u));
    CHECK(qk_norms == (q2 ? 0u : 2u * 28));
    // The same architecture at a size a test can run: 1 layer, small vocabulary, head_dim 64 with
    // n_embd 128 and 4 heads (q_dim 256 != n_embd).
    SyntheticSpec small = s;
    small.n_vocab = 512;
    small.n_embd = 128;
    small.n_layer = 1;
    small.n_head = 4;
    small.n_head_kv = 2;
    small.n_ff = 256;
    small.head_dim = 64;
    const auto bytes = build_synthetic_gguf(small, quant_mix("Q8_0"));
    const LlamaModel m(GgufFile::from_bytes(bytes, "small.gguf"));
    CHECK(m.config().arch == s.arch);
    CHECK(m.config().q_dim() == 256);
    CHECK(m.config().rope_form() == RopeForm::Neox);
    CHECK(m.config().rms_eps == 1e-6f);
    CHECK(m.weights().layers[0].bq.size() == (q2 ? 256u : 0u));
    CHECK(m.weights().layers[0].q_norm.size() == (q2 ? 0u : 64u));
    PagedKvCache kv(m.kv_params(16));
    LlamaContext ctx;
    Batch b;
    b.add(5, 0, kv.create_sequence(), true);
    m.forward(ctx, kv, b);
    CHECK(std::isfinite(ctx.logits(0)[0]));
  }
}

TEST_CASE("synthetic: tiled blocks are the quantized rows' blocks, same types and sizes, same for any thread count") {
  // tiny-256 IQ2_XXS: iq2_xxs layer matrices with the synthetic importance matrix, 512-row tensors.
  const SyntheticSpec s = synthetic_preset("tiny-256");
  const QuantMix& mix = quant_mix("IQ2_XXS");
  const auto quantized = build_synthetic_gguf(s, mix, 5);
  const auto tiled = build_synthetic_gguf(s, mix, 5, "", {}, nullptr, SyntheticBlocks::Tiled);
  ThreadPool pool(2);
  CHECK(build_synthetic_gguf(s, mix, 5, "", {}, &pool, SyntheticBlocks::Tiled) == tiled);
  CHECK(build_synthetic_gguf(s, mix, 6, "", {}, nullptr, SyntheticBlocks::Tiled) != tiled);
  REQUIRE(quantized.size() == tiled.size());
  const GgufFile q = GgufFile::from_bytes(quantized, "quantized.gguf"), t = GgufFile::from_bytes(tiled, "tiled.gguf");
  REQUIRE(q.tensors().size() == t.tensors().size());
  size_t tiled_tensors = 0;
  for (size_t i = 0; i < q.tensors().size(); ++i) {
    const GgufTensorInfo& a = q.tensors()[i];
    const GgufTensorInfo& b = t.tensors()[i];
    CAPTURE(a.name);
    REQUIRE(a.type == b.type);
    REQUIRE(a.nbytes == b.nbytes);
    const int64_t n_rows = a.n_dims == 1 ? 1 : a.ne[1];
    const size_t row = dtype_row_bytes(a.type, a.ne[0]), blk = dtype_row_bytes(a.type, dtype_block_size(a.type));
    const int64_t pool_rows = std::min(n_rows, kSyntheticPoolRows);
    // The pool rows are the quantizer's; every block of a later row is a pool row's block of that column.
    CHECK(std::memcmp(a.data, b.data, size_t(pool_rows) * row) == 0);
    bool differs = false;
    for (int64_t r = pool_rows; r < n_rows; ++r) {
      for (size_t j = 0; j < row / blk; ++j) {
        const uint8_t* got = b.data + size_t(r) * row + j * blk;
        bool found = false;
        for (int64_t p = 0; p < pool_rows && !found; ++p) found = std::memcmp(got, b.data + size_t(p) * row + j * blk, blk) == 0;
        REQUIRE(found);
      }
      differs = differs || std::memcmp(b.data + size_t(r) * row, a.data + size_t(r) * row, row) != 0;
    }
    if (n_rows > pool_rows) {
      CHECK(differs);
      ++tiled_tensors;
    }
  }
  CHECK(tiled_tensors > 10);
  // It loads and computes finite logits.
  const LlamaModel m(GgufFile::from_bytes(tiled, "tiled.gguf"));
  PagedKvCache kv(m.kv_params(16));
  LlamaContext ctx;
  Batch batch;
  batch.add(5, 0, kv.create_sequence(), true);
  m.forward(ctx, kv, batch);
  for (int v = 0; v < m.config().n_vocab; ++v) REQUIRE(std::isfinite(ctx.logits(0)[v]));
}
