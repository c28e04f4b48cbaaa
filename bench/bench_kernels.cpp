// bench_kernels: GEMV speed per weight type through the process's KernelTable (best ISA): ns per 256
// weights and GB/s of weights, 1 and 2 threads, on a matrix larger than L2. Prints a markdown table.
// Usage: bench_kernels [n_in n_out] [--min-ms MS]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"
#include "edgellm/runtime/thread_pool.hpp"

using namespace edgellm;

namespace {

// A matrix of n_out rows built from 64 distinct quantized rows (contents do not change the speed;
// quantizing 16M weights with the quality quantizers would take longer than the benchmark).
std::vector<uint8_t> make_matrix(DType t, int64_t n_in, int64_t n_out) {
  constexpr int kDistinct = 64;
  const size_t rb = dtype_row_bytes(t, n_in);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(n_in));
  for (int r = 0; r < kDistinct && r < n_out; ++r) {
    for (auto& v : f) v = d(rng);
    quantize_row(t, f.data(), w.data() + rb * size_t(r), n_in);
  }
  for (int64_t r = kDistinct; r < n_out; ++r) std::memcpy(w.data() + rb * size_t(r), w.data() + rb * size_t(r % kDistinct), rb);
  return w;
}

// Median seconds of one GEMV (activation quantization included), after a warm-up call.
double time_gemv(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& mw, const float* x, float* y,
                 double min_ms) {
  matmul(kt, pool, mw, x, 1, y);
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  while (times.size() < 5 ||
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < min_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul(kt, pool, mw, x, 1, y);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_in = 4096, n_out = 4096;
  double min_ms = 300.0;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) min_ms = std::atof(argv[++i]);
    else pos.push_back(argv[i]);
  }
  if (pos.size() == 2) n_in = std::atoll(pos[0].c_str()), n_out = std::atoll(pos[1].c_str());
  try {
    const KernelTable& kt = kernels();
    ThreadPool pool2(2);
    std::fprintf(stderr, "%s", describe_kernels(kt).c_str());
    std::printf("GEMV %lld x %lld (n_out x n_in), median of >= %.0f ms\n\n", (long long)n_out, (long long)n_in, min_ms);
    std::printf("| type | variant | MiB | 1 thr ns/256w | 1 thr GB/s | 2 thr ns/256w | 2 thr GB/s |\n");
    std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16, DType::F32};
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_out));
    for (auto& v : x) v = d(rng);
    for (DType t : types) {
      if (n_in % dtype_block_size(t) != 0) continue;
      const auto w = make_matrix(t, n_in, n_out);
      const MatmulWeight mw{t, w.data(), n_in, n_out, dtype_row_bytes(t, n_in)};
      const double units = double(n_in) * double(n_out) / 256.0;
      const double bytes = double(w.size());
      const double t1 = time_gemv(kt, nullptr, mw, x.data(), y.data(), min_ms);
      const double t2 = time_gemv(kt, &pool2, mw, x.data(), y.data(), min_ms);
      std::printf("| %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f |\n", dtype_name(t), kt.of(t).variant,
                  bytes / (1 << 20), t1 * 1e9 / units, bytes / t1 / 1e9, t2 * 1e9 / units, bytes / t2 / 1e9);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
