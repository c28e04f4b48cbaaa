// Tests for quant/imatrix.hpp: llama-imatrix's GGUF and legacy .dat files read, written back
// byte for byte, converted into each other, the weights llama-quantize derives, bad files; and the
// forward pass's matmul observer (model/llama.hpp) feeding ImatrixCollector.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <edgellm/model/llama.hpp>
#include <edgellm/quant/imatrix.hpp>
#include <edgellm/quant/quantize_weighted.hpp>

#include "test_util.hpp"

using namespace edgellm_test;
using namespace edgellm;

namespace {

const std::string kImatGguf = kData + "/iq/tiny-llama-256.imatrix.gguf";
const std::string kImatDat = kData + "/iq/tiny-llama-256.imatrix.dat";

std::vector<uint8_t> file_bytes(const std::string& p) {
  const std::string s = read_file(p);
  return std::vector<uint8_t>(s.begin(), s.end());
}

// A small raw-form matrix: one 2-D weight, one 3-D weight with an expert that saw no rows.
Imatrix small_raw() {
  Imatrix m;
  m.chunk_size = 4;
  m.chunk_count = 2;
  m.datasets = {"text.txt"};
  m.has_metadata = true;
  m.entries["blk.0.ffn_up.weight"] = ImatrixEntry{{8.0f, 2.0f, 4.0f}, {8}};
  m.entries["blk.0.ffn_up_exps.weight"] = ImatrixEntry{{6.0f, 3.0f, 5.0f, 7.0f}, {3, 0}};
  return m;
}

void put_i32(std::vector<uint8_t>& b, int32_t v) {
  uint8_t x[4];
  std::memcpy(x, &v, 4);
  b.insert(b.end(), x, x + 4);
}

}  // namespace

TEST_CASE("imatrix: the shared GGUF and .dat files read, and their weights agree") {
  EDGELLM_SKIP_WITHOUT(kImatGguf);
  const Imatrix g = load_imatrix(kImatGguf);
  const Imatrix d = load_imatrix(kImatDat);
  CHECK(g.format == ImatrixFormat::Gguf);
  CHECK(d.format == ImatrixFormat::Dat);
  CHECK(g.has_metadata);
  CHECK(g.chunk_size == 64);
  CHECK(g.chunk_count == d.chunk_count);
  REQUIRE(g.datasets.size() == 1);
  CHECK(g.datasets == d.datasets);
  REQUIRE(g.entries.size() == 14);  // 7 matmuls x 2 layers; the output is not collected
  CHECK(d.entries.size() == g.entries.size());
  for (const auto& kv : g.entries) {
    INFO(kv.first);
    const std::vector<float> wg = g.weights(kv.first), wd = d.weights(kv.first);
    REQUIRE(wg.size() == wd.size());
    REQUIRE(kv.second.counts.size() == 1);
    CHECK(kv.second.counts[0] == int64_t(g.chunk_count) * g.chunk_size);
    // .dat stores (sum / count) * ncall in float: back to sum / count within a few ulps.
    for (size_t i = 0; i < wg.size(); ++i) CHECK(wd[i] == doctest::Approx(wg[i]).epsilon(1e-6));
  }
  CHECK(g.weights("output.weight").empty());
  CHECK(g.all_weights().size() == 14);
}

TEST_CASE("imatrix: written back byte for byte, GGUF -> .dat is llama-imatrix's .dat") {
  EDGELLM_SKIP_WITHOUT(kImatGguf);
  const Imatrix g = load_imatrix(kImatGguf);
  const Imatrix d = load_imatrix(kImatDat);
  CHECK(imatrix_gguf_bytes(g) == file_bytes(kImatGguf));
  CHECK(imatrix_dat_bytes(d) == file_bytes(kImatDat));
  CHECK(imatrix_dat_bytes(g) == file_bytes(kImatDat));
  // .dat -> raw form (llama-imatrix --in-file): counts ncall * chunk size, same weights.
  const Imatrix r = imatrix_dat_to_raw(d, 64);
  CHECK(r.chunk_count == g.chunk_count);
  for (const auto& kv : g.entries) {
    const std::vector<float> wg = g.weights(kv.first), wr = r.weights(kv.first);
    REQUIRE(wr.size() == wg.size());
    for (size_t i = 0; i < wg.size(); ++i) CHECK(wr[i] == doctest::Approx(wg[i]).epsilon(1e-6));
  }
}

