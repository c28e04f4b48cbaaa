// The tools' conversion table: quant/dequantize.hpp's (every dequantizer, the run-time
// quantizers) plus the reference quantizers of the weight types, which are offline searches
// (quant/quantize.hpp's K-quant scales, quant/quantize_iq.hpp's i-quant grids): quantize_row_fn,
// can_quantize, quantize_row (DType chosen at run time), and an RMSE helper for quality checks.
// The inference path (kernels, model, engine, the umbrella header) does not include this header.
#pragma once
#include <cmath>
#include <cstdint>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/dequantize.hpp"
#include "edgellm/quant/quantize.hpp"
#include "edgellm/quant/quantize_iq.hpp"

namespace edgellm {

// The reference row quantizer of t: the quality one for weight types, the activation rule for
// q8_0 / q8_1 / q8_K (runtime_quantize_row_fn's for the types the model quantizes at run time);
// nullptr where there is none (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M: ggml has no row form of those
// without an imatrix; types without a reference).
inline QuantizeRowFn quantize_row_fn(DType t) {
  using detail::quantize_erased;
  switch (t) {
    case DType::Q2_K: return quantize_erased<block_q2_K, quantize_row_q2_K_ref>;
    case DType::Q3_K: return quantize_erased<block_q3_K, quantize_row_q3_K_ref>;
    case DType::Q4_K: return quantize_erased<block_q4_K, quantize_row_q4_K_ref>;
    case DType::Q5_K: return quantize_erased<block_q5_K, quantize_row_q5_K_ref>;
    case DType::Q6_K: return quantize_erased<block_q6_K, quantize_row_q6_K_ref>;
    case DType::IQ2_S: return quantize_erased<block_iq2_s, quantize_row_iq2_s_ref>;
    case DType::IQ3_XXS: return quantize_erased<block_iq3_xxs, quantize_row_iq3_xxs_ref>;
    case DType::IQ3_S: return quantize_erased<block_iq3_s, quantize_row_iq3_s_ref>;
    case DType::IQ4_NL: return quantize_erased<block_iq4_nl, quantize_row_iq4_nl_ref>;
    case DType::IQ4_XS: return quantize_erased<block_iq4_xs, quantize_row_iq4_xs_ref>;
    case DType::TQ1_0: return quantize_erased<block_tq1_0, quantize_row_tq1_0_ref>;
    case DType::TQ2_0: return quantize_erased<block_tq2_0, quantize_row_tq2_0_ref>;
    default: return runtime_quantize_row_fn(t);
  }
}

inline bool can_quantize(DType t) { return quantize_row_fn(t) != nullptr; }

// y = x[0..k) stored as type t (dtype_row_bytes(t, k) bytes). Throws as dequantize_row.
inline void quantize_row(DType t, const float* x, void* y, int64_t k) {
  const QuantizeRowFn f = quantize_row_fn(t);
  detail::check_row(t, k, f != nullptr, "quantize");
  f(x, y, k);
}

// sqrt(mean((a - b)^2)) over n values, accumulated in double; 0 for n <= 0.
inline double rmse(const float* a, const float* b, int64_t n) {
  if (n <= 0) return 0.0;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = double(a[i]) - double(b[i]);
    s += e * e;
  }
  return std::sqrt(s / double(n));
}

// sqrt(mean(a^2)): the scale RMSE is compared with.
inline double rms(const float* a, int64_t n) {
  if (n <= 0) return 0.0;
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(a[i]);
  return std::sqrt(s / double(n));
}

}  // namespace edgellm
