// Not a benchmark program: bench/mca_neon.sh compiles this to assembly (-S) so that llvm-mca can
// time each dotprod kernel's block loop on the Cortex-A55 model. One unmangled symbol per kernel.
#include "edgellm/kernels/neon/register.hpp"

#if EDGELLM_HAS_NEON
#define EDGELLM_MCA_KERNEL(name, fn)                                                             \
  extern "C" __attribute__((noinline)) float name(int n, const void* w, const void* a) {        \
    return edgellm::fn(n, w, a);                                                                 \
  }
EDGELLM_MCA_KERNEL(mca_q4_0, vec_dot_q4_0_q8_0_dotprod)
EDGELLM_MCA_KERNEL(mca_q4_1, vec_dot_q4_1_q8_0_dotprod)
EDGELLM_MCA_KERNEL(mca_q5_0, vec_dot_q5_0_q8_0_dotprod)
EDGELLM_MCA_KERNEL(mca_q5_1, vec_dot_q5_1_q8_0_dotprod)
EDGELLM_MCA_KERNEL(mca_q8_0, vec_dot_q8_0_q8_0_dotprod)
EDGELLM_MCA_KERNEL(mca_q2_K, vec_dot_q2_K_q8_K_dotprod)
EDGELLM_MCA_KERNEL(mca_q3_K, vec_dot_q3_K_q8_K_dotprod)
EDGELLM_MCA_KERNEL(mca_q4_K, vec_dot_q4_K_q8_K_dotprod)
EDGELLM_MCA_KERNEL(mca_q5_K, vec_dot_q5_K_q8_K_dotprod)
EDGELLM_MCA_KERNEL(mca_q6_K, vec_dot_q6_K_q8_K_dotprod)
#endif