TEST_CASE("imatrix: weights per matrix, round trips of a 3-D entry") {
  const Imatrix m = small_raw();
  CHECK(m.weights("blk.0.ffn_up.weight") == std::vector<float>{1.0f, 0.25f, 0.5f});
  // expert 1 saw no rows: llama-quantize gives it weights 1
  CHECK(m.weights("blk.0.ffn_up_exps.weight") == std::vector<float>{2.0f, 1.0f, 1.0f, 1.0f});
  const Imatrix g = parse_imatrix_bytes(imatrix_gguf_bytes(m), "m.gguf");
  CHECK(g.has_metadata);
  CHECK(g.chunk_count == 2);
  CHECK(g.chunk_size == 4);
  CHECK(g.datasets == m.datasets);
  REQUIRE(g.entries.size() == 2);
  CHECK(g.entries.at("blk.0.ffn_up_exps.weight").counts == std::vector<int64_t>{3, 0});
  CHECK(g.entries.at("blk.0.ffn_up_exps.weight").sums == m.entries.at("blk.0.ffn_up_exps.weight").sums);
  const Imatrix d = parse_imatrix_bytes(imatrix_dat_bytes(m), "m.dat");
  CHECK(d.format == ImatrixFormat::Dat);
  // ncall = ceil(max count / chunk size); values (sum / count) * ncall, 1 * ncall where unseen
  CHECK(d.entries.at("blk.0.ffn_up.weight").counts == std::vector<int64_t>{2});
  CHECK(d.entries.at("blk.0.ffn_up.weight").sums == std::vector<float>{2.0f, 0.5f, 1.0f});
  CHECK(d.entries.at("blk.0.ffn_up_exps.weight").counts == std::vector<int64_t>{1});
  CHECK(d.entries.at("blk.0.ffn_up_exps.weight").sums == std::vector<float>{2.0f, 1.0f, 1.0f, 1.0f});
  CHECK(d.datasets == m.datasets);
  CHECK(d.chunk_count == 2);
}

TEST_CASE("imatrix: bad files throw Error naming the file and the entry") {
  CHECK_THROWS_WITH_AS(parse_imatrix_bytes({}, "e.dat"), doctest::Contains("e.dat: empty"), Error);
  std::vector<uint8_t> b;
  put_i32(b, 0);
  CHECK_THROWS_WITH_AS(parse_imatrix_bytes(b, "z.dat"), doctest::Contains("z.dat: no entries"), Error);
  b.clear();
  put_i32(b, 1);
  put_i32(b, 3);
  b.insert(b.end(), {'a', 'b', 'c'});
  put_i32(b, 1);
  put_i32(b, 4);  // 4 values announced, 1 given
  put_i32(b, 0);
  CHECK_THROWS_WITH_AS(parse_imatrix_bytes(b, "t.dat"), doctest::Contains("t.dat: truncated: entry 0 'abc' needs 4"),
                       Error);
  b.clear();
  put_i32(b, 1);
  put_i32(b, 1 << 30);
  CHECK_THROWS_WITH_AS(parse_imatrix_bytes(b, "n.dat"), doctest::Contains("entry 0: name length 1073741824"), Error);
  b.clear();
  put_i32(b, 1);
  put_i32(b, 1);
  b.push_back('w');
  put_i32(b, 1);
  put_i32(b, 0);
  CHECK_THROWS_WITH_AS(parse_imatrix_bytes(b, "v.dat"), doctest::Contains("entry 0 'w': value count 0"), Error);

  // GGUF: sums without counts, wrong types, a GGUF with no entries.
  {
    GgufWriter w;
    const float s[2] = {1, 2};
    w.add_tensor("blk.0.x.weight.in_sum2", DType::F32, Shape{2}, s);
    CHECK_THROWS_WITH_AS(parse_imatrix_bytes(w.to_bytes(), "a.gguf"),
                         doctest::Contains("a.gguf: entry 'blk.0.x.weight': has 'blk.0.x.weight.in_sum2' but no"), Error);
  }
  {
    GgufWriter w;
    const float s[2] = {1, 2};
    const uint16_t c = 0;
    w.add_tensor("w.in_sum2", DType::F32, Shape{2}, s);
    w.add_tensor("w.counts", DType::F16, Shape{1}, &c);
    CHECK_THROWS_WITH_AS(parse_imatrix_bytes(w.to_bytes(), "f.gguf"), doctest::Contains("entry 'w': sums and counts must be F32"),
                         Error);
  }
  {
    GgufWriter w;
    const float s[3] = {1, 2, 3}, c[2] = {1, 1};
    w.add_tensor("w.in_sum2", DType::F32, Shape{3}, s);
    w.add_tensor("w.counts", DType::F32, Shape{2}, c);
    CHECK_THROWS_WITH_AS(parse_imatrix_bytes(w.to_bytes(), "s.gguf"), doctest::Contains("entry 'w': 3 sums do not split into 2"),
                         Error);
  }
  {
    GgufWriter w;
    w.set_string("general.type", "imatrix");
    CHECK_THROWS_WITH_AS(parse_imatrix_bytes(w.to_bytes(), "0.gguf"), doctest::Contains("0.gguf: no entries"), Error);
  }
  CHECK_THROWS_WITH_AS(load_imatrix("/nonexistent/x.imatrix"), doctest::Contains("/nonexistent/x.imatrix: cannot open"), Error);
}

