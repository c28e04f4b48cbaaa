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

// Packed x4 legacy groups (neon/packed.hpp): one token (decode) and a tile of kTokTile tokens
// (prefill), one group of 4 rows; the loop is one pair of 32-weight blocks.
#define EDGELLM_MCA_PACKED(name, W, T)                                                                   \
  extern "C" __attribute__((noinline)) void name(int64_t n, const void* g, const void* a, float* out) { \
    pk::gemm_tile<pk::W, T>(n, static_cast<const uint8_t*>(g), static_cast<const uint8_t*>(a),          \
                            edgellm::packed::act_bytes(n), out, 4);                                      \
  }
EDGELLM_MCA_PACKED(mca_packed_q4_0, Q4Words, 1)
EDGELLM_MCA_PACKED(mca_packed_q8_0, Q8Words, 1)
EDGELLM_MCA_PACKED(mca_packed4_q4_0, Q4Words, pk::kTokTile)
EDGELLM_MCA_PACKED(mca_packed4_q8_0, Q8Words, pk::kTokTile)

EDGELLM_MCA_KQUANT(q2_K, KQ2)
EDGELLM_MCA_KQUANT(q3_K, KQ3)
EDGELLM_MCA_KQUANT(q4_K, KQ4)
EDGELLM_MCA_KQUANT(q5_K, KQ5)
EDGELLM_MCA_KQUANT(q6_K, KQ6)

