// NEON dotprod GEMMs of the row-interleaved K-quant groups at 4 rows (layouts, packers and the oracle
// in kernels/layouts/packed_kquants.hpp; the AVX-512 forms in kernels/x86/packed_kquants_x16-inl.hpp).
// One int32 lane = one weight row: the by-element sdot (vd.4s += vn.16b . vm.4b[lane]) adds a quad
// of 4 weights x 4 rows against 4 activation bytes straight into the rows' lanes, so there are no
// horizontal sums, each sub-block scale is applied to the 4 rows with one vector multiply, and the
// mins / fixed offsets go through the activation's bsums. The stored quants are all in [0, 64), so
// they are valid signed bytes for sdot. arm64 only; sdot via sdot_lane_s32 (neon/vdot.hpp), so a
// baseline (-march=armv8-a) build compiles them too and only registers them on a dotprod CPU.
#pragma once
#include "edgellm/config.hpp"

#if EDGELLM_HAS_NEON
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/neon/quantize.hpp"
#include "edgellm/kernels/neon/vdot.hpp"
#include "edgellm/kernels/layouts/packed_kquants.hpp"

// A lambda's body is a function of its own that does not inherit EDGELLM_TARGET_DOTPROD: it must be
// inlined into the kernel so that its sdot is assembled inside a dotprod function.
#define EDGELLM_PKQ_LAMBDA_INLINE __attribute__((always_inline))

namespace edgellm {
namespace neon::pkq {

constexpr int kRows = 4;  // rows per group: the int32 lanes of a q-register
// Tokens that share one unpack of a sub-block's weights in prefill. 2, not 4: with g++ 12 the 4-token
// tiles spilled heavily inside the super-block loop (q3_K ~490 stack accesses in the tile function,
// q5_K ~300, q2_K ~290) while the 2-token tiles stay within about 20-75, mostly outside the loop.
constexpr int kToks = 2;

// f(std::integral_constant<int, I>) for I = 0 .. N-1: the sub-block and quad loops, unrolled with
// their indices as constants (sdot lanes, dup lanes and shift counts must be immediates).
template <class F, int... I>
EDGELLM_NEON_INLINE void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
EDGELLM_NEON_INLINE void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

EDGELLM_NEON_INLINE int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

// Every byte shifted left by S (S > 0), right by -S (S < 0), or not at all.
template <int S>
EDGELLM_NEON_INLINE uint8x16_t shift_bytes(uint8x16_t v) {
  if constexpr (S > 0) return vshlq_n_u8(v, S);
  else if constexpr (S < 0) return vshrq_n_u8(v, -S);
  else return v;
}

// Lane L of a 32-bit view of v broadcast to all 4 lanes.
template <int L>
EDGELLM_NEON_INLINE int32x4_t dup_lane(int32x4_t v) { return vdupq_laneq_s32(v, L); }

// The 4 rows' fp16 d (and dmin, 8 bytes later) as floats.
EDGELLM_NEON_INLINE float32x4_t load_d(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
}

// -2^kShift * bsums[g] of one activation block as int32, lanes g % 4 of out[g / 4]: the starting value of
// sub-block g's sdot chain folds the fixed offset (q3_K 4 = 2^2, q6_K 32 = 2^5) into the dot itself:
// dot(q - o, y) = dot(q, y) - o * sum(y).
template <int kShift>
EDGELLM_NEON_INLINE void offset_starts(const PackedActQ8K* x, int32x4_t (&out)[4]) {
  const int16x8_t b0 = vld1q_s16(x->q.bsums), b1 = vld1q_s16(x->q.bsums + 8);
  out[0] = vnegq_s32(vshll_n_s16(vget_low_s16(b0), kShift));
  out[1] = vnegq_s32(vshll_high_n_s16(b0, kShift));
  out[2] = vnegq_s32(vshll_n_s16(vget_low_s16(b1), kShift));
  out[3] = vnegq_s32(vshll_high_n_s16(b1, kShift));
}

// Two 16-weight sub-block sums a, b (int32 per row, each |sum| < 2^15) times their scales, for
// q2_K / q3_K whose per-row scale pairs are stored [row][2]: trn1 makes the int16 pairs (a_r, b_r) in
// the scales' order, then one smlal per 2 rows. acc_lo holds rows 0, 1 and acc_hi rows 2, 3 as
// (a, b) product pairs; vpaddq_s32(acc_lo, acc_hi) at the end gives the 4 rows' sums.
EDGELLM_NEON_INLINE void mla_pair16(int32x4_t& acc_lo, int32x4_t& acc_hi, int32x4_t a, int32x4_t b, int16x8_t pairs) {
  const int16x8_t ab = vtrn1q_s16(vreinterpretq_s16_s32(a), vreinterpretq_s16_s32(b));
  acc_lo = vmlal_s16(acc_lo, vget_low_s16(ab), vget_low_s16(pairs));
  acc_hi = vmlal_high_s16(acc_hi, ab, pairs);
}

// The sums of two 16-weight units (quads qa[0..3] against lanes 0..3 of ya; qb, yb), added to sa / sb:
// two sub-blocks of one token (decode) or one sub-block of two tokens (prefill), as four chains.
EDGELLM_NEON_INLINE void dot_units16(int32x4_t& sa, int32x4_t& sb, const int8x16_t qa[4], const int8x16_t qb[4],
                                     int8x16_t ya, int8x16_t yb) {
  int32x4_t a1 = vdupq_n_s32(0), b1 = vdupq_n_s32(0);
  sdot_4chains2(sa, a1, sb, b1, qa, qb, ya, yb);
  sa = vaddq_s32(sa, a1);
  sb = vaddq_s32(sb, b1);
}

// dots[h][t] = start(h, t) + sub-block 2p + h (quads q[h]) . token t's activations a[h][t], for T = 1 or 2.
template <int T, class Start>
EDGELLM_NEON_INLINE void dot_pair16(int32x4_t (&dots)[2][T], const int8x16_t (&q)[2][4], const int8x16_t (&a)[2][T],
                                    Start&& start) {
  static_assert(T == 1 || T == 2, "token tiles of 1 or 2");
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < T; ++t) dots[h][t] = start(h, t);
  if constexpr (T == 1) {
    dot_units16(dots[0][0], dots[1][0], q[0], q[1], a[0][0], a[1][0]);
  } else {
    dot_units16(dots[0][0], dots[0][1], q[0], q[0], a[0][0], a[0][1]);
    dot_units16(dots[1][0], dots[1][1], q[1], q[1], a[1][0], a[1][1]);
  }
}

// Sub-blocks 2P, 2P + 1 of format K (16 weights each, quads by K::sub_block_quads with mask m)
// against T tokens: dots[h][t] = start(h, t) + sub-block 2P + h . token t's activations.
template <class K, int P, int T, class Start>
EDGELLM_NEON_INLINE void pair16_dots(const uint8_t* sb, const PackedActQ8K* const (&x)[T], uint8x16_t m,
                                     Start&& start, int32x4_t (&dots)[2][T]) {
  int8x16_t q[2][4], a[2][T];
  static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
    constexpr int g = 2 * P + H;
    K::sub_block_quads(sb + K::kQs + g * K::kSubBytes, m, q[H]);
    for (int t = 0; t < T; ++t) a[H][t] = vld1q_s8(x[t]->q.qs + 16 * g);
  });
  dot_pair16<T>(dots, q, a, std::forward<Start>(start));
}

