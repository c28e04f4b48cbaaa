// The float model of a dot against Q8_1 activations (q4_1 / q5_1 weights, as ggml computes it): per
// block d_w * q_w . d_a * q_a + m_w * s_a, where s_a = fp16(d * sum q) was made with the unrounded
// d, so it is not the sum of the dequantized activations (d rounded to fp16 first). A test's float
// dot of dequantized rows plus q8_1_min_correction(...) is that model.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref.hpp"

namespace edgellm_test {

// Sum over blocks of m_w * (s_a - sum of the block's dequantized activations a_deq); 0 unless the
// activations at are Q8_1. w: one row of n weights of type wt, a: its Q8_1 activation row.
inline double q8_1_min_correction(edgellm::DType wt, const void* w, edgellm::DType at, const void* a,
                                  const float* a_deq, int64_t n) {
  using namespace edgellm;
  if (at != DType::Q8_1) return 0.0;
  const auto* y = static_cast<const block_q8_1*>(a);
  double c = 0.0;
  for (int64_t b = 0; b < n / QK8_1; ++b) {
    float m = 0.0f;
    if (wt == DType::Q4_1) m = fp16_to_fp32(static_cast<const block_q4_1*>(w)[b].m);
    else if (wt == DType::Q5_1) m = fp16_to_fp32(static_cast<const block_q5_1*>(w)[b].m);
    else throw_error("q8_1_min_correction: ", dtype_name(wt), " weights have no Q8_1 model");
    double sum = 0.0;
    for (int j = 0; j < QK8_1; ++j) sum += a_deq[b * QK8_1 + j];
    c += double(m) * (double(fp16_to_fp32(y[b].s)) - sum);
  }
  return c;
}

// The float model of dot(w, a) for one row of n weights of type wt and its activation row a of
// type at: the dequantized rows' dot in double (plus q8_1_min_correction). Returns sum |w_i * a_i|
// of the dequantized rows, the scale tests measure a dot's error against.
inline double abs_dot_dequantized(edgellm::DType wt, const void* w, edgellm::DType at, const void* a, int n,
                                  double* dot) {
  std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
  edgellm::dequantize_row(wt, w, fw.data(), n);
  edgellm::dequantize_row(at, a, fa.data(), n);
  double s = 0.0, d = 0.0;
  for (size_t i = 0; i < size_t(n); ++i) {
    s += std::fabs(double(fw[i]) * fa[i]);
    d += double(fw[i]) * fa[i];
  }
  *dot = d + q8_1_min_correction(wt, w, at, a, fa.data(), n);
  return s;
}

}  // namespace edgellm_test
