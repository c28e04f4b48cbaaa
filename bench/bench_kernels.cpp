// bench_kernels: GEMV speed per weight type through the process's KernelTable (best ISA): ns per 256
// weights and GB/s of weights, 1 and 2 threads, on a matrix larger than L2; types with a packed
// (row-interleaved) form get a second row through it. Then the 64-token GEMM (prefill) in GOP/s,
// unpacked vs packed, and with --dram the GEMV of a ~512 MiB matrix (decode is fed from DRAM) for
// the types of the usual mixes (Q4_0, Q8_0, Q2_K, Q3_K, Q4_K, Q6_K). --iq: only the GEMV table of the
// i-quants (their decode kernels), then for those with a transcoded form the GEMM and with --dram
// the DRAM-fed GEMV, file form against transcoded.
// Matrices live in anonymous huge-page memory, as the loader's repacked weights do. Prints
// markdown tables. Usage: bench_kernels [n_in n_out] [--min-ms MS] [--dram] [--iq]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// A matrix of n_out rows built from 64 distinct quantized rows (contents do not change the speed;
// quantizing 16M weights with the quality quantizers would take longer than the benchmark).
AnonymousMemory make_matrix(DType t, int64_t n_in, int64_t n_out) {
  constexpr int kDistinct = 64;
  const size_t rb = dtype_row_bytes(t, n_in);
  AnonymousMemory w(rb * size_t(n_out));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(n_in));
  const bool random_bytes = !can_quantize(t);  // i-quants: bytes are as fast as any quantized row
  for (int r = 0; r < kDistinct && r < n_out; ++r) {
    if (random_bytes) {
      for (size_t b = 0; b < rb; ++b) w.data()[rb * size_t(r) + b] = uint8_t(rng());
      continue;
    }
    for (auto& v : f) v = d(rng);
    quantize_row(t, f.data(), w.data() + rb * size_t(r), n_in);
  }
  for (int64_t r = kDistinct; r < n_out; ++r) std::memcpy(w.data() + rb * size_t(r), w.data() + rb * size_t(r % kDistinct), rb);
  return w;
}

// w's rows as packed groups of pf, back to back (what LlamaWeights::repack_matrices makes).
AnonymousMemory pack_matrix(const PackedFormat& pf, const MatmulWeight& w) {
  const size_t gb = pf.group_bytes(w.n_in);
  AnonymousMemory out(gb * size_t((w.n_out + pf.rows - 1) / pf.rows));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r0 = 0, g = 0; r0 < w.n_out; r0 += pf.rows, ++g)
    pf.pack(src + size_t(r0) * w.row_bytes, w.row_bytes, int(std::min<int64_t>(pf.rows, w.n_out - r0)), w.n_in,
            out.data() + size_t(g) * gb);
  return out;
}

