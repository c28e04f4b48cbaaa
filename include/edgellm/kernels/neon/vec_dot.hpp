// The public NEON dot kernels (VecDotFn / VecDotRowsFn signatures), one instance per format F:
// vec_dot_neon<Body, F> / vec_dot_dotprod<Body, F> for one row and vec_dot_rows_neon /
// vec_dot_rows_dotprod for several, over DotV80 / DotSdot (kernels/neon/vdot.hpp). Body names the
// format's family, whose row body and multi-row driver the kernel runs; kernels/neon/register.hpp
// lists every instance. arm64 only.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <cstddef>
#include <type_traits>

#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/kernels/neon/dot_kquants.hpp"
#include "edgellm/kernels/neon/dot_legacy.hpp"
#include "edgellm/kernels/neon/vdot.hpp"

namespace edgellm {
namespace neon {
struct LegacyBody {};    // legacy_row / legacy_rows (dot_legacy.hpp)
struct KQuantBody {};    // kquant_row / kquant_rows (dot_kquants.hpp)
struct PickedBody {};    // picked_row (dot_iquants.hpp): one row per call
struct DeferredBody {};  // deferred_row (dot_iquants.hpp): one row per call
struct Iq4NlBody {};     // iq4_nl_row / legacy_rows (dot_iquants.hpp)
}  // namespace neon

// The row bodies are called directly from each kernel (not through a shared helper): another
// always-inline layer changes g++'s register allocation in some kernels.
template <class Body, class F>
inline float vec_dot_neon(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  using D = neon::DotV80;
  if constexpr (std::is_same_v<Body, neon::LegacyBody>) return neon::legacy_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::KQuantBody>) return neon::kquant_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::PickedBody>) return neon::picked_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::DeferredBody>) return neon::deferred_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::Iq4NlBody>) return neon::iq4_nl_row<F, D>(n, w, a);
}
template <class Body, class F>
EDGELLM_TARGET_DOTPROD inline float vec_dot_dotprod(int n, const void* EDGELLM_RESTRICT w,
                                                    const void* EDGELLM_RESTRICT a) {
  using D = neon::DotSdot;
  if constexpr (std::is_same_v<Body, neon::LegacyBody>) return neon::legacy_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::KQuantBody>) return neon::kquant_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::PickedBody>) return neon::picked_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::DeferredBody>) return neon::deferred_row<F, D>(n, w, a);
  if constexpr (std::is_same_v<Body, neon::Iq4NlBody>) return neon::iq4_nl_row<F, D>(n, w, a);
}
template <class Body, class F>
inline void vec_dot_rows_neon(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                              const void* EDGELLM_RESTRICT a) {
  using D = neon::DotV80;
  if constexpr (std::is_same_v<Body, neon::KQuantBody>)
    neon::kquant_rows<F, D>(n, out, nrows, w, w_stride, a);
  else  // LegacyBody, Iq4NlBody
    neon::legacy_rows<F, D>(n, out, nrows, w, w_stride, a);
}
template <class Body, class F>
EDGELLM_TARGET_DOTPROD inline void vec_dot_rows_dotprod(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                                        size_t w_stride, const void* EDGELLM_RESTRICT a) {
  using D = neon::DotSdot;
  if constexpr (std::is_same_v<Body, neon::KQuantBody>)
    neon::kquant_rows<F, D>(n, out, nrows, w, w_stride, a);
  else  // LegacyBody, Iq4NlBody
    neon::legacy_rows<F, D>(n, out, nrows, w, w_stride, a);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
