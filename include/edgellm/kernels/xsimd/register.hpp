// Registers the xsimd (x86 AVX2/AVX-512) kernels. The only place besides kernels/xsimd/*.hpp that
// may include xsimd, and only when EDGELLM_HAS_XSIMD.
#pragma once
#include "edgellm/kernels/api.hpp"

#if EDGELLM_HAS_XSIMD
namespace edgellm {

inline void register_xsimd_kernels(KernelTable& t) {
  (void)t;  // filled in by the kernels work (issue 3)
}

}  // namespace edgellm
#endif
