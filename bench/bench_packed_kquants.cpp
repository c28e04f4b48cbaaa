// bench_packed_kquants: decode GEMV of the row-interleaved K-quant groups of the best kernel table
// this CPU runs (x16 on AVX-512 VNNI: kernels/x86/packed_kquants_x16-inl.hpp; x4 on arm64 dotprod:
// kernels/neon/packed_kquants.hpp) against the per-row kernels, through matmul: ns per 256
// weights, 1 and 2 threads, on an N x N matrix (cache-fed, N = 4096) and a ~512 MiB one
// (DRAM-fed); then the 64-token GEMM (prefill) in GOP/s. "rows" is vec_dot_rows, "stream" the
// one-row-per-call decode. Types without a packed form on this table get the per-row lines only.
// Usage: bench_packed_kquants [--n N] [--min-ms MS] [--no-dram]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "edgellm/core/memory.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/thread_pool.hpp"

using namespace edgellm;

namespace {

// Rows repeat with this period (quantizing 100M+ weights would outlast the benchmark; the contents
// do not change the speed). A multiple of every group width, so packed groups repeat too.
constexpr int64_t kPeriod = 64;

// Median seconds of f() over >= 5 calls and >= min_ms, after one warm-up call.
double median_seconds(const std::function<void()>& f, double min_ms) {
  using Clock = std::chrono::steady_clock;
  f();
  std::vector<double> s;
  const auto start = Clock::now();
  while (s.size() < 5 || std::chrono::duration<double, std::milli>(Clock::now() - start).count() < min_ms) {
    const auto t0 = Clock::now();
    f();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2];
}

// The weights of one benchmark case: the rows as stored, and their packed groups.
struct Matrix {
  AnonymousMemory rows, packed;
  MatmulWeight plain, grouped;
};

Matrix make_matrix(const PackedFormat& pf, DType t, int64_t n_in, int64_t n_out) {
  Matrix m;
  const size_t rb = dtype_row_bytes(t, n_in);
  m.rows = AnonymousMemory(rb * size_t(n_out));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < kPeriod; ++r) {
    for (auto& v : f) v = d(rng);
    quantize_row(t, f.data(), m.rows.data() + rb * size_t(r), n_in);
  }
  for (int64_t r = kPeriod; r < n_out; ++r) std::memcpy(m.rows.data() + rb * size_t(r), m.rows.data() + rb * size_t(r % kPeriod), rb);
  m.plain = MatmulWeight{t, m.rows.data(), n_in, n_out, rb};
  m.grouped = m.plain;
  if (pf.rows == 0) return m;  // no packed form on this table
  const size_t gb = pf.group_bytes(n_in);
  const int64_t groups = n_out / pf.rows, period = kPeriod / pf.rows;
  m.packed = AnonymousMemory(gb * size_t(groups));
  for (int64_t g = 0; g < groups; ++g) {
    if (g < period) pf.pack(m.rows.data() + rb * size_t(g * pf.rows), rb, pf.rows, n_in, m.packed.data() + gb * size_t(g));
    else std::memcpy(m.packed.data() + gb * size_t(g), m.packed.data() + gb * size_t(g % period), gb);
  }
  m.grouped.packed = m.packed.data();
  m.grouped.pf = &pf;
  return m;
}

struct Tables {
  KernelTable stream;  // one row per vec_dot call, software prefetch (x86's decode)
  KernelTable rows;    // vec_dot_rows (arm64's decode)
};

// One decode table row per layout: ns per 256 weights and GB/s, 1 and 2 threads.
void gemv_rows(const Tables& kt, ThreadPool& pool2, DType t, int64_t n_in, int64_t n_out, double min_ms) {
  const PackedFormat& pf = kt.stream.packed_of(t);
  const Matrix m = make_matrix(pf, t, n_in, n_out);
  std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_out));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& v : x) v = d(rng);
  const double units = double(n_in) * double(n_out) / 256.0;
  auto row = [&](const char* layout, const KernelTable& table, const MatmulWeight& w, double bytes) {
    double ns[2], gbs[2];
    ThreadPool* pools[2] = {nullptr, &pool2};
    for (int i = 0; i < 2; ++i) {
      const double s = median_seconds([&] { matmul(table, pools[i], w, x.data(), 1, y.data()); }, min_ms);
      ns[i] = s * 1e9 / units;
      gbs[i] = bytes / s / 1e9;
    }
    std::printf("| %s | %s | %.0f | %.2f | %.1f | %.2f | %.1f |\n", dtype_name(t), layout, bytes / (1 << 20), ns[0], gbs[0],
                ns[1], gbs[1]);
    std::fflush(stdout);
  };
  row("rows", kt.rows, m.plain, double(m.rows.size()));
  row("stream", kt.stream, m.plain, double(m.rows.size()));
  if (pf.rows > 0) row(pf.name, kt.stream, m.grouped, double(m.packed.size()));
}