// Four 16-weight sub-blocks of one token, one sdot chain each, round-robin: d[k] += quads q[k][0..3]
// . lanes 0..3 of a[k]. The caller presets d (zero or the sub-block's offset term).
EDGELLM_NEON_INLINE void dot4_sub16(int32x4_t (&d)[4], const int8x16_t (&q)[4][4], const int8x16_t (&a)[4]) {
  const int8x16_t wa[8] = {q[0][0], q[0][1], q[0][2], q[0][3], q[1][0], q[1][1], q[1][2], q[1][3]};
  const int8x16_t wb[8] = {q[2][0], q[2][1], q[2][2], q[2][3], q[3][0], q[3][1], q[3][2], q[3][3]};
  sdot_4chains(d[0], d[1], d[2], d[3], wa, wb, a[0], a[1], a[2], a[3]);
}

// c[k] += quads q[0..3] . lanes 0..3 of y[k] for the four tokens k: one 16-weight unit of 4 rows
// against 4 tokens, one sdot chain per token.
EDGELLM_NEON_INLINE void dot_quads_4tok(int32x4_t (&c)[4], const int8x16_t (&q)[4], const int8x16_t (&y)[4]) {
  sdot_4tok<0>(c, q[0], y);
  sdot_4tok<1>(c, q[1], y);
  sdot_4tok<2>(c, q[2], y);
  sdot_4tok<3>(c, q[3], y);
}

// Prefill from unpacked super-blocks: every type here has `Unpacked`, `unpack(sb, u)` and
// `dot4(u, x[4], sum[4])`; each super-block is unpacked once per call (quads as int8 vectors,
// scales ready), then dotted against 4 tokens at a time: each quad vector is loaded once per 4
// tokens and feeds four sdot chains (sdot_4tok), one per token. The 2-token tiles instead unpack
// per pair of tokens. From kUnpackMinTokens tokens on.
constexpr int kUnpackMinTokens = 4;

// A 16-weight-sub-block super-block (q3_K, q6_K) unpacked: quads, each sub-block's scale as int32 x
// 4 rows, d.
struct Unpacked16 {
  int8x16_t q[16][4];
  int32x4_t sc[16];
  float32x4_t d;
};

// Four tokens against an Unpacked16 whose stored quants carry an offset of 2^kShift (q3_K 4, q6_K 32):
// per sub-block the four token chains start at -2^kShift * bsum, take the four quads by lane, and
// are added into isum times the sub-block's scale; sum[k] += d8 * d * isum, the decode path's order.
template <int kShift>
EDGELLM_NEON_INLINE void dot4_offset(const Unpacked16& u, const PackedActQ8K* const (&x)[4], float32x4_t (&sum)[4]) {
  int32x4_t isum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
  static_for<4>([&](auto Q) EDGELLM_PKQ_LAMBDA_INLINE {  // sub-blocks 4Q .. 4Q + 3
    int32x4_t st[4];
    for (int k = 0; k < 4; ++k) st[k] = vnegq_s32(vshll_n_s16(vld1_s16(x[k]->q.bsums + 4 * Q), kShift));
    static_for<4>([&](auto K) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int g = 4 * Q + K;
      int8x16_t y[4];
      int32x4_t d[4];
      for (int k = 0; k < 4; ++k) {
        y[k] = vld1q_s8(x[k]->q.qs + 16 * g);
        d[k] = dup_lane<K>(st[k]);
      }
      dot_quads_4tok(d, u.q[g], y);
      for (int k = 0; k < 4; ++k) isum[k] = vmlaq_s32(isum[k], d[k], u.sc[g]);
    });
  });
  for (int k = 0; k < 4; ++k) sum[k] = vfmaq_f32(sum[k], vmulq_n_f32(u.d, x[k]->q.d), vcvtq_f32_s32(isum[k]));
}

// The super-block header q3_K and q6_K share (layouts/packed_kquants.hpp): the rows' fp16 d, then
// their signed 8-bit scales [pair of sub-blocks][row][2], then the quants from kQs, stored with an
// offset of 2^Shift that each sdot chain starts from (offset_starts); prefill unpacks to Unpacked16.
template <int Shift>
struct OffsetFormat {
  static constexpr int kScales = 2 * kRows;  // i8 sc[8][Rows][2]
  static constexpr int kQs = 18 * kRows;
  static constexpr int kQuadBytes = 4 * kRows;
  static constexpr int kOffsetShift = Shift;

  using Unpacked = Unpacked16;
  static EDGELLM_NEON_INLINE void dot4(const Unpacked& u, const PackedActQ8K* const (&x)[4], float32x4_t (&sum)[4]) {
    dot4_offset<Shift>(u, x, sum);
  }
};

// ---- Q4_K / Q5_K ----
// Per sub-block of 32 weights: 4 quad vectors (low nibble = weights 4j..4j+3, high = 16 + 4j..),
// 8 sdot into two chains (low / high half, against activation lanes j of two vectors), one mla with
// the 4 rows' scales. Q5_K (kHigh): a fifth-bit vector after the 4 quad vectors.
template <bool kHigh>
struct Q45K {
  static constexpr size_t kBytes = kHigh ? packed_k::q5_K_bytes(kRows) : packed_k::q4_K_bytes(kRows);
  static constexpr int kScales = 4 * kRows;   // u8 sc[8][Rows]
  static constexpr int kMins = 12 * kRows;    // u8 mn[4][Rows][2]
  static constexpr int kQs = 20 * kRows;      // sub-blocks from here
  static constexpr int kSubBytes = (kHigh ? 20 : 16) * kRows;
  static constexpr int kQuadBytes = 4 * kRows;  // one quad vector: 4 rows x 4 bytes

  // Sub-blocks unpacked together: U * T independent sdot chains x 2 (low / high halves) give the
  // in-order A55 work between dependent sdots (4 cycles apart on llvm-mca's model); U = 4 runs out
  // of registers (docs/PERF.md, "Kernel constants").
  template <int T>
  static constexpr int kU = T >= 2 ? 1 : 2;