TEST_CASE("imatrix: the forward pass's matmul observer feeds the collector every weight's input rows") {
  const std::string path = kData + "/models/tiny-llama-256-f32.gguf";
  EDGELLM_SKIP_WITHOUT(path);
  const auto model = LlamaModel::load(path);
  const LlamaConfig& c = model->config();
  std::map<std::string, std::pair<int, int>> seen;  // weight -> (rows, cols) of its last call
  ImatrixCollector collector(/*chunk_size=*/10);
  std::vector<float> first_q_row;
  LlamaContext ctx;
  ctx.set_matmul_observer([&](const std::string& w, const float* x, int rows, int cols) {
    seen[w] = {rows, cols};
    collector.add(w, x, rows, cols);
    if (w == "blk.0.attn_q.weight" && first_q_row.empty()) first_q_row.assign(x, x + cols);
  });
  PagedKvCache kv(model->kv_params(64));
  const int seq = kv.create_sequence();
  Batch b;
  for (int i = 0; i < 20; ++i) b.add(1 + i * 7, i, seq, i >= 15);
  model->forward(ctx, kv, b);
  // 7 matrices per layer with every token's row; the output with the 5 rows that want logits
  REQUIRE(seen.size() == size_t(7 * c.n_layer + 1));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    CHECK(seen[p + "attn_q.weight"] == std::make_pair(20, c.n_embd));
    CHECK(seen[p + "attn_output.weight"] == std::make_pair(20, c.q_dim()));
    CHECK(seen[p + "ffn_up.weight"] == std::make_pair(20, c.n_embd));
    CHECK(seen[p + "ffn_down.weight"] == std::make_pair(20, c.n_ff));
  }
  CHECK(seen["output.weight"] == std::make_pair(5, c.n_embd));
  // The first input row of blk.0.attn_q is token 1's embedding, RMS-normed and scaled by attn_norm.
  const GgufFile& f = model->file();
  const float* emb = reinterpret_cast<const float*>(f.tensor("token_embd.weight").data) + size_t(1) * c.n_embd;
  const float* g = reinterpret_cast<const float*>(f.tensor("blk.0.attn_norm.weight").data);
  double ss = 0;
  for (int j = 0; j < c.n_embd; ++j) ss += double(emb[j]) * emb[j];
  const double inv = 1.0 / std::sqrt(ss / c.n_embd + c.rms_eps);
  REQUIRE(first_q_row.size() == size_t(c.n_embd));
  for (int j = 0; j < c.n_embd; ++j) CHECK(first_q_row[size_t(j)] == doctest::Approx(emb[j] * inv * g[j]).epsilon(1e-5));
  // Collected: 20 rows per layer weight, chunk count 20 / 10.
  const Imatrix m = collector.result({"text.txt"});
  CHECK(m.chunk_count == 2);
  CHECK(m.entries.at("blk.1.ffn_down.weight").counts == std::vector<int64_t>{20});
  CHECK(m.entries.at("blk.0.attn_q.weight").sums[0] >= first_q_row[0] * first_q_row[0]);
}

