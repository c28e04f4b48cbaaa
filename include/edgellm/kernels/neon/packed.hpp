// Row-interleaved ("packed") Q4_0 / Q8_0 GEMMs for arm64 with dotprod: groups of 4 rows in the
// layout of kernels/layouts/packed_legacy.hpp at R = 4, so one 32-bit NEON lane carries one weight row.
// A 16-byte weight vector is one 4-weight "word" of the four rows; `sdot` by element against
// lane j of the activation (its quants 4j .. 4j+3) adds that word's products into each row's own
// lane. Compared with the file-layout rows kernels (neon/dot_legacy.hpp) this drops the horizontal
// sums and converts/scales four rows' block sums with one scvtf + fmla.
//
// Q4_0: the stored nibbles are unsigned (0..15, valid signed bytes for sdot); the integer sum of a
// block starts from the activation's per-block correction -8 * sum(quants) (packed::act_view).
// Q8_0: the reference layout stores q + 128 for vpdpbusd's unsigned operand; sdot wants q itself,
// so the NEON packer flips bit 7 of every quant byte of the rows it packs (q + 128 ^ 0x80 = q as
// a signed byte) and the kernel ignores the correction (the activation form stays the shared one).
//
// Prefill: tokens go in tiles of kTokTile sharing each block's unpacked weights (q4_0's and/ushr
// and every weight load are paid once per tile instead of once per token).
// ARMv8.0 (no sdot) keeps the rows kernels: without sdot the lane = row mapping costs more
// instructions than the horizontal sums it saves.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/kernels/layouts/packed_legacy.hpp"

#if EDGELLM_HAS_NEON
#include "edgellm/kernels/neon/quantize.hpp"
#include "edgellm/kernels/neon/vdot.hpp"

namespace edgellm {
namespace neon {
namespace pk {

constexpr int kRows = 4;     // rows per group: the int32 lanes of a q-register
constexpr int kTokTile = 4;  // tokens sharing one unpack in prefill (4 x 2 activation + 4 sums + 8 weights fit)

// One block's weights of the 4 rows as the 8 signed word vectors w[j] (word j = weights 4j..4j+3).
struct Q4Words {
  using G = packed::GeometryQ4_0<kRows>;
  static constexpr bool kCorr = true;
  static EDGELLM_NEON_INLINE void load(const uint8_t* qs, int8x16_t w[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int c = 0; c < 4; ++c) {  // chunk c: low nibbles = word 2c, high nibbles = word 2c + 1
      const uint8x16_t v = vld1q_u8(qs + 16 * c);
      w[2 * c] = vreinterpretq_s8_u8(vandq_u8(v, m4));
      w[2 * c + 1] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
  }
};
struct Q8Words {
  using G = packed::GeometryQ8_0<kRows>;
  static constexpr bool kCorr = false;
  static EDGELLM_NEON_INLINE void load(const uint8_t* qs, int8x16_t w[8]) {
    for (int j = 0; j < 8; ++j) w[j] = vld1q_s8(reinterpret_cast<const int8_t*>(qs) + 16 * j);
  }
};

// Block b's activation of token t: the 32 quants as two vectors, the integer start (the offset
// correction, or 0) and d.
template <class W>
EDGELLM_NEON_INLINE int32x4_t start_of(const packed::ActView& a, int64_t b) {
  return W::kCorr ? vld1q_dup_s32(a.corr + b) : vdupq_n_s32(0);
}
EDGELLM_NEON_INLINE float32x4_t row_scales(const uint8_t* sc, float d) {
  return vmulq_n_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(sc)))), d);
}

