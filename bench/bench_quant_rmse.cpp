// Prints the "Quantization error (RMSE)" table of docs/PERF.md: per type, our reference quantizer
// vs llama.cpp's (the shared tiny-llama-256 files) against the F32 originals, plus speed.
// Usage: bench_quant_rmse [models_dir]   (default: EDGELLM_SHARED_DATA/models if compiled in)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/gguf/reader.hpp"
#include "edgellm/quant/ref.hpp"

using namespace edgellm;

namespace {

struct Totals {
  double sq_ours = 0, sq_theirs = 0, sq_x = 0;  // sums of squared errors / values
  int64_t n = 0, tensors = 0, identical = 0;
  double quant_seconds = 0;
};

// A tensor's rows quantized by us (timed) and both versions dequantized; accumulates into tot.
void measure(const GgufTensorInfo& theirs, const GgufTensorInfo& f32, Totals& tot) {
  const int64_t row = theirs.ne[0], nrows = theirs.n_elements() / row, n = theirs.n_elements();
  const size_t row_bytes = dtype_row_bytes(theirs.type, row);
  const float* x = reinterpret_cast<const float*>(f32.data);
  std::vector<uint8_t> q(row_bytes * static_cast<size_t>(nrows));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < nrows; ++r) quantize_row(theirs.type, x + r * row, q.data() + r * row_bytes, row);
  tot.quant_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t r = 0; r < nrows; ++r) {
    dequantize_row(theirs.type, q.data() + r * row_bytes, a.data() + r * row, row);
    dequantize_row(theirs.type, theirs.data + r * row_bytes, b.data() + r * row, row);
  }
  for (int64_t i = 0; i < n; ++i) {
    tot.sq_ours += double(a[i] - x[i]) * double(a[i] - x[i]);
    tot.sq_theirs += double(b[i] - x[i]) * double(b[i] - x[i]);
    tot.sq_x += double(x[i]) * double(x[i]);
  }
  tot.n += n;
  tot.tensors += 1;
  tot.identical += std::memcmp(q.data(), theirs.data, q.size()) == 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
#ifdef EDGELLM_SHARED_DATA
    std::string dir = std::string(EDGELLM_SHARED_DATA) + "/models/";
#else
    std::string dir = "../shared/data/models/";
#endif
    if (argc > 1) dir = std::string(argv[1]) + "/";
    const GgufFile ref = GgufFile::open(dir + "tiny-llama-256-f32.gguf");
    std::map<uint32_t, Totals> by_type;  // key: DType id
    for (const char* name : {"F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
      const GgufFile f = GgufFile::open(dir + "tiny-llama-256-" + name + ".gguf");
      for (const GgufTensorInfo& t : f.tensors()) {
        if (t.type == DType::F32 || !can_quantize(t.type)) continue;
        const GgufTensorInfo* r = ref.find_tensor(t.name);
        EDGELLM_CHECK(r && r->type == DType::F32 && r->n_elements() == t.n_elements(), "tensor ", t.name,
                      " of ", name, " has no matching F32 tensor");
        measure(t, *r, by_type[static_cast<uint32_t>(t.type)]);
      }
    }
    std::printf("| type | tensors | elements | RMSE ours | RMSE llama.cpp | ours / llama.cpp | RMSE / RMS | byte-identical | quantize Melem/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& kv : by_type) {
      const Totals& s = kv.second;
      const double ours = std::sqrt(s.sq_ours / s.n), theirs = std::sqrt(s.sq_theirs / s.n);
      std::printf("| %s | %lld | %lld | %.6g | %.6g | %.6f | %.4g | %lld/%lld | %.1f |\n",
                  dtype_name(static_cast<DType>(kv.first)), (long long)s.tensors, (long long)s.n, ours, theirs,
                  theirs > 0 ? ours / theirs : 1.0, ours / std::sqrt(s.sq_x / s.n), (long long)s.identical,
                  (long long)s.tensors, s.n / s.quant_seconds / 1e6);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
