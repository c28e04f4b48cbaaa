// Compiled to assembly only (include_order_aarch64_gxx, ARMv8.0 target): a NEON kernel with the
// dotprod target attribute followed at once by code in EDGELLM_EXACT_FP_BEGIN / _END (as when a
// NEON header is included before a reference header) must not hand its target to that code or to
// the code after it: the assembly may not name dotprod at all (no *_dotprod function is emitted).
#include "edgellm/kernels/neon/vdot.hpp"
#include "edgellm/quant/exact_fp.hpp"

#if EDGELLM_HAS_NEON
namespace include_order_check {

EDGELLM_TARGET_DOTPROD inline int32x4_t dotprod_kernel(int32x4_t acc, int8x16_t a, int8x16_t b) {
  return edgellm::neon::sdot_s32(acc, a, b);
}

// int8 dot loops: g++ -O3 vectorizes them with sdot when dotprod is on.
EDGELLM_EXACT_FP_BEGIN
inline int int8_dot_exact(const signed char* a, const signed char* b, int n) {
  EDGELLM_EXACT_FP_SCOPE
  int s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
EDGELLM_EXACT_FP_END

inline int int8_dot_after(const signed char* a, const signed char* b, int n) {
  int s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace include_order_check
#endif

// The same with the real headers: the NEON i-quant kernels (ending with a dotprod kernel), then
// the scalar references.
#include "edgellm/kernels/neon/dot_iquants.hpp"
#include "edgellm/kernels/scalar/dot_iquants.hpp"

#if EDGELLM_HAS_NEON
// The checked code is emitted through these addresses.
extern const void* const include_order_emitted[] = {
    reinterpret_cast<const void*>(&include_order_check::int8_dot_exact),
    reinterpret_cast<const void*>(&include_order_check::int8_dot_after),
    reinterpret_cast<const void*>(&edgellm::vec_dot_iq2_xxs_q8_K_ref),
    reinterpret_cast<const void*>(&edgellm::vec_dot_iq4_nl_q8_0_ref),
};
#endif