// i-quants and ternary types (neon/dot_iquants.hpp): one row, the loop is one super-block
// (IQ4_NL: the legacy body, sixteen 32-weight blocks per iteration with dotprod, eight on ARMv8.0,
// and its four-row form; TQ1_0,
// TQ2_0 and where T::kDeferred<D> picks it: deferred_row, each block's reduction in the next
// iteration).
#define EDGELLM_MCA_IQ_ROW(t, T, row)            \
  EDGELLM_MCA_ROW(mca_##t, row<T, DotSdot>)       \
  EDGELLM_MCA_ROW(mca_v80_##t, row<T, DotV80>)
#define EDGELLM_MCA_IQ(t, T) EDGELLM_MCA_IQ_ROW(t, T, picked_row)
EDGELLM_MCA_IQ(iq2_xxs, IQ2XXS)
EDGELLM_MCA_IQ(iq2_xs, IQ2XS)
EDGELLM_MCA_IQ(iq2_s, IQ2S)
EDGELLM_MCA_IQ(iq3_xxs, IQ3XXS)
EDGELLM_MCA_IQ(iq3_s, IQ3S)
EDGELLM_MCA_IQ_ROW(iq1_s, IQ1S, deferred_row)
EDGELLM_MCA_IQ_ROW(iq1_m, IQ1M, deferred_row)
EDGELLM_MCA_IQ(iq4_xs, IQ4XS)
EDGELLM_MCA_IQ_ROW(tq1_0, TQ1, deferred_row)
EDGELLM_MCA_IQ_ROW(tq2_0, TQ2, deferred_row)
EDGELLM_MCA_ROW(mca_iq4_nl, iq4_nl_row<FmtIQ4_NL, DotSdot>)
EDGELLM_MCA_ROWS(mca_rows_iq4_nl, legacy_rows4<FmtIQ4_NL, DotSdot>)
EDGELLM_MCA_ROW(mca_v80_iq4_nl, iq4_nl_row<FmtIQ4_NL, DotV80>)
EDGELLM_MCA_ROWS(mca_v80_rows_iq4_nl, legacy_rows4<FmtIQ4_NL, DotV80>)

// Transcoded i-quant forms (neon/transcoded_iquants.hpp; iq2_s_t runs iq2_xs_t's loops): decode
// (one token: picked_row over the nibble blocks; the loop is one super-block) and the prefill tile of
// kNibbleToks<Nib, D> tokens (the loop is one super-block for all of them).
#define EDGELLM_MCA_NIBBLE_TILE(name, Nib, D)                                                          \
  extern "C" __attribute__((noinline)) void name(int64_t nb, const void* x, const void* a, float* out) { \
    constexpr int T = kNibbleToks<Nib, D>;                                                             \
    const auto* y = static_cast<const edgellm::block_q8_K*>(a);                                        \
    const edgellm::block_q8_K* yt[T];                                                                  \
    for (int t = 0; t < T; ++t) yt[t] = y + t * nb;                                                    \
    float sumf[T];                                                                                     \
    nibble_tile<Nib, D, T>(nb, static_cast<const Nib::Block*>(x), yt, sumf);                            \
    for (int t = 0; t < T; ++t) out[t] = sumf[t];                                                      \
  }
#define EDGELLM_MCA_NIBBLE(t, Nib)                         \
  EDGELLM_MCA_IQ(t, NibbleIq<Nib>)                         \
  EDGELLM_MCA_NIBBLE_TILE(mca_tile_##t, Nib, DotSdot)      \
  EDGELLM_MCA_NIBBLE_TILE(mca_v80_tile_##t, Nib, DotV80)
EDGELLM_MCA_NIBBLE(iq3_s_t, NibIQ3_S)
EDGELLM_MCA_NIBBLE(iq2_xxs_t, NibIQ2_XXS)
EDGELLM_MCA_NIBBLE(iq2_xs_t, NibIQ2_XS)
EDGELLM_MCA_NIBBLE(iq3_xxs_t, NibIQ3_XXS)
EDGELLM_MCA_IQ(iq4_xs_t, IQ4XST)  // iq4_xs_t: decode, one row, and the prefill tile of kIq4XsTToks<D> tokens
#define EDGELLM_MCA_IQ4_XS_T_TILE(name, D)                                                              \
  extern "C" __attribute__((noinline)) void name(int64_t nb, const void* x, const void* a, float* out) { \
    constexpr int T = kIq4XsTToks<D>;                                                                   \
    const edgellm::block_q8_K* yt[T];                                                                   \
    for (int t = 0; t < T; ++t) yt[t] = static_cast<const edgellm::block_q8_K*>(a) + t * nb;            \
    float sumf[T];                                                                                      \
    iq4_xs_t_tile<D, T>(nb, static_cast<const edgellm::block_iq4_xs_t*>(x), yt, sumf);                  \
    for (int t = 0; t < T; ++t) out[t] = sumf[t];                                                       \
  }
EDGELLM_MCA_IQ4_XS_T_TILE(mca_tile_iq4_xs_t, DotSdot)
EDGELLM_MCA_IQ4_XS_T_TILE(mca_v80_tile_iq4_xs_t, DotV80)
#endif

// ---- packed x4 K-quants (neon/packed_kquants.hpp): decode (one token), one group of 4 rows; the
// loop is one super-block of 256 weights x 4 rows (the sub-block loops are fully unrolled).
#include "edgellm/kernels/neon/packed_kquants.hpp"
#if EDGELLM_HAS_NEON
// T = 1: decode; T = 2: the 2-token prefill tile (kToks, both tokens sharing each sub-block's
// unpacking; what 2-3 tokens use).
#define EDGELLM_MCA_PACKED_KQ(name, K, T)                                                              \
  extern "C" __attribute__((noinline)) void name(int64_t n, const void* g, const void* a, float* out) { \
    edgellm::neon::pkq::gemm_tile_body<edgellm::neon::pkq::K, T>(n / QK_K, static_cast<const uint8_t*>(g), \
                                                                 a, 0, out, 4);                        \
  }
EDGELLM_MCA_PACKED_KQ(mca_packed_q2_K, Q2K, 1)
EDGELLM_MCA_PACKED_KQ(mca_packed_q3_K, Q3K, 1)
EDGELLM_MCA_PACKED_KQ(mca_packed_q4_K, Q45K<false>, 1)
EDGELLM_MCA_PACKED_KQ(mca_packed_q5_K, Q45K<true>, 1)
EDGELLM_MCA_PACKED_KQ(mca_packed_q6_K, Q6K, 1)
EDGELLM_MCA_PACKED_KQ(mca_packed2_q2_K, Q2K, 2)
EDGELLM_MCA_PACKED_KQ(mca_packed2_q3_K, Q3K, 2)
EDGELLM_MCA_PACKED_KQ(mca_packed2_q4_K, Q45K<false>, 2)
EDGELLM_MCA_PACKED_KQ(mca_packed2_q5_K, Q45K<true>, 2)
EDGELLM_MCA_PACKED_KQ(mca_packed2_q6_K, Q6K, 2)
// Prefill from unpacked super-blocks (kUnpackMinTokens tokens and more): the loop of a 4-token tile
// over the unpacked super-blocks (dot4, one super-block x 4 tokens per iteration), and the
// unpacking (a super-block per iteration, once per call, shared by all its tokens).
#define EDGELLM_MCA_UNPACKED_KQ(name, unpack_name, K)                                                  \
  extern "C" __attribute__((noinline)) void name(int64_t n, const void* u, const void* a, float* out) { \
    using KK = edgellm::neon::pkq::K;                                                                  \
    const auto* uu = static_cast<const KK::Unpacked*>(u);                                              \
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; \
    const auto* x = static_cast<const edgellm::PackedActQ8K*>(a);                                      \
    const edgellm::PackedActQ8K* xx[4] = {x, x + n, x + 2 * n, x + 3 * n};                              \
    for (int64_t b = 0; b < n; ++b) {                                                                  \
      KK::dot4(uu[b], xx, acc);                                                                        \
      for (int k = 0; k < 4; ++k) ++xx[k];                                                             \
    }                                                                                                  \
    for (int k = 0; k < 4; ++k) vst1q_f32(out + 4 * k, acc[k]);                                        \
  }                                                                                                    \
  extern "C" __attribute__((noinline)) void unpack_name(int64_t n, const void* g, void* u) {           \
    using KK = edgellm::neon::pkq::K;                                                                  \
    const auto* w = static_cast<const uint8_t*>(g);                                                    \
    for (int64_t b = 0; b < n; ++b) KK::unpack(w + size_t(b) * KK::kBytes, static_cast<KK::Unpacked*>(u)[b]); \
  }
EDGELLM_MCA_UNPACKED_KQ(mca_unpacked_q2_K, mca_unpack_q2_K, Q2K)
EDGELLM_MCA_UNPACKED_KQ(mca_unpacked_q3_K, mca_unpack_q3_K, Q3K)
EDGELLM_MCA_UNPACKED_KQ(mca_unpacked_q6_K, mca_unpack_q6_K, Q6K)
EDGELLM_MCA_UNPACKED_KQ(mca_unpacked_q4_K, mca_unpack_q4_K, Q45K<false>)
EDGELLM_MCA_UNPACKED_KQ(mca_unpacked_q5_K, mca_unpack_q5_K, Q45K<true>)
#endif