  // Quad j of a sub-block from its quad vector v (and, Q5_K, its fifth-bit vector hb): l = weights
  // 4j.., h = 16 + 4j.. of the sub-block, as bytes in [0, 16) (Q5_K [0, 32)).
  template <int j>
  static EDGELLM_NEON_INLINE void quad_pair(uint8x16_t v, uint8x16_t hb, uint8x16_t m4, uint8x16_t m5, uint8x16_t bit4,
                                            uint8x16_t& l, uint8x16_t& h) {
    if constexpr (kHigh) {
      // bit 0 of xj = fifth bit of the low quad j, bit 4 = of the high quad j
      const uint8x16_t xj = shift_bytes<-j>(hb);
      h = vsriq_n_u8(vandq_u8(xj, bit4), v, 4);  // v >> 4 | (xj & 0x10)
      l = vandq_u8(vsliq_n_u8(v, xj, 4), m5);    // (v & 15) | xj << 4, bits 5.. cleared
    } else {
      (void)hb, (void)m5, (void)bit4;
      l = vandq_u8(v, m4);
      h = vshrq_n_u8(v, 4);
    }
  }

  // The 8 sub-blocks' mins as int16, 4 rows x 2 sub-blocks per vector: m[0] = sub-blocks 0, 2,
  // m[1] = 1, 3, m[2] = 4, 6, m[3] = 5, 7 (uzp1 / uzp2 split [pair][row][2]; not vld2q: g++ 12 sends
  // its register pair through the stack).
  static EDGELLM_NEON_INLINE void mins16(const uint8_t* sb, int16x8_t (&m)[4]) {
    const uint8x16_t mn0 = vld1q_u8(sb + kMins), mn1 = vld1q_u8(sb + kMins + 16);
    const uint8x16_t even = vuzp1q_u8(mn0, mn1), odd = vuzp2q_u8(mn0, mn1);
    m[0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(even)));
    m[1] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(odd)));
    m[2] = vreinterpretq_s16_u16(vmovl_high_u8(even));
    m[3] = vreinterpretq_s16_u16(vmovl_high_u8(odd));
  }
  // sum += d8 * (d * isum - dmin * msum), msum = the mins against the activation's sums per 32 (b).
  static EDGELLM_NEON_INLINE void finish(float32x4_t d, float32x4_t dmin, const int16x8_t (&m)[4], int16x8_t b,
                                         float d8, int32x4_t isum, float32x4_t& sum) {
    int32x4_t ms = vmull_laneq_s16(vget_low_s16(m[0]), b, 0);
    ms = vmlal_laneq_s16(ms, vget_low_s16(m[1]), b, 1);
    ms = vmlal_high_laneq_s16(ms, m[0], b, 2);
    ms = vmlal_high_laneq_s16(ms, m[1], b, 3);
    ms = vmlal_laneq_s16(ms, vget_low_s16(m[2]), b, 4);
    ms = vmlal_laneq_s16(ms, vget_low_s16(m[3]), b, 5);
    ms = vmlal_high_laneq_s16(ms, m[2], b, 6);
    ms = vmlal_high_laneq_s16(ms, m[3], b, 7);
    // the per-row ref's order (the two terms often nearly cancel)
    const float32x4_t v = vfmsq_f32(vmulq_f32(d, vcvtq_f32_s32(isum)), dmin, vcvtq_f32_s32(ms));
    sum = vfmaq_n_f32(sum, v, d8);
  }

  // Prefill form (see Unpacked16): quads q[s][0][j] (low nibbles) / q[s][1][j] (high) of each
  // sub-block s, the scales as int32, the mins, d and dmin.
  struct Unpacked {
    int8x16_t q[8][2][4];
    int32x4_t sc[8];
    int16x8_t mins[4];
    float32x4_t d, dmin;
  };
  static EDGELLM_NEON_INLINE void unpack(const uint8_t* sb, Unpacked& u) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m5 = vdupq_n_u8(0x1F), bit4 = vdupq_n_u8(0x10);
    static_for<8>([&](auto S) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int sub = S;
      const uint8_t* p = sb + kQs + sub * kSubBytes;
      const uint8x16_t hb = kHigh ? vld1q_u8(p + 4 * kQuadBytes) : vdupq_n_u8(0);
      static_for<4>([&](auto J) EDGELLM_PKQ_LAMBDA_INLINE {
        uint8x16_t l, h;
        quad_pair<J>(vld1q_u8(p + J * kQuadBytes), hb, m4, m5, bit4, l, h);
        u.q[sub][0][J] = s8(l);
        u.q[sub][1][J] = s8(h);
      });
      u.sc[sub] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vld1_u8(sb + kScales + sub * kRows)))));
    });
    mins16(sb, u.mins);
    u.d = load_d(sb);
    u.dmin = load_d(sb + 2 * kRows);
  }
  // Four tokens: per sub-block one sdot chain per token over its 8 quads (low halves against
  // activation bytes 32s.., high against 32s + 16..), times the sub-block's scale into isum; the
  // decode path's integer sums (lo + hi per sub-block) and float order.
  static EDGELLM_NEON_INLINE void dot4(const Unpacked& u, const PackedActQ8K* const (&x)[4], float32x4_t (&sum)[4]) {
    int32x4_t isum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    static_for<8>([&](auto S) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int sub = S;
      int8x16_t y0[4], y1[4];
      int32x4_t d[4];
      for (int k = 0; k < 4; ++k) {
        y0[k] = vld1q_s8(x[k]->q.qs + 32 * sub);
        y1[k] = vld1q_s8(x[k]->q.qs + 32 * sub + 16);
        d[k] = vdupq_n_s32(0);
      }
      dot_quads_4tok(d, u.q[sub][0], y0);
      dot_quads_4tok(d, u.q[sub][1], y1);
      for (int k = 0; k < 4; ++k) isum[k] = vmlaq_s32(isum[k], d[k], u.sc[sub]);
    });
    static_for<4>([&](auto k) EDGELLM_PKQ_LAMBDA_INLINE {
      finish(u.d, u.dmin, u.mins, vld1q_s16(x[k]->bsums32), x[k]->q.d, isum[k], sum[k]);
    });
  }

  template <int T>
  static EDGELLM_NEON_INLINE void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], float32x4_t (&sum)[T]) {
    constexpr int U = kU<T>;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m5 = vdupq_n_u8(0x1F), bit4 = vdupq_n_u8(0x10);
    // Scales as u16, 2 sub-blocks (x 4 rows) per vector; each widened to int32 where it is used.
    const uint8x16_t sc03 = vld1q_u8(sb + kScales), sc47 = vld1q_u8(sb + kScales + 16);
    const uint16x8_t sc16[4] = {vmovl_u8(vget_low_u8(sc03)), vmovl_high_u8(sc03), vmovl_u8(vget_low_u8(sc47)),
                                vmovl_high_u8(sc47)};
    int32x4_t isum[T][U];
    for (int t = 0; t < T; ++t)
      for (int u = 0; u < U; ++u) isum[t][u] = vdupq_n_s32(0);
    static_for<8 / U>([&](auto S0) EDGELLM_PKQ_LAMBDA_INLINE {
      int8x16_t a0[U][T], a1[U][T];
      int32x4_t lo[U][T], hi[U][T];
      uint8x16_t hb[U];
      for (int u = 0; u < U; ++u) {
        const int s = S0 * U + u;
        for (int t = 0; t < T; ++t) {
          a0[u][t] = vld1q_s8(x[t]->q.qs + 32 * s);
          a1[u][t] = vld1q_s8(x[t]->q.qs + 32 * s + 16);
          lo[u][t] = hi[u][t] = vdupq_n_s32(0);
        }
        hb[u] = kHigh ? vld1q_u8(sb + kQs + s * kSubBytes + 4 * kQuadBytes) : vdupq_n_u8(0);
      }
      int8x16_t w[U][8];  // quad j of sub-block u: low nibbles w[u][j], high nibbles w[u][4 + j]
      static_for<4>([&](auto J) EDGELLM_PKQ_LAMBDA_INLINE {
        constexpr int j = J;
        uint8x16_t l[U], h[U];
        for (int u = 0; u < U; ++u)
          quad_pair<j>(vld1q_u8(sb + kQs + (S0 * U + u) * kSubBytes + j * kQuadBytes), hb[u], m4, m5, bit4, l[u], h[u]);
        for (int u = 0; u < U; ++u) {
          w[u][j] = s8(l[u]);
          w[u][4 + j] = s8(h[u]);
        }
      });
      // Four chains: two sub-blocks of one token (decode) or one sub-block of two tokens.
      static_assert(U * T == 2, "one sdot_4chains per step");
      if constexpr (U == 2)
        sdot_4chains(lo[0][0], hi[0][0], lo[1][0], hi[1][0], w[0], w[1], a0[0][0], a1[0][0], a0[1][0], a1[1][0]);
      else
        sdot_4chains(lo[0][0], hi[0][0], lo[0][1], hi[0][1], w[0], w[0], a0[0][0], a1[0][0], a0[0][1], a1[0][1]);
      for (int u = 0; u < U; ++u) {
        const int s = S0 * U + u;
        const uint16x8_t s16 = sc16[s / 2];
        const int32x4_t sc = vreinterpretq_s32_u32(s % 2 == 0 ? vmovl_u16(vget_low_u16(s16)) : vmovl_high_u16(s16));
        for (int t = 0; t < T; ++t) isum[t][u] = vmlaq_s32(isum[t][u], vaddq_s32(lo[u][t], hi[u][t]), sc);
      }
    });
    for (int t = 0; t < T; ++t)
      for (int u = 1; u < U; ++u) isum[t][0] = vaddq_s32(isum[t][0], isum[t][u]);
    // Mins against the sums per 32, each min vector taking its bsum by element (mins16, finish).
    int16x8_t m[4];
    mins16(sb, m);
    const float32x4_t d = load_d(sb), dmin = load_d(sb + 2 * kRows);
    for (int t = 0; t < T; ++t) finish(d, dmin, m, vld1q_s16(x[t]->bsums32), x[t]->q.d, isum[t][0], sum[t]);
  }
};

