// A PackedFormat for Q8_0 that keeps the rows as stored (kStubRows rows per group, the last one
// partial) and runs a table's vec_dot: lets tests drive matmul's and LlamaWeights' packed paths
// on every ISA (ref, NEON) independently of the real interleaved layouts.
#pragma once
#include <cstring>

#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"

namespace edgellm {
namespace test_stub {

constexpr int kStubRows = 5;
// The Q8_0 kernels of the table the stub was made from (copied, so no table need outlive it).
struct StubKernels {
  VecDotFn vec_dot = nullptr;
  FromFloatFn quantize = nullptr;
};
inline StubKernels& stub_kernels() {
  static StubKernels k;
  return k;
}
inline size_t row_bytes(int64_t n) { return dtype_row_bytes(DType::Q8_0, n); }
inline size_t group_bytes(int64_t n) { return kStubRows * row_bytes(n); }
inline void pack(const void* src, size_t src_row_bytes, int count, int64_t n, void* dst) {
  std::memset(dst, 0, group_bytes(n));
  for (int r = 0; r < count; ++r)
    std::memcpy(static_cast<uint8_t*>(dst) + size_t(r) * row_bytes(n),
                static_cast<const uint8_t*>(src) + size_t(r) * src_row_bytes, row_bytes(n));
}
inline void prepare_act(const float* x, int64_t n, void* dst) { stub_kernels().quantize(x, dst, n); }
inline void gemm(int64_t n, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  for (int t = 0; t < ntok; ++t)
    for (int r = 0; r < kStubRows; ++r)
      out[size_t(t) * out_stride + size_t(r)] = stub_kernels().vec_dot(
          int(n), static_cast<const uint8_t*>(group) + size_t(r) * row_bytes(n),
          static_cast<const uint8_t*>(act) + size_t(t) * row_bytes(n));
}

// The stub format; its kernels call `kt`'s Q8_0 vec_dot / quantizer (the last table given).
inline PackedFormat stub_format(const KernelTable& kt) {
  stub_kernels() = {kt.of(DType::Q8_0).vec_dot, kt.of(DType::Q8_0).from_float};
  return PackedFormat{kStubRows, "q8_0-stub", group_bytes, pack, row_bytes, prepare_act, gemm};
}

}  // namespace test_stub
}  // namespace edgellm
