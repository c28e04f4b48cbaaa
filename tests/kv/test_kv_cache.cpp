// PagedKvCache without a model: blocks on demand (bytes linear in tokens), fork sharing and copy on
// write, truncate/remove, context and byte-budget errors, F16/Q8_0 storage and the F32 copy of
// recent positions, sinks+window eviction with key re-rotation, and the Q8_0 float kernels.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <edgellm/kernels/scalar/float_ops.hpp>
#include <edgellm/kernels/select.hpp>
#include <edgellm/kv/paged_kv_cache.hpp>

using namespace edgellm;

namespace {

constexpr float kMaxF16RelErr = 1e-3f;    // half precision: 11-bit mantissa
constexpr float kMaxQ8StepFrac = 0.6f;    // q8_0: |x - x'| <= d / 2 + 127 |d - fp16(d)|
constexpr float kMaxRotateErr = 2e-5f;    // rotating by p then by -d vs by p - d directly

KvCacheParams small(int block_size, DType type = DType::F32, int head_dim = 32) {
  KvCacheParams p;
  p.n_layer = 2;
  p.n_kv_head = 2;
  p.head_dim = head_dim;
  p.block_size = block_size;
  p.type = type;
  return p;
}

// A distinct, smooth value for (layer, kv, position, element).
float value(int layer, int kv, int pos, int i) { return std::sin(0.37f * pos + 0.11f * i + 1.3f * layer + 2.1f * kv); }

std::vector<float> row(int layer, int kv, int pos, int n) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = value(layer, kv, pos, i);
  return r;
}