// The 64-token GEMM, unpacked (matmul's prefill path) vs packed: GOP/s, 1 and 2 threads.
void gemm_rows(const Tables& kt, ThreadPool& pool2, DType t, int64_t n_in, int64_t n_out, double min_ms) {
  constexpr int64_t kTokens = 64;
  const PackedFormat& pf = kt.stream.packed_of(t);
  const Matrix m = make_matrix(pf, t, n_in, n_out);
  std::vector<float> x(static_cast<size_t>(n_in * kTokens)), y(static_cast<size_t>(n_out * kTokens));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (auto& v : x) v = d(rng);
  const double ops = 2.0 * double(n_in) * double(n_out) * double(kTokens);
  for (const MatmulWeight* w : {&m.plain, &m.grouped}) {
    if (w == &m.grouped && pf.rows == 0) break;
    const double s1 = median_seconds([&] { matmul(kt.stream, nullptr, *w, x.data(), kTokens, y.data()); }, min_ms);
    const double s2 = median_seconds([&] { matmul(kt.stream, &pool2, *w, x.data(), kTokens, y.data()); }, min_ms);
    std::printf("| %s | %s | %.1f | %.1f |\n", dtype_name(t), w->packed ? pf.name : "rows", ops / s1 / 1e9, ops / s2 / 1e9);
    std::fflush(stdout);
  }
}

void header() {
  std::printf("| type | layout | MiB | 1 thr ns/256w | 1 thr GB/s | 2 thr ns/256w | 2 thr GB/s |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
}

}  // namespace

int main(int argc, char** argv) {
  double min_ms = 300.0;
  bool dram = true;
  int64_t n = 4096;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) min_ms = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--no-dram") == 0) dram = false;
    else {
      std::fprintf(stderr, "error: unknown or incomplete option '%s' (usage: bench_packed_kquants [--n N] [--min-ms MS] [--no-dram])\n", argv[i]);
      return 1;
    }
  }
  if (n < 256 || n % 256 != 0 || n > 65536) {
    std::fprintf(stderr, "error: --n %lld: expected a multiple of 256 in [256, 65536]\n", (long long)n);
    return 1;
  }
  try {
    Tables kt{make_kernel_table(available_isas().back()), {}};
    kt.stream.stream_decode = true;
    kt.rows = kt.stream;
    kt.rows.stream_decode = false;
    std::printf("kernels: %s\n\n", isa_name(kt.stream.isa));
    const DType types[] = {DType::Q4_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::Q5_K};
    ThreadPool pool2(2);
    std::printf("Decode GEMV %lld x %lld (cache-fed), median of >= %.0f ms\n\n", (long long)n, (long long)n, min_ms);
    header();
    for (DType t : types) gemv_rows(kt, pool2, t, n, n, min_ms);
    if (dram) {
      std::printf("\nDecode GEMV, ~512 MiB matrices of %lld columns (DRAM-fed)\n\n", (long long)n);
      header();
      for (DType t : types) {
        const double rows = 512.0 * (1 << 20) / double(dtype_row_bytes(t, n));
        gemv_rows(kt, pool2, t, n, int64_t(rows) / kPeriod * kPeriod, min_ms);
      }
    }
    std::printf("\nGEMM %lld x %lld x 64 tokens, GOP/s (2 per weight and token)\n\n", (long long)n, (long long)n);
    std::printf("| type | layout | 1 thr GOP/s | 2 thr GOP/s |\n| --- | --- | ---: | ---: |\n");
    for (DType t : types) gemm_rows(kt, pool2, t, n, n, min_ms);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
