// The block walk the scalar reference dot products share (kernels/scalar/dot.hpp, dot_iquants.hpp).
#pragma once
#include "edgellm/config.hpp"
#include "edgellm/quant/exact_fp.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {
namespace detail {

// w holds n / K blocks of type W, a as many activation blocks A (K = A's quants per block); the
// result is the float sum over blocks of term(w block, a block), each term rounded, then added in
// block order (ggml's generic kernels' sumf += ...).
template <class W, class A, class Term>
inline float sum_over_blocks(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a, Term term) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr int kBlock = int(sizeof(A::qs));
  const auto* x = static_cast<const W*>(w);
  const auto* y = static_cast<const A*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / kBlock; ++b) sum += term(x[b], y[b]);
  return sum;
}

}  // namespace detail
}  // namespace edgellm
EDGELLM_EXACT_FP_END