// ---- Q6_K ----
// Per sub-block of 16 weights: 3 vectors of 6-bit quads (quad 3 in their top bits), 4 sdot in one chain that
// starts at -32 * bsum (the offset), one mla with the rows' scales (a 16-weight sum of 6-bit quants
// exceeds int16, so the scales are widened to int32).
struct Q6K : OffsetFormat<5> {  // stored quant = q6 + 32
  static constexpr size_t kBytes = packed_k::q6_K_bytes(kRows);
  static constexpr int kSubBytes = 12 * kRows;

  // The 4 quad vectors of the sub-block at p: quads 0..2 are the low 6 bits of its vectors v0..v2;
  // quad 3 the top bit pairs of v2, v1, v0 shifted into bits 4-5, 2-3, 0-1 (sri keeps the bits
  // above the ones it inserts).
  static EDGELLM_NEON_INLINE void sub_block_quads(const uint8_t* p, uint8x16_t m6, int8x16_t (&q)[4]) {
    const uint8x16_t v0 = vld1q_u8(p), v1 = vld1q_u8(p + kQuadBytes), v2 = vld1q_u8(p + 2 * kQuadBytes);
    q[0] = s8(vandq_u8(v0, m6));
    q[1] = s8(vandq_u8(v1, m6));
    q[2] = s8(vandq_u8(v2, m6));
    q[3] = s8(vsriq_n_u8(vsriq_n_u8(vshrq_n_u8(v2, 2), v1, 4), v0, 6));
  }

  // The 16 sub-blocks' int8 scales as int16, 2 sub-blocks x 4 rows per vector: uzp1 / uzp2 split the
  // [sub-block][row] bytes into even (0, 2, 4, 6, then 8, ..) and odd sub-blocks.
  static EDGELLM_NEON_INLINE void scales16(const uint8_t* sb, int16x8_t (&sc16)[8]) {
    const int8x16_t p01 = vld1q_s8(reinterpret_cast<const int8_t*>(sb + kScales));
    const int8x16_t p23 = vld1q_s8(reinterpret_cast<const int8_t*>(sb + kScales + 16));
    const int8x16_t p45 = vld1q_s8(reinterpret_cast<const int8_t*>(sb + kScales + 32));
    const int8x16_t p67 = vld1q_s8(reinterpret_cast<const int8_t*>(sb + kScales + 48));
    const int8x16_t e0 = vuzp1q_s8(p01, p23), o0 = vuzp2q_s8(p01, p23), e1 = vuzp1q_s8(p45, p67), o1 = vuzp2q_s8(p45, p67);
    sc16[0] = vmovl_s8(vget_low_s8(e0));  // 0,2 | 4,6
    sc16[1] = vmovl_high_s8(e0);
    sc16[2] = vmovl_s8(vget_low_s8(o0));  // 1,3 | 5,7
    sc16[3] = vmovl_high_s8(o0);
    sc16[4] = vmovl_s8(vget_low_s8(e1));  // 8,10 | 12,14
    sc16[5] = vmovl_high_s8(e1);
    sc16[6] = vmovl_s8(vget_low_s8(o1));  // 9,11 | 13,15
    sc16[7] = vmovl_high_s8(o1);
  }
  // Scale of sub-block g as int32 x 4 rows.
  template <int g>
  static EDGELLM_NEON_INLINE int32x4_t scale32(const int16x8_t (&sc16)[8]) {
    constexpr int k16 = (g / 8) * 4 + (g % 2) * 2 + (g % 8) / 4;  // sc16 vector of sub-block g
    constexpr bool high = ((g % 8) / 2) % 2 == 1;                 // its upper 4 lanes
    return high ? vmovl_high_s16(sc16[k16]) : vmovl_s16(vget_low_s16(sc16[k16]));
  }

