// The public NEON dot kernels (VecDotFn / VecDotRowsFn signatures), one instance per format F:
// vec_dot_neon<Body, F> / vec_dot_dotprod<Body, F> for one row and vec_dot_rows_neon /
// vec_dot_rows_dotprod for several, over DotV80 / DotSdot (kernels/neon/vdot.hpp). Body names the
// format's family, whose row body and multi-row driver the kernel runs; kernels/neon/register.hpp
// lists every instance. arm64 only.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <cstddef>

#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/kernels/neon/dot_kquants.hpp"
#include "edgellm/kernels/neon/dot_legacy.hpp"
#include "edgellm/kernels/neon/vdot.hpp"

namespace edgellm {
namespace neon {
// A format family: its row body (VecDotFn) and, where it has one, its multi-row driver (VecDotRowsFn),
// as pointers to the always-inline bodies (called directly: a wrapper function in between changes
// g++'s register allocation in some kernels).
struct LegacyBody {  // dot_legacy.hpp
  template <class F, class D>
  static constexpr auto row = &legacy_row<F, D>;
  template <class F, class D>
  static constexpr auto rows = &legacy_rows<F, D>;
};
struct KQuantBody {  // dot_kquants.hpp
  template <class F, class D>
  static constexpr auto row = &kquant_row<F, D>;
  template <class F, class D>
  static constexpr auto rows = &kquant_rows<F, D>;
};
struct PickedBody {  // dot_iquants.hpp: one row per call
  template <class F, class D>
  static constexpr auto row = &picked_row<F, D>;
};
struct DeferredBody {  // dot_iquants.hpp: one row per call
  template <class F, class D>
  static constexpr auto row = &deferred_row<F, D>;
};
struct Iq4NlBody : LegacyBody {  // dot_iquants.hpp: IQ4_NL's row driver, the legacy rows
  template <class F, class D>
  static constexpr auto row = &iq4_nl_row<F, D>;
};
}  // namespace neon

template <class Body, class F>
inline float vec_dot_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return Body::template row<F, neon::DotV80>(n, w, a);
}
template <class Body, class F>
EDGELLM_TARGET_DOTPROD inline float vec_dot_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                    const void* EDGELLM_RESTRICT a) {
  return Body::template row<F, neon::DotSdot>(n, w, a);
}
template <class Body, class F>
inline void vec_dot_rows_neon(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                              const void* EDGELLM_RESTRICT a) {
  Body::template rows<F, neon::DotV80>(n, out, nrows, w, w_stride, a);
}
template <class Body, class F>
EDGELLM_TARGET_DOTPROD inline void vec_dot_rows_dotprod(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                                        size_t w_stride, const void* EDGELLM_RESTRICT a) {
  Body::template rows<F, neon::DotSdot>(n, out, nrows, w, w_stride, a);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
