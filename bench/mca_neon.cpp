// Not a benchmark program: bench/mca_neon.sh compiles this to assembly (-S) so that llvm-mca can
// time each NEON kernel's block loop on the Cortex-A55 model. One unmangled symbol per kernel and
// shape: mca_<type> (dotprod, one row), mca_rows_<type> (dotprod, one group of rows_per_call rows),
// mca_v80_<type> and mca_v80_rows_<type> (the ARMv8.0 kernels).
#include "edgellm/kernels/neon/register.hpp"

#if EDGELLM_HAS_NEON
using namespace edgellm::neon;

// Each wrapper calls the kernel's body (the public functions are too large to be inlined into a
// wrapper); a rows wrapper times one group of rows_per_call rows, the loop the public
// VecDotRowsFn runs for every full group.
#define EDGELLM_MCA_ROW(name, ...)                                                               \
  extern "C" __attribute__((noinline)) float name(int n, const void* w, const void* a) {        \
    return __VA_ARGS__(n, w, a);                                                                 \
  }
#define EDGELLM_MCA_ROWS(name, ...)                                                              \
  extern "C" __attribute__((noinline)) void name(int n, float* out, const void* w, size_t stride, \
                                                 const void* a) {                                \
    __VA_ARGS__(n, out, w, stride, a);                                                           \
  }
#define EDGELLM_MCA_LEGACY(t, F)                                 \
  EDGELLM_MCA_ROW(mca_##t, legacy_row<F, DotSdot>)               \
  EDGELLM_MCA_ROWS(mca_rows_##t, legacy_rows4<F, DotSdot>)       \
  EDGELLM_MCA_ROW(mca_v80_##t, legacy_row<F, DotV80>)            \
  EDGELLM_MCA_ROWS(mca_v80_rows_##t, legacy_rows4<F, DotV80>)
#define EDGELLM_MCA_KQUANT(t, K)                                              \
  EDGELLM_MCA_ROW(mca_##t, kquant_row<K, DotSdot>)                            \
  EDGELLM_MCA_ROWS(mca_rows_##t, K::run<DotSdot, kRowsKQuantNeon>)            \
  EDGELLM_MCA_ROW(mca_v80_##t, kquant_row<K, DotV80>)                         \
  EDGELLM_MCA_ROWS(mca_v80_rows_##t, K::run<DotV80, kRowsKQuantNeon>)

EDGELLM_MCA_LEGACY(q4_0, FmtQ4_0)
EDGELLM_MCA_LEGACY(q4_1, FmtQ4_1)
EDGELLM_MCA_LEGACY(q5_0, FmtQ5_0)
EDGELLM_MCA_LEGACY(q5_1, FmtQ5_1)
EDGELLM_MCA_LEGACY(q8_0, FmtQ8_0)
EDGELLM_MCA_KQUANT(q2_K, KQ2)
EDGELLM_MCA_KQUANT(q3_K, KQ3)
EDGELLM_MCA_KQUANT(q4_K, KQ4)
EDGELLM_MCA_KQUANT(q5_K, KQ5)
EDGELLM_MCA_KQUANT(q6_K, KQ6)
#endif