  static EDGELLM_NEON_INLINE void unpack(const uint8_t* sb, Unpacked& u) {
    const uint8x16_t m6 = vdupq_n_u8(0x3F);
    int16x8_t sc16[8];
    scales16(sb, sc16);
    static_for<16>([&](auto G) EDGELLM_PKQ_LAMBDA_INLINE {
      sub_block_quads(sb + kQs + G * kSubBytes, m6, u.q[G]);
      u.sc[G] = scale32<G>(sc16);
    });
    u.d = load_d(sb);
  }

  template <int T>
  static EDGELLM_NEON_INLINE void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], float32x4_t (&sum)[T]) {
    const uint8x16_t m6 = vdupq_n_u8(0x3F);
    int16x8_t sc16[8];
    scales16(sb, sc16);
    int32x4_t isum[T], start[T][4];
    for (int t = 0; t < T; ++t) {
      isum[t] = vdupq_n_s32(0);
      offset_starts<kOffsetShift>(x[t], start[t]);
    }
    auto scale_of = [&](auto G) EDGELLM_PKQ_LAMBDA_INLINE { return scale32<G>(sc16); };
    if constexpr (T == 1) {
      // Decode: four sub-blocks per step, one sdot chain each from its offset term (as Q2K's
      // decode_steps: no split chains to merge).
      static_for<4>([&](auto S) EDGELLM_PKQ_LAMBDA_INLINE {
        int8x16_t q[4][4], a[4];
        int32x4_t d[4];
        static_for<4>([&](auto K) EDGELLM_PKQ_LAMBDA_INLINE {
          constexpr int g = 4 * S + K;
          sub_block_quads(sb + kQs + g * kSubBytes, m6, q[K]);
          a[K] = vld1q_s8(x[0]->q.qs + 16 * g);
          d[K] = dup_lane<g % 4>(start[0][g / 4]);
        });
        dot4_sub16(d, q, a);
        static_for<4>([&](auto K) EDGELLM_PKQ_LAMBDA_INLINE {
          isum[0] = vmlaq_s32(isum[0], d[K], scale_of(std::integral_constant<int, 4 * S + K>{}));
        });
      });
    } else {
    static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p = P;
      int32x4_t dots[2][T];
      // sub-block g starts at its offset term, lane g % 4 of start[t][g / 4]
      pair16_dots<Q6K, p, T>(sb, x, m6, [&](int h, int t) {
        return h == 0 ? dup_lane<(2 * p) % 4>(start[t][p / 2]) : dup_lane<(2 * p + 1) % 4>(start[t][p / 2]);
      }, dots);
      static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
        const int32x4_t sc = scale_of(std::integral_constant<int, 2 * p + H>{});
        for (int t = 0; t < T; ++t) isum[t] = vmlaq_s32(isum[t], dots[H][t], sc);
      });
    });
    }
    const float32x4_t d = load_d(sb);
    for (int t = 0; t < T; ++t) sum[t] = vfmaq_f32(sum[t], vmulq_n_f32(d, x[t]->q.d), vcvtq_f32_s32(isum[t]));
  }
};

// ---- Q2_K ----
// Per sub-block of 16 weights: 1 vector of 2-bit quads, 4 sdot; per pair of sub-blocks one trn1 +
// 2 smlal for the scales and 1 dup + 2 smlal for the mins (bsums per 16).
struct Q2K {
  static constexpr size_t kBytes = packed_k::q2_K_bytes(kRows);
  static constexpr int kScales = 4 * kRows;   // u8 sm[8][Rows][2]: scale | min << 4
  static constexpr int kQs = 20 * kRows;
  static constexpr int kSubBytes = 4 * kRows;

  // The 4 quad vectors of the sub-block at p: bit pairs 0-1, 2-3, 4-5, 6-7 of its one vector.
  static EDGELLM_NEON_INLINE void sub_block_quads(const uint8_t* p, uint8x16_t m2, int8x16_t (&q)[4]) {
    const uint8x16_t v = vld1q_u8(p);
    q[0] = s8(vandq_u8(v, m2));
    q[1] = s8(vandq_u8(vshrq_n_u8(v, 2), m2));
    q[2] = s8(vandq_u8(vshrq_n_u8(v, 4), m2));
    q[3] = s8(vshrq_n_u8(v, 6));
  }

