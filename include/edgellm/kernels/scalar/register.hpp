// Registers the scalar reference kernels (the spec every SIMD variant is tested against).
#pragma once
#include "edgellm/kernels/api.hpp"

namespace edgellm {

inline void register_ref_kernels(KernelTable& t) {
  (void)t;  // filled in by the kernels work (issue 3)
}

}  // namespace edgellm