// out[t * stride + r] for tokens t < T of act (activation rows ab bytes apart), T = 1 (decode:
// both blocks of a pair per sdot_4chains) or even (prefill: each block's weights unpacked once for
// the T tokens, two tokens per sdot_4chains).
template <class W, int T>
EDGELLM_NEON_INLINE void gemm_tile(int64_t n_in, const uint8_t* g, const uint8_t* act, size_t ab, float* out,
                                   size_t stride) {
  static_assert(T == 1 || T % 2 == 0, "token tiles are 1 or even");
  using G = typename W::G;
  const int64_t nb = n_in / packed::kBlock;
  packed::ActView a[T];
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) {
    a[t] = packed::act_view(act + size_t(t) * ab, n_in);
    acc[t] = vdupq_n_f32(0.0f);
  }
  auto y_at = [&](int t, int64_t b, int half) { return vld1q_s8(a[t].qs + b * packed::kBlock + 16 * half); };
  const int32x4_t zero = vdupq_n_s32(0);
  int64_t b = 0;
  if constexpr (T == 1) {
    for (; b + 2 <= nb; b += 2, g += G::kPair) {
      int8x16_t wa[8], wb[8];
      W::load(g, wa);
      W::load(g + G::kBlockQs, wb);
      int32x4_t c0 = start_of<W>(a[0], b), c1 = zero, c2 = start_of<W>(a[0], b + 1), c3 = zero;
      sdot_4chains(c0, c1, c2, c3, wa, wb, y_at(0, b, 0), y_at(0, b, 1), y_at(0, b + 1, 0), y_at(0, b + 1, 1));
      const uint8_t* sc = g + 2 * G::kBlockQs;
      acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(vaddq_s32(c0, c1)), row_scales(sc, a[0].d[b]));
      acc[0] = vfmaq_f32(acc[0], vcvtq_f32_s32(vaddq_s32(c2, c3)), row_scales(sc + G::kBlockScales, a[0].d[b + 1]));
    }
  }
  for (; b < nb; ++b) {  // T > 1: every block; T == 1: an odd last block (its partner's data is zero)
    const size_t at = size_t(b / 2) * G::kPair;
    const uint8_t* qs = (T == 1 ? g : g + at) + size_t(b % 2) * G::kBlockQs;
    const uint8_t* sc = (T == 1 ? g : g + at) + 2 * G::kBlockQs + size_t(b % 2) * G::kBlockScales;
    int8x16_t w[8];
    W::load(qs, w);
    for (int t = 0; t < T; t += 2) {
      const int u = T == 1 ? 0 : t + 1;  // T == 1: the second "token" repeats the first (result unused)
      int32x4_t c0 = start_of<W>(a[t], b), c1 = zero, c2 = start_of<W>(a[u], b), c3 = zero;
      sdot_4chains(c0, c1, c2, c3, w, w, y_at(t, b, 0), y_at(t, b, 1), y_at(u, b, 0), y_at(u, b, 1));
      acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(vaddq_s32(c0, c1)), row_scales(sc, a[t].d[b]));
      if (T > 1) acc[u] = vfmaq_f32(acc[u], vcvtq_f32_s32(vaddq_s32(c2, c3)), row_scales(sc, a[u].d[b]));
    }
  }
  for (int t = 0; t < T; ++t) vst1q_f32(out + size_t(t) * stride, acc[t]);
}

// PackedFormat::gemm: tiles of kTokTile tokens, then 2, then 1.
template <class W>
EDGELLM_TARGET_DOTPROD void gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                              size_t stride) {
  const auto* g = static_cast<const uint8_t*>(group);
  const auto* a = static_cast<const uint8_t*>(act);
  const size_t ab = packed::act_bytes(n_in);
  int t = 0;
  for (; t + kTokTile <= ntok; t += kTokTile)
    gemm_tile<W, kTokTile>(n_in, g, a + size_t(t) * ab, ab, out + size_t(t) * stride, stride);
  for (; t + 2 <= ntok; t += 2) gemm_tile<W, 2>(n_in, g, a + size_t(t) * ab, ab, out + size_t(t) * stride, stride);
  if (t < ntok) gemm_tile<W, 1>(n_in, g, a + size_t(t) * ab, ab, out + size_t(t) * stride, stride);
}

// The reference Q8_0 packing with every quant byte of rows [0, count) turned from q + 128 into q.
inline void pack_q8_0_signed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  using G = packed::GeometryQ8_0<kRows>;
  packed::pack_q8_0<kRows>(src, row_bytes, count, n_in, dst);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n_in / packed::kBlock; ++b) {
    uint8_t* qs = out + G::qs_at(b);
    for (int j = 0; j < packed::kWords; ++j)
      for (int r = 0; r < count; ++r)
        for (int i = 0; i < 4; ++i) qs[j * 4 * kRows + 4 * r + i] ^= 0x80;
  }
}

}  // namespace pk
}  // namespace neon

// Sets the Q4_0 / Q8_0 packed forms of a dotprod table.
inline void register_neon_packed(KernelTable& t) {
  constexpr int R = neon::pk::kRows;
  t.packed_of(DType::Q4_0) =
      packed::make_format(R, "q4_0x4", packed::GeometryQ4_0<R>::group_bytes, packed::pack_q4_0<R>,
                          packed::prepare_act<quantize_row_q8_0_neon, packed::kQ4Offset>,
                          neon::pk::gemm<neon::pk::Q4Words>);
  t.packed_of(DType::Q8_0) =
      packed::make_format(R, "q8_0x4", packed::GeometryQ8_0<R>::group_bytes, neon::pk::pack_q8_0_signed,
                          packed::prepare_act<quantize_row_q8_0_neon, packed::kQ8Offset>,
                          neon::pk::gemm<neon::pk::Q8Words>);
}

}  // namespace edgellm
#endif  // EDGELLM_HAS_NEON