namespace {
// Deterministic rows for the weighted quantizers: LCG floats, a scale growing with the row,
// outliers (every 37th value x8), one all-zero 32-block; and an importance per column. Only exact
// products are added to, so the values do not depend on FMA contraction.
void weighted_test_rows(std::vector<float>& x, std::vector<float>& qw, int64_t nrows, int64_t n) {
  uint32_t s = 12345u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) * (1.0f / 16777216.0f);
  };
  x.resize(size_t(nrows * n));
  qw.resize(size_t(n));
  for (int64_t r = 0; r < nrows; ++r) {
    const float scale = 0.01f * float(1 + r * r);
    for (int64_t j = 0; j < n; ++j) {
      float v = (next() - 0.5f) * 4.0f * scale;
      if (j % 37 == 5) v *= 8.0f;
      if (r == 3 && j < 32) v = 0.0f;
      x[size_t(r * n + j)] = v;
    }
  }
  // k / 256 + 0.05: the product is exact, so an FMA-contracting build generates the same values
  for (int64_t j = 0; j < n; ++j) {
    s = s * 1664525u + 1013904223u;
    qw[size_t(j)] = 0.05f + float(s >> 22) * (1.0f / 256.0f);
  }
}
uint64_t fnv1a(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : b) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
}  // namespace

TEST_CASE("imatrix: the weighted legacy and K-quant quantizers give ggml's bytes") {
  // FNV-1a of ggml's quantize_<type>(rows, 8 x 512, imatrix / nullptr) output on these rows, from
  // the libggml-base of llama.cpp v0.5.0 (de3ff81, x86, no FMA in ggml-base) that wrote
  // ../shared/data/iq. The shared iq files cover q2_K, q4_K and q6_K with a matrix; this covers
  // every type llama-quantize feeds a matrix to, without data files.
  struct Golden {
    DType type;
    uint64_t with_imatrix, without;
  };
  const Golden golden[] = {
      {DType::Q4_0, 0xa7020d2664140280ull, 0x8d992278dd0450b2ull}, {DType::Q4_1, 0x1764743aa1eebeddull, 0x0ae9002bd97068b9ull},
      {DType::Q5_0, 0x237395a0cf584ee4ull, 0x90c38d830201744eull}, {DType::Q5_1, 0x945275364a99ca8eull, 0xaa2a902bd331a9b3ull},
      {DType::Q2_K, 0xbe52783796778e8cull, 0x82500994c75cc5d7ull}, {DType::Q3_K, 0xa96d2e2f0374126cull, 0x81a53c503cc403a6ull},
      {DType::Q4_K, 0xd45584a406c51d39ull, 0x876389ae09eed8fbull}, {DType::Q5_K, 0xd1509e401aa66e84ull, 0x69e41c91b4891870ull},
      {DType::Q6_K, 0x273ed301d7c01bf9ull, 0x66efd6984ef252a8ull},
  };
  constexpr int64_t kRows = 8, kCols = 512;
  std::vector<float> x, qw;
  weighted_test_rows(x, qw, kRows, kCols);
  for (const Golden& g : golden) {
    INFO(std::string(dtype_name(g.type)));
    std::vector<uint8_t> out(dtype_row_bytes(g.type, kCols) * kRows);
    CHECK(quantize_chunk(g.type, x.data(), out.data(), kRows, kCols, qw.data()) == out.size());
    CHECK(fnv1a(out) == g.with_imatrix);
    CHECK(quantize_chunk(g.type, x.data(), out.data(), kRows, kCols, nullptr) == out.size());
    CHECK(fnv1a(out) == g.without);
  }
  std::vector<uint8_t> out(4096);
  CHECK_THROWS_WITH_AS(quantize_chunk(DType::Q4_K, x.data(), out.data(), 1, 96, nullptr), doctest::Contains("96"), Error);
}