  // Decode (one token): four sub-blocks per step, one sdot chain each (sdot_4chains: four chains of
  // four, round-robin), so no chain is split in two and merged again: per sub-block one zeroing and
  // no add, against two zeroings and an add when two sub-blocks make the four chains (fewer
  // cycles on llvm-mca's A55 model despite g++'s spills: docs/PERF.md, "Kernel constants").
  static EDGELLM_NEON_INLINE void decode_steps(const uint8_t* sb, const PackedActQ8K* x, uint8x16_t m2, uint16x8_t m4,
                                               int32x4_t& is_lo, int32x4_t& is_hi, int32x4_t& ms_lo,
                                               int32x4_t& ms_hi, const int32x4_t (&bs)[2]) {
    static_for<4>([&](auto S) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p0 = 2 * S;  // pairs p0, p0 + 1: sub-blocks 4S .. 4S + 3
      int8x16_t q[4][4], a[4];
      for (int k = 0; k < 4; ++k) {
        sub_block_quads(sb + kQs + (4 * S + k) * kSubBytes, m2, q[k]);
        a[k] = vld1q_s8(x->q.qs + 16 * (4 * S + k));
      }
      int32x4_t d[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      dot4_sub16(d, q, a);  // sub-blocks 4S .. 4S + 3
      static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
        constexpr int p = p0 + H;
        int16x8_t scales, mins;
        scales_mins(sb, p, m4, scales, mins);
        scale_pair<p>(d[2 * H], d[2 * H + 1], scales, mins, bs, is_lo, is_hi, ms_lo, ms_hi);
      });
    });
  }

  // Pair p's scales and mins (4-bit, u8 scale | min << 4) as int16, [row][2] per vector.
  static EDGELLM_NEON_INLINE void scales_mins(const uint8_t* sb, int p, uint16x8_t m4, int16x8_t& scales, int16x8_t& mins) {
    const uint16x8_t sm = vmovl_u8(vld1_u8(sb + kScales + p * 2 * kRows));
    scales = vreinterpretq_s16_u16(vandq_u16(sm, m4));
    mins = vreinterpretq_s16_u16(vshrq_n_u16(sm, 4));
  }
  // Sub-block sums da, db of pair p times their scales into is_lo / is_hi, and the pair's mins (min_pair).
  template <int p>
  static EDGELLM_NEON_INLINE void scale_pair(int32x4_t da, int32x4_t db, int16x8_t scales, int16x8_t mins,
                                             const int32x4_t (&bs)[2], int32x4_t& is_lo, int32x4_t& is_hi,
                                             int32x4_t& ms_lo, int32x4_t& ms_hi) {
    mla_pair16(is_lo, is_hi, da, db, scales);
    min_pair<p>(mins, bs, ms_lo, ms_hi);
  }
  // Pair p's mins times the activation's bsums (lane p of bs, int16 pairs) into ms_lo / ms_hi.
  template <int p>
  static EDGELLM_NEON_INLINE void min_pair(int16x8_t mins, const int32x4_t (&bs)[2], int32x4_t& ms_lo, int32x4_t& ms_hi) {
    const int16x8_t b = vreinterpretq_s16_s32(dup_lane<p % 4>(bs[p / 4]));  // (b_2p, b_2p+1) x 4
    ms_lo = vmlal_s16(ms_lo, vget_low_s16(mins), vget_low_s16(b));
    ms_hi = vmlal_high_s16(ms_hi, mins, b);
  }
  // sum += d8 * d * fi - d8 * dmin * fm (fi, fm: the rows' integer sums as floats), the per-row
  // ref's order.
  static EDGELLM_NEON_INLINE void finish(float32x4_t d, float32x4_t dmin, float d8, float32x4_t fi, float32x4_t fm,
                                         float32x4_t& sum) {
    sum = vaddq_f32(sum, vfmsq_f32(vmulq_f32(vmulq_n_f32(d, d8), fi), vmulq_n_f32(dmin, d8), fm));
  }
  // The same from the pair accumulators (rows 0, 1 in lo, rows 2, 3 in hi: vpaddq gives each row).
  static EDGELLM_NEON_INLINE void finish(float32x4_t d, float32x4_t dmin, float d8, int32x4_t is_lo, int32x4_t is_hi,
                                         int32x4_t ms_lo, int32x4_t ms_hi, float32x4_t& sum) {
    const float32x4_t fi = vcvtq_f32_s32(vpaddq_s32(is_lo, is_hi));
    const float32x4_t fm = vcvtq_f32_s32(vpaddq_s32(ms_lo, ms_hi));
    finish(d, dmin, d8, fi, fm, sum);
  }

  // Prefill form: each quad times its sub-block's scale (q2 in 0..3, scale 0..15: at most 45, a
  // valid int8), so a super-block's 16 sub-blocks go into one sdot chain per token with no scale step;
  // the sums are the same integers (sum of s * q * y) as the decode path's.
  struct Unpacked {
    int8x16_t q[16][4];
    int16x8_t mins[8];
    float32x4_t d, dmin;
  };
  static EDGELLM_NEON_INLINE void unpack(const uint8_t* sb, Unpacked& u) {
    const uint8x16_t m2 = vdupq_n_u8(3), m4b = vdupq_n_u8(0x0F);
    const uint16x8_t m4 = vdupq_n_u16(0x0F);
    // byte 2r + h of a pair's [row][2] scale bytes in all 4 bytes of lane r (sub-block 2p + h)
    const uint8x16_t idx[2] = {vreinterpretq_u8_u32(uint32x4_t{0x00000000u, 0x02020202u, 0x04040404u, 0x06060606u}),
                               vreinterpretq_u8_u32(uint32x4_t{0x01010101u, 0x03030303u, 0x05050505u, 0x07070707u})};
    static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p = P;
      int16x8_t scales;
      scales_mins(sb, p, m4, scales, u.mins[p]);
      const uint8x8_t sm = vld1_u8(sb + kScales + p * 2 * kRows);
      static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
        constexpr int g = 2 * p + H;
        const uint8x16_t sc = vandq_u8(vqtbl1q_u8(vcombine_u8(sm, sm), idx[H]), m4b);
        int8x16_t q[4];
        sub_block_quads(sb + kQs + g * kSubBytes, m2, q);
        for (int j = 0; j < 4; ++j) u.q[g][j] = s8(vmulq_u8(vreinterpretq_u8_s8(q[j]), sc));
      });
    });
    u.d = load_d(sb);
    u.dmin = load_d(sb + 2 * kRows);
  }
  static EDGELLM_NEON_INLINE void dot4(const Unpacked& u, const PackedActQ8K* const (&x)[4], float32x4_t (&sum)[4]) {
    int32x4_t acc[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
    static_for<16>([&](auto G) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int g = G;
      int8x16_t y[4];
      for (int k = 0; k < 4; ++k) y[k] = vld1q_s8(x[k]->q.qs + 16 * g);
      dot_quads_4tok(acc, u.q[g], y);
    });
    static_for<4>([&](auto k) EDGELLM_PKQ_LAMBDA_INLINE {
      int32x4_t ms_lo = vdupq_n_s32(0), ms_hi = ms_lo;
      const int32x4_t bs[2] = {vreinterpretq_s32_s16(vld1q_s16(x[k]->q.bsums)),
                               vreinterpretq_s32_s16(vld1q_s16(x[k]->q.bsums + 8))};
      static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE { min_pair<P>(u.mins[P], bs, ms_lo, ms_hi); });
      finish(u.d, u.dmin, x[k]->q.d, vcvtq_f32_s32(acc[k]), vcvtq_f32_s32(vpaddq_s32(ms_lo, ms_hi)), sum[k]);
    });
  }

  template <int T>
  static EDGELLM_NEON_INLINE void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], float32x4_t (&sum)[T]) {
    const uint8x16_t m2 = vdupq_n_u8(3);
    const uint16x8_t m4 = vdupq_n_u16(0x0F);
    int32x4_t is_lo[T], is_hi[T], ms_lo[T], ms_hi[T], bs[T][2];
    for (int t = 0; t < T; ++t) {
      is_lo[t] = is_hi[t] = ms_lo[t] = ms_hi[t] = vdupq_n_s32(0);
      bs[t][0] = vreinterpretq_s32_s16(vld1q_s16(x[t]->q.bsums));  // lane p = bsums of sub-blocks 2p, 2p + 1
      bs[t][1] = vreinterpretq_s32_s16(vld1q_s16(x[t]->q.bsums + 8));
    }
    if constexpr (T == 1) {
      decode_steps(sb, x[0], m2, m4, is_lo[0], is_hi[0], ms_lo[0], ms_hi[0], bs[0]);
    } else {
    static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p = P;
      int16x8_t scales, mins;
      scales_mins(sb, p, m4, scales, mins);
      int32x4_t dots[2][T];
      pair16_dots<Q2K, p, T>(sb, x, m2, [](int, int) { return vdupq_n_s32(0); }, dots);
      for (int t = 0; t < T; ++t)
        scale_pair<p>(dots[0][t], dots[1][t], scales, mins, bs[t], is_lo[t], is_hi[t], ms_lo[t], ms_hi[t]);
    });
    }
    const float32x4_t d = load_d(sb), dmin = load_d(sb + 2 * kRows);
    for (int t = 0; t < T; ++t) finish(d, dmin, x[t]->q.d, is_lo[t], is_hi[t], ms_lo[t], ms_hi[t], sum[t]);
  }
};

