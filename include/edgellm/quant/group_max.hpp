// The signed max rule's first step, shared by the legacy, K-quant and i-quant quantizers: the
// value of largest magnitude in a group (the first one on ties) and that magnitude.
#pragma once
#include <cmath>

namespace edgellm {
namespace detail {

// x[0 .. n): returns the value of largest |x| (0 when all are 0) and stores |that value| in *amax.
inline float signed_max(const float* x, int n, float* amax) {
  float max = 0.0f, best = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > best) {
      best = ax;
      max = x[i];
    }
  }
  *amax = best;
  return max;
}

}  // namespace detail
}  // namespace edgellm