// Median seconds of one matmul of n_tok rows (activation quantization included), after a warm-up.
double time_matmul(const KernelTable& kt, ThreadPool* pool, const MatmulWeight& mw, const float* x, int64_t n_tok,
                   float* y, double min_ms) {
  matmul(kt, pool, mw, x, n_tok, y);
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  while (times.size() < 5 ||
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < min_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul(kt, pool, mw, x, n_tok, y);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// One GEMV table row: ns per 256 weights and GB/s of the bytes read, 1 and 2 threads.
void gemv_row(const KernelTable& kt, ThreadPool& pool2, const char* name, const char* variant, const MatmulWeight& mw,
              double bytes, const float* x, float* y, double min_ms) {
  const double units = double(mw.n_in) * double(mw.n_out) / 256.0;
  const double t1 = time_matmul(kt, nullptr, mw, x, 1, y, min_ms);
  const double t2 = time_matmul(kt, &pool2, mw, x, 1, y, min_ms);
  std::printf("| %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f |\n", name, variant, bytes / (1 << 20), t1 * 1e9 / units,
              bytes / t1 / 1e9, t2 * 1e9 / units, bytes / t2 / 1e9);
  std::fflush(stdout);
}

void gemv_header() {
  std::printf("| type | variant | MiB | 1 thr ns/256w | 1 thr GB/s | 2 thr ns/256w | 2 thr GB/s |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
}

// The unpacked GEMV row of type t, then its packed row when kt has a packed form of t.
void gemv_rows(const KernelTable& kt, ThreadPool& pool2, DType t, int64_t n_in, int64_t n_out, const float* x,
               float* y, double min_ms) {
  AnonymousMemory w = make_matrix(t, n_in, n_out);
  MatmulWeight mw{t, w.data(), n_in, n_out, dtype_row_bytes(t, n_in)};
  gemv_row(kt, pool2, dtype_name(t), kt.of(t).variant, mw, double(w.size()), x, y, min_ms);
  const PackedFormat& pf = kt.packed_of(t);
  if (pf.rows == 0 || n_in % 32 != 0) return;
  AnonymousMemory p = pack_matrix(pf, mw);
  w = AnonymousMemory();  // the DRAM matrices are large: hold one copy at a time
  mw.data = nullptr;
  mw.packed = p.data();
  mw.pf = &pf;
  const std::string name = std::string(dtype_name(t)) + " packed";
  gemv_row(kt, pool2, name.c_str(), pf.name, mw, double(p.size()), x, y, min_ms);
}

// GEMM of n_tok tokens, unpacked (matmul's prefill path) vs packed: GOP/s (2 ops per weight and
// token), 1 and 2 threads.
void gemm_rows(const KernelTable& kt, ThreadPool& pool2, DType t, int64_t n_in, int64_t n_out, int64_t n_tok,
               const float* x, float* y, double min_ms) {
  const AnonymousMemory w = make_matrix(t, n_in, n_out);
  MatmulWeight mw{t, w.data(), n_in, n_out, dtype_row_bytes(t, n_in)};
  const double ops = 2.0 * double(n_in) * double(n_out) * double(n_tok);
  auto row = [&](const char* layout, const char* variant) {
    const double t1 = time_matmul(kt, nullptr, mw, x, n_tok, y, min_ms);
    const double t2 = time_matmul(kt, &pool2, mw, x, n_tok, y, min_ms);
    std::printf("| %s | %s | %s | %.1f | %.1f |\n", dtype_name(t), layout, variant, ops / t1 / 1e9, ops / t2 / 1e9);
    std::fflush(stdout);
  };
  row("rows", kt.of(t).variant);
  const PackedFormat& pf = kt.packed_of(t);
  if (pf.rows == 0 || n_in % 32 != 0) return;
  const AnonymousMemory p = pack_matrix(pf, mw);
  mw.packed = p.data();
  mw.pf = &pf;
  row("packed", pf.name);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_in = 4096, n_out = 4096;
  double min_ms = 300.0;
  bool dram = false, iq = false;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) min_ms = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--dram") == 0) dram = true;
    else if (std::strcmp(argv[i], "--iq") == 0) iq = true;
    else pos.push_back(argv[i]);
  }
  if (pos.size() == 2) n_in = std::atoll(pos[0].c_str()), n_out = std::atoll(pos[1].c_str());
  try {
    const KernelTable& kt = kernels();
    ThreadPool pool2(2);
    std::fprintf(stderr, "%s", describe_kernels(kt).c_str());
    std::printf("GEMV %lld x %lld (n_out x n_in), median of >= %.0f ms\n\n", (long long)n_out, (long long)n_in, min_ms);
    gemv_header();
    const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F16,  DType::BF16, DType::F32};
    constexpr int64_t kGemmTokens = 64;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n_in * kGemmTokens)), y(static_cast<size_t>(n_out * kGemmTokens));
    for (auto& v : x) v = d(rng);
    if (iq) {
      const DType iq_types[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                                DType::IQ4_XS,  DType::IQ4_NL, DType::IQ1_S, DType::IQ1_M,   DType::TQ1_0};
      for (DType t : iq_types) gemv_rows(kt, pool2, t, n_in, n_out, x.data(), y.data(), min_ms);
      // the types with a transcoded form (kernels/layouts/transcoded_iquants.hpp): prefill, and with
      // --dram their GEMV fed from DRAM
      std::printf("\nGEMM %lld x %lld x %lld tokens, GOP/s (2 per weight and token)\n\n", (long long)n_out,
                  (long long)n_in, (long long)kGemmTokens);
      std::printf("| type | layout | variant | 1 thr GOP/s | 2 thr GOP/s |\n| --- | --- | --- | ---: | ---: |\n");
      for (DType t : iq_types)
        if (kt.packed_of(t).rows > 0) gemm_rows(kt, pool2, t, n_in, n_out, kGemmTokens, x.data(), y.data(), min_ms);
      if (dram) {
        std::printf("\nDRAM-fed GEMV: ~512 MiB matrices of %lld columns\n\n", (long long)n_in);
        gemv_header();
        for (DType t : iq_types) {
          if (kt.packed_of(t).rows == 0) continue;
          const int64_t rows = int64_t(512.0 * (1 << 20) / double(dtype_row_bytes(t, n_in)));
          std::vector<float> yd(static_cast<size_t>(rows));
          gemv_rows(kt, pool2, t, n_in, rows, x.data(), yd.data(), min_ms);
        }
      }
      return 0;
    }
    for (DType t : types) {
      if (n_in % dtype_block_size(t) != 0) continue;
      gemv_rows(kt, pool2, t, n_in, n_out, x.data(), y.data(), min_ms);
    }

    std::printf("\nGEMM %lld x %lld x %lld tokens, GOP/s (2 per weight and token)\n\n", (long long)n_out,
                (long long)n_in, (long long)kGemmTokens);
    std::printf("| type | layout | variant | 1 thr GOP/s | 2 thr GOP/s |\n| --- | --- | --- | ---: | ---: |\n");
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q2_K, DType::Q4_K, DType::Q6_K})
      gemm_rows(kt, pool2, t, n_in, n_out, kGemmTokens, x.data(), y.data(), min_ms);

    if (dram) {
      constexpr double kDramBytes = 512.0 * (1 << 20);
      std::printf("\nDRAM-fed GEMV: ~512 MiB matrices of %lld columns\n\n", (long long)n_in);
      gemv_header();
      for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q6_K}) {
        const int64_t rows = int64_t(kDramBytes / double(dtype_row_bytes(t, n_in)));
        std::vector<float> yd(static_cast<size_t>(rows));
        gemv_rows(kt, pool2, t, n_in, rows, x.data(), yd.data(), min_ms);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