// ---- Q3_K ----
// Per pair of sub-blocks: 3 vectors of 3-bit quads (15 ops make the 8 quad vectors), 8 sdot in two chains that start
// at -4 * bsum (the offset; the result |sum (q - 4) y| <= 16 * 4 * 127 fits int16), one trn1 + 2
// smlal for the signed scales.
struct Q3K : OffsetFormat<2> {  // stored quant = q3 + 4
  static constexpr size_t kBytes = packed_k::q3_K_bytes(kRows);
  static constexpr int kPairBytes = 12 * kRows;  // the quants by pairs of sub-blocks from kQs

  // The eight quad vectors v0..v7 of a pair (quads 0..3 of sub-block 2p, then 2p + 1) from its
  // vectors a, b, c (layout in layouts/packed_kquants.hpp): six are an AND (and a shift), v6 / v7 put
  // their bit 2 from c under the two bits of a / b by a shift-insert.
  static EDGELLM_NEON_INLINE void quads(const uint8_t* pair, int8x16_t (&q0)[4], int8x16_t (&q1)[4]) {
    const uint8x16_t m7 = vdupq_n_u8(7);
    const uint8x16_t a = vld1q_u8(pair), b = vld1q_u8(pair + kQuadBytes), c = vld1q_u8(pair + 2 * kQuadBytes);
    q0[0] = s8(vandq_u8(a, m7));
    q0[1] = s8(vandq_u8(vshrq_n_u8(a, 3), m7));
    q0[2] = s8(vandq_u8(b, m7));
    q0[3] = s8(vandq_u8(vshrq_n_u8(b, 3), m7));
    q1[0] = s8(vandq_u8(c, m7));
    q1[1] = s8(vandq_u8(vshrq_n_u8(c, 3), m7));
    q1[2] = s8(vsliq_n_u8(vshrq_n_u8(a, 6), vshrq_n_u8(c, 7), 2));               // c bit 7 -> bit 2
    q1[3] = s8(vsriq_n_u8(vshrq_n_u8(vshlq_n_u8(c, 1), 5), b, 6));              // c bit 6 -> bit 2
  }

  // Pair p's signed scales as int16, [row][2] (sub-blocks 2p, 2p + 1 of each row).
  static EDGELLM_NEON_INLINE int16x8_t pair_scales(const uint8_t* sb, int p) {
    return vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(sb + kScales + p * 2 * kRows)));
  }

  static EDGELLM_NEON_INLINE void unpack(const uint8_t* sb, Unpacked& u) {
    static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p = P;
      quads(sb + kQs + p * kPairBytes, u.q[2 * p], u.q[2 * p + 1]);
      // uzp1 / uzp2 give sub-block 2p's and 2p + 1's 4 rows
      const int16x8_t s16 = pair_scales(sb, p);
      u.sc[2 * p] = vmovl_s16(vget_low_s16(vuzp1q_s16(s16, s16)));
      u.sc[2 * p + 1] = vmovl_s16(vget_low_s16(vuzp2q_s16(s16, s16)));
    });
    u.d = load_d(sb);
  }

  template <int T>
  static EDGELLM_NEON_INLINE void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], float32x4_t (&sum)[T]) {
    int32x4_t is_lo[T], is_hi[T], start[T][4];
    for (int t = 0; t < T; ++t) {
      is_lo[t] = is_hi[t] = vdupq_n_s32(0);
      offset_starts<kOffsetShift>(x[t], start[t]);
    }
    if constexpr (T == 1) {
      // Decode: two pairs (four sub-blocks) per step, one sdot chain each from its offset term (as
      // Q2K's decode_steps: no split chains to merge).
      static_for<4>([&](auto S) EDGELLM_PKQ_LAMBDA_INLINE {
        int8x16_t q[4][4], a[4];
        int32x4_t d[4];
        static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
          quads(sb + kQs + (2 * S + H) * kPairBytes, q[2 * H], q[2 * H + 1]);
        });
        static_for<4>([&](auto K) EDGELLM_PKQ_LAMBDA_INLINE {
          constexpr int g = 4 * S + K;
          a[K] = vld1q_s8(x[0]->q.qs + 16 * g);
          d[K] = dup_lane<g % 4>(start[0][g / 4]);
        });
        dot4_sub16(d, q, a);
        static_for<2>([&](auto H) EDGELLM_PKQ_LAMBDA_INLINE {
          constexpr int p = 2 * S + H;
          mla_pair16(is_lo[0], is_hi[0], d[2 * H], d[2 * H + 1], pair_scales(sb, p));
        });
      });
    } else {
    static_for<8>([&](auto P) EDGELLM_PKQ_LAMBDA_INLINE {
      constexpr int p = P;
      const int16x8_t scales = pair_scales(sb, p);
      int32x4_t dots[2][T];
      int8x16_t q[2][4], a[2][T];
      quads(sb + kQs + p * kPairBytes, q[0], q[1]);
      for (int h = 0; h < 2; ++h)
        for (int t = 0; t < T; ++t) a[h][t] = vld1q_s8(x[t]->q.qs + 16 * (2 * p + h));
      // sub-block g = 2p + h starts at its offset term, lane g % 4 of start[t][g / 4]
      dot_pair16<T>(dots, q, a, [&](int h, int t) {
        return h == 0 ? dup_lane<(2 * p) % 4>(start[t][p / 2]) : dup_lane<(2 * p + 1) % 4>(start[t][p / 2]);
      });
      for (int t = 0; t < T; ++t) mla_pair16(is_lo[t], is_hi[t], dots[0][t], dots[1][t], scales);
    });
    }
    const float32x4_t d = load_d(sb);
    for (int t = 0; t < T; ++t)
      sum[t] = vfmaq_f32(sum[t], vmulq_n_f32(d, x[t]->q.d), vcvtq_f32_s32(vpaddq_s32(is_lo[t], is_hi[t])));
  }
};