void fill(PagedKvCache& kv, int s, int from, int to) {
  const auto& p = kv.params();
  for (int pos = from; pos < to; ++pos)
    for (int l = 0; l < p.n_layer; ++l)
      kv.write(s, l, pos, row(l, 0, pos, kv.kv_dim()).data(), row(l, 1, pos, kv.kv_dim()).data());
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<float> read(const PagedKvCache& kv, int s, int layer, int k_or_v, int pos) {
  std::vector<float> r(static_cast<size_t>(kv.kv_dim()));
  kv.read_row(s, layer, k_or_v, pos, r.data());
  return r;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// cos/sin pairs of a rotation by `pos` positions (base 10000), n_rot = head_dim.
std::vector<float> rot_table(int pos, int n_rot) {
  std::vector<float> cs(static_cast<size_t>(n_rot));
  for (int i = 0; i < n_rot / 2; ++i) {
    const double t = pos * std::pow(10000.0, -2.0 * i / n_rot);
    cs[static_cast<size_t>(2 * i)] = static_cast<float>(std::cos(t));
    cs[static_cast<size_t>(2 * i + 1)] = static_cast<float>(std::sin(t));
  }
  return cs;
}

}  // namespace

TEST_CASE("blocks are allocated as tokens arrive: bytes grow linearly with tokens held") {
  for (int bs : {1, 16, 32}) {
    CAPTURE(bs);
    PagedKvCache kv(small(bs));
    const int s = kv.create_sequence();
    CHECK(kv.bytes_allocated() == 0);
    for (int n = 1; n <= 100; ++n) {
      kv.append(s, 1);
      const int blocks = (n + bs - 1) / bs;
      CHECK(kv.blocks_used() == blocks);
      CHECK(kv.bytes_allocated() == static_cast<size_t>(blocks) * kv.block_bytes());
    }
    CHECK(kv.bytes_per_token() == static_cast<size_t>(2 * 2 * 2 * 32 * sizeof(float)));
  }
}

TEST_CASE("storage types: F32 exact, F16 and Q8_0 within their rounding, sizes per token") {
  for (DType t : {DType::F32, DType::F16, DType::Q8_0}) {
    const std::string type_name = dtype_name(t);
    CAPTURE(type_name);
    PagedKvCache kv(small(16, t, 64));
    const int s = kv.create_sequence();
    kv.append(s, 40);
    fill(kv, s, 0, 40);
    const size_t per_32_elems = t == DType::F32 ? 128 : t == DType::F16 ? 64 : 34;  // layers x K,V x kv_dim / 32
    CHECK(kv.bytes_per_token() * 32 == static_cast<size_t>(2 * 2 * 2 * 64) * per_32_elems);
    for (int pos : {0, 15, 16, 39})
      for (int l = 0; l < 2; ++l)
        for (int k_or_v = 0; k_or_v < 2; ++k_or_v) {
          const auto want = row(l, k_or_v, pos, kv.kv_dim());
          const auto got = read(kv, s, l, k_or_v, pos);
          if (t == DType::F32) CHECK(got == want);
          for (size_t i = 0; i < want.size(); ++i) {
            // Q8_0: the block's step d = amax / 127 <= 1 / 127 for values in [-1, 1].
            const float tol = t == DType::F32 ? 0.0f : t == DType::F16 ? kMaxF16RelErr : kMaxQ8StepFrac / 127.0f;
            CHECK(std::fabs(got[i] - want[i]) <= tol);
          }
        }
  }
}

TEST_CASE("q8_0 storage needs head_dim % 32 == 0 - other types and bad shapes are Errors") {
  const std::string m = message_of([] { PagedKvCache kv(small(16, DType::Q8_0, 8)); });
  CHECK(m.find("multiple of 32") != std::string::npos);
  CHECK(m.find("8") != std::string::npos);
  CHECK_THROWS_AS(PagedKvCache(small(16, DType::Q4_0)), Error);
  CHECK_THROWS_AS(PagedKvCache(small(0)), Error);
  CHECK_NOTHROW(PagedKvCache(small(16, DType::F16, 8)));
}

TEST_CASE("fork shares every block, copies the partly-filled one on write, and leaves the parent intact") {
  PagedKvCache kv(small(16));
  const int a = kv.create_sequence();
  kv.append(a, 40);  // blocks: 16 + 16 + 8
  fill(kv, a, 0, 40);
  const int b = kv.fork(a);
  CHECK(kv.blocks_used() == 3);  // nothing copied yet
  for (int blk : kv.block_table(a)) CHECK(kv.block_refs(blk) == 2);
  kv.append(b, 1);  // b writes into the shared last block: it gets its own copy
  CHECK(kv.blocks_used() == 4);
  CHECK(kv.block_table(a)[0] == kv.block_table(b)[0]);
  CHECK(kv.block_table(a)[1] == kv.block_table(b)[1]);
  CHECK(kv.block_table(a)[2] != kv.block_table(b)[2]);
  std::vector<float> other(static_cast<size_t>(kv.kv_dim()), 7.0f);
  kv.write(b, 0, 40, other.data(), other.data());
  CHECK(read(kv, b, 0, 0, 39) == row(0, 0, 39, kv.kv_dim()));  // copied content
  CHECK(read(kv, b, 0, 0, 40) == other);
  CHECK(kv.n_tokens(a) == 40);
  kv.remove_sequence(b);
  CHECK(kv.blocks_used() == 3);
  for (int blk : kv.block_table(a)) CHECK(kv.block_refs(blk) == 1);
  kv.truncate(a, 17);
  CHECK(kv.blocks_used() == 2);
  CHECK(kv.blocks_free() == 2);
  CHECK_THROWS_AS(kv.truncate(a, 18), Error);
  CHECK_THROWS_AS(kv.n_tokens(b), Error);  // removed
}

TEST_CASE("context limit and byte budget: Error that says so, sequence unchanged") {
  KvCacheParams p = small(16);
  p.max_tokens = 40;
  PagedKvCache kv(p);
  const int s = kv.create_sequence();
  kv.append(s, 40);
  CHECK_FALSE(kv.fits(s, 1));
  CHECK(message_of([&] { kv.append(s, 1); }).find("context of 40") != std::string::npos);
  CHECK(kv.n_tokens(s) == 40);

  p = small(16);
  p.max_bytes = 2 * PagedKvCache(p).block_bytes();
  PagedKvCache budget(p);
  const int t = budget.create_sequence();
  budget.append(t, 32);
  CHECK_FALSE(budget.fits(t, 1));
  const std::string m = message_of([&] { budget.append(t, 1); });
  CHECK(m.find("budget") != std::string::npos);
  CHECK(m.find("no eviction") != std::string::npos);
  CHECK(budget.n_tokens(t) == 32);
  CHECK(budget.blocks_used() == 2);
  // A fork's first write into a shared block needs a copy, which the budget does not allow either.
  budget.truncate(t, 20);
  const int u = budget.fork(t);
  CHECK_FALSE(budget.fits(u, 1));
  CHECK_THROWS_AS(budget.append(u, 1), Error);
}

TEST_CASE("F32 copy of the recent positions: exact for the last N, through truncate and fork") {
  KvCacheParams p = small(16, DType::Q8_0, 32);
  p.n_recent_f32 = 5;
  PagedKvCache kv(p);
  CHECK(kv.shadow_bytes() == static_cast<size_t>(5 * 2 * 2 * 64 * sizeof(float)));
  const int s = kv.create_sequence();
  kv.append(s, 30);
  fill(kv, s, 0, 30);
  CHECK(kv.shadow_begin(s) == 25);
  for (int pos = 25; pos < 30; ++pos) CHECK(read(kv, s, 1, 0, pos) == row(1, 0, pos, 64));
  CHECK(read(kv, s, 1, 0, 24) != row(1, 0, 24, 64));  // quantized
  kv.truncate(s, 27);
  CHECK(kv.shadow_begin(s) == 25);
  const int c = kv.fork(s);
  kv.append(c, 3);
  fill(kv, c, 27, 30);
  CHECK(kv.shadow_begin(c) == 25);
  for (int pos = 25; pos < 30; ++pos) CHECK(read(kv, c, 0, 1, pos) == row(0, 1, pos, 64));
  CHECK(read(kv, s, 0, 1, 26) == row(0, 1, 26, 64));
}

TEST_CASE("eviction keeps sink blocks and the window, drops whole blocks between, re-rotates keys") {
  struct Case {
    int bs, n_sink, window, n_tokens, recent;
    DType type;
    KvRopeFn rope = rope_ref;  // rope_neox_ref: qwen2 / qwen3's pairing of the halves
  };
  const Case cases[] = {{4, 2, 5, 20, 0, DType::F32},  {1, 0, 1, 50, 0, DType::F32},   {16, 4, 24, 100, 0, DType::F32},
                        {3, 7, 10, 40, 0, DType::F32}, {16, 4, 24, 100, 8, DType::F16}, {8, 1, 9, 60, 12, DType::Q8_0},
                        {4, 2, 5, 20, 0, DType::F32, rope_neox_ref}, {8, 1, 9, 60, 12, DType::Q8_0, rope_neox_ref}};
  for (const Case& c : cases) {
    CAPTURE(c.bs);
    CAPTURE(c.n_sink);
    CAPTURE(c.window);
    const bool neox = c.rope == rope_neox_ref;
    CAPTURE(neox);
    const std::string type_name = dtype_name(c.type);
    CAPTURE(type_name);
    KvCacheParams p = small(c.bs, c.type, 32);
    p.n_recent_f32 = c.recent;
    PagedKvCache kv(p);
    const int s = kv.create_sequence();
    kv.append(s, c.n_tokens);
    // Keys hold a base vector rotated by their position (what RoPE does); values are plain rows.
    const std::vector<float> base = row(0, 0, 0, 64);
    auto key_at = [&](int pos) {
      std::vector<float> k = base;
      c.rope(k.data(), 2, 32, 32, rot_table(pos, 32).data());
      return k;
    };
    for (int pos = 0; pos < c.n_tokens; ++pos)
      for (int l = 0; l < 2; ++l) kv.write(s, l, pos, key_at(pos).data(), row(l, 1, pos, 64).data());
    const KvEviction e = kv.evict_sink_window(s, c.n_sink, c.window);
    const int first = (c.n_sink + c.bs - 1) / c.bs * c.bs;
    CHECK(e.begin == first);
    CHECK(e.count % c.bs == 0);
    CHECK(e.count == (c.n_tokens - c.window) / c.bs * c.bs - first);
    CHECK(kv.n_tokens(s) == c.n_tokens - e.count);
    CHECK(kv.n_tokens(s) >= c.window + std::min(c.n_sink, c.n_tokens));
    CHECK(kv.blocks_used() == (kv.n_tokens(s) + c.bs - 1) / c.bs);
    kv.rotate_keys(s, e.begin, c.rope, 32, rot_table(-e.count, 32).data());
    const float tol = c.type == DType::F32 ? 0.0f : c.type == DType::F16 ? 2 * kMaxF16RelErr : 2 * kMaxQ8StepFrac / 127.0f;
    for (int pos = 0; pos < kv.n_tokens(s); ++pos) {
      CAPTURE(pos);
      const int old = pos < e.begin ? pos : pos + e.count;
      CHECK(max_abs_diff(read(kv, s, 1, 1, pos), row(1, 1, old, 64)) <= tol);
      CHECK(max_abs_diff(read(kv, s, 1, 0, pos), key_at(pos)) <= tol + kMaxRotateErr);
    }
    // Appending continues at the new end; a second eviction leaves the sinks alone again.
    kv.append(s, c.bs * 3);
    const KvEviction e2 = kv.evict_sink_window(s, c.n_sink, c.window);
    CHECK(e2.begin == first);
    CHECK(kv.n_evicted(s) == e.count + e2.count);
  }
  CHECK_THROWS_AS(PagedKvCache(small(4)).evict_sink_window(0, 0, 1), Error);  // no sequence
  PagedKvCache kv(small(4));
  const int s = kv.create_sequence();
  CHECK_THROWS_AS(kv.evict_sink_window(s, 0, 0), Error);  // window must be >= 1
}

TEST_CASE("eviction on a forked sequence copies the blocks it re-rotates and leaves the other intact") {
  PagedKvCache kv(small(4));
  const int a = kv.create_sequence();
  kv.append(a, 24);
  fill(kv, a, 0, 24);
  const int b = kv.fork(a);
  const KvEviction e = kv.evict_sink_window(b, 4, 8);
  CHECK(e.count == 12);
  kv.rotate_keys(b, e.begin, rope_ref, 32, rot_table(-e.count, 32).data());
  for (int pos = 0; pos < 24; ++pos) CHECK(read(kv, a, 0, 0, pos) == row(0, 0, pos, 64));
  CHECK(kv.block_table(b)[0] == kv.block_table(a)[0]);  // the sink block is still shared
  CHECK(kv.blocks_used() == 6 + 2);                      // b's two rotated blocks are its own
}
