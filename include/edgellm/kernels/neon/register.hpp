// Registers the hand-written NEON kernels (ARMv8.0 and, when asked, dotprod). arm64 only.
#pragma once
#include "edgellm/kernels/api.hpp"

#if EDGELLM_HAS_NEON
namespace edgellm {

inline void register_neon_kernels(KernelTable& t, bool dotprod) {
  (void)t;  // filled in by the NEON kernels work (issue 3)
  (void)dotprod;
}

}  // namespace edgellm
#endif