// ---- drivers ----

// T tokens (from t0) x the 4 rows of one group: out[t * out_stride + r]. The body is forced inline so
// that bench/mca_neon.cpp can time exactly this super-block loop.
template <class K, int T>
EDGELLM_NEON_INLINE void gemm_tile_body(int64_t nsb, const uint8_t* w, const void* act, int t0, float* out,
                                        size_t out_stride) {
  const PackedActQ8K* x[T];
  float32x4_t sum[T];
  for (int t = 0; t < T; ++t) {
    x[t] = static_cast<const PackedActQ8K*>(act) + size_t(t0 + t) * size_t(nsb);
    sum[t] = vdupq_n_f32(0.0f);
  }
  for (int64_t b = 0; b < nsb; ++b, w += K::kBytes) {
    K::superblock(w, x, sum);
    for (int t = 0; t < T; ++t) ++x[t];
  }
  for (int t = 0; t < T; ++t) vst1q_f32(out + size_t(t0 + t) * out_stride, sum[t]);
}
template <class K, int T>
EDGELLM_TARGET_DOTPROD inline void gemm_tile(int64_t nsb, const uint8_t* w, const void* act, int t0, float* out,
                                             size_t out_stride) {
  gemm_tile_body<K, T>(nsb, w, act, t0, out, out_stride);
}

// The remainder tile of 1 .. T-1 tokens, dispatched to a compile-time size.
template <class K, int T>
EDGELLM_TARGET_DOTPROD inline void gemm_tail(int n, int64_t nsb, const uint8_t* w, const void* act, int t0, float* out,
                                             size_t out_stride) {
  if constexpr (T > 0) {
    if (n == T) gemm_tile<K, T>(nsb, w, act, t0, out, out_stride);
    else gemm_tail<K, T - 1>(n, nsb, w, act, t0, out, out_stride);
  }
}

// Tokens [0, ntok) x the 4 rows of one group, ntok >= 1. The group's super-blocks go in chunks of
// kUnpackChunk: a chunk is unpacked once (K::unpack, ~1.2 KB per super-block: the chunk stays in
// L1), then every tile of 4 tokens walks the chunk in order (K::dot4), so each token's activation
// is read as one sequential run per chunk (a walk over all tokens per super-block would stride by a
// whole activation row). Per-token sums carry over between chunks in super-block order: the same
// float order as decode. A last partial tile repeats its last token; only real tokens are stored.
constexpr int64_t kUnpackChunk = 8;
template <class K>
EDGELLM_NEON_INLINE void gemm_unpacked_body(int64_t nsb, const uint8_t* w, const void* act, int ntok, float* out,
                                            size_t out_stride) {
  thread_local std::vector<typename K::Unpacked> buf(kUnpackChunk);
  thread_local std::vector<float32x4_t> acc;
  acc.assign(size_t(ntok), vdupq_n_f32(0.0f));
  const auto* x0 = static_cast<const PackedActQ8K*>(act);
  for (int64_t b0 = 0; b0 < nsb; b0 += kUnpackChunk) {
    const int64_t nb = nsb - b0 < kUnpackChunk ? nsb - b0 : kUnpackChunk;
    for (int64_t i = 0; i < nb; ++i) K::unpack(w + size_t(b0 + i) * K::kBytes, buf[size_t(i)]);
    for (int t = 0; t < ntok; t += 4) {
      const PackedActQ8K* x[4];
      float32x4_t sum[4];
      for (int k = 0; k < 4; ++k) {
        const int tk = t + k < ntok ? t + k : ntok - 1;
        x[k] = x0 + size_t(tk) * size_t(nsb) + size_t(b0);
        sum[k] = acc[size_t(tk)];
      }
      for (int64_t i = 0; i < nb; ++i) {
        K::dot4(buf[size_t(i)], x, sum);
        for (int k = 0; k < 4; ++k) ++x[k];
      }
      for (int k = 0; k < 4 && t + k < ntok; ++k) acc[size_t(t + k)] = sum[k];
    }
  }
  for (int t = 0; t < ntok; ++t) vst1q_f32(out + size_t(t) * out_stride, acc[size_t(t)]);
}

// PackedFormat::gemm: from kUnpackMinTokens tokens the unpacked path; fewer go in tiles of kToks
// tokens, then one tile of the 1 .. kToks-1 left (ntok == 1, the decode GEMV, is that tail tile).
template <class K>
EDGELLM_TARGET_DOTPROD void gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                                 size_t out_stride) {
  const int64_t nsb = n_in / QK_K;
  const auto* w = static_cast<const uint8_t*>(group);
  if (ntok >= kUnpackMinTokens) {
    gemm_unpacked_body<K>(nsb, w, act, ntok, out, out_stride);
    return;
  }
  int t0 = 0;
  for (; t0 + kToks <= ntok; t0 += kToks) gemm_tile<K, kToks>(nsb, w, act, t0, out, out_stride);
  gemm_tail<K, kToks - 1>(ntok - t0, nsb, w, act, t0, out, out_stride);
}

}  // namespace neon::pkq

// x: [n_in] floats -> [n_in / 256] PackedActQ8K, quantized by quantize_row_q8_K_neon (bit-exact with
// the ref).
inline void prepare_act_q8_K_packed_neon(const float* x, int64_t n_in, void* dst) {
  prepare_act_q8_K_packed<quantize_row_q8_K_neon>(x, n_in, dst);
}

// Sets t.packed_of(Q2_K .. Q6_K) to the 4-row dotprod forms (kernels/layouts/packed_kquants.hpp
// layouts). Only on a CPU that executes sdot (the caller checks cpu_has_dotprod()).
inline void register_neon_packed_kquants(KernelTable& t) {
  using namespace neon::pkq;
  constexpr auto prep = prepare_act_q8_K_packed_neon;
  set_packed_kquant_form<kRows>(t, DType::Q2_K, "q2_Kx4", gemm<Q2K>, prep);
  set_packed_kquant_form<kRows>(t, DType::Q3_K, "q3_Kx4", gemm<Q3K>, prep);
  set_packed_kquant_form<kRows>(t, DType::Q4_K, "q4_Kx4", gemm<Q45K<false>>, prep);
  set_packed_kquant_form<kRows>(t, DType::Q5_K, "q5_Kx4", gemm<Q45K<true>>, prep);
  set_packed_kquant_form<kRows>(t, DType::Q6_K, "q6_Kx4", gemm<Q6K>, prep);
}

}  // namespace edgellm

#undef EDGELLM_PKQ_LAMBDA_INLINE
#endif  // EDGELLM_HAS_NEON
