// Reference (scalar, spec) dequantizers of the i-quant and ternary formats (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0), in ggml's float operation
// order (ggml-quants.c dequantize_row_*), so they give llama.cpp's floats bit for bit.
//
// Each format is read in two steps shared with the reference dot products
// (kernels/scalar/dot_iquants.hpp): the unpack_<type> helpers turn a block into its signed integer
// weights before any scale (grid point bytes with their signs applied, ternary digits, IQ4 values),
// and the <type>_scale helpers read a sub-block's integer scale field. A sign flip is exact, so
// d * (grid * +-1) here equals ggml's (d * grid) * +-1.
#pragma once
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/quant/block_rows.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/iq_tables.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

// ---------------------------------------------------------------------------------------------
// Block unpacking: q[0..256) (IQ4_NL: q[0..32)) = the block's weights as integers, in order.

namespace detail {

// Byte j of a grid point (weight j), as ggml reads it through a uint8_t pointer on little endian.
template <class T>
inline uint8_t grid_byte(T point, int j) {
  return uint8_t(point >> (8 * j));
}

// n weights from a grid point with the sign bits `signs` (bit j set: weight j negative), bits
// starting at sign_bit0.
template <class T>
inline void put_signed_point(T point, uint8_t signs, int sign_bit0, int n, int8_t* q) {
  for (int j = 0; j < n; ++j) {
    const int v = grid_byte(point, j);
    q[j] = int8_t((signs & kmask_iq2xs[sign_bit0 + j]) ? -v : v);
  }
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace detail

// IQ2_XXS: per 32 weights, 4 bytes of 8-bit grid indexes and a word of 4 x 7 sign bits + 4-bit scale.
inline void unpack_iq2_xxs(const block_iq2_xxs& b, int8_t* q) {
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const uint32_t idx = detail::load_u32(b.qs + 4 * ib);
    const uint32_t sgn = detail::load_u32(b.qs + 4 * ib + 2);
    for (int l = 0; l < 4; ++l)
      detail::put_signed_point(iq2xxs_grid[(idx >> (8 * l)) & 0xFF], ksigns_iq2xs[(sgn >> (7 * l)) & 127], 0, 8,
                               q + 32 * ib + 8 * l);
  }
}
inline uint32_t iq2_xxs_scale(const block_iq2_xxs& b, int ib32) { return detail::load_u32(b.qs + 4 * ib32 + 2) >> 28; }

// IQ2_XS: per 8 weights a uint16 of 9-bit grid index and 7 sign bits.
inline void unpack_iq2_xs(const block_iq2_xs& b, int8_t* q) {
  for (int g = 0; g < QK_K / 8; ++g)
    detail::put_signed_point(iq2xs_grid[b.qs[g] & 511], ksigns_iq2xs[b.qs[g] >> 9], 0, 8, q + 8 * g);
}
// The 4-bit scale of 16 weights (ib16 = weight / 16), IQ2_XS and IQ2_S alike.
template <class Block>
inline uint32_t iq2_scale16(const Block& b, int ib16) {
  return (b.scales[ib16 / 2] >> (4 * (ib16 % 2))) & 0xF;
}

// IQ2_S: per 8 weights a grid index (8 bits in qs, 2 in qh) and a sign byte (second half of qs).
inline void unpack_iq2_s(const block_iq2_s& b, int8_t* q) {
  const uint8_t* signs = b.qs + QK_K / 8;
  for (int g = 0; g < QK_K / 8; ++g) {
    const int ib = g / 4, l = g % 4;
    const uint32_t idx = b.qs[g] | ((uint32_t(b.qh[ib]) << (8 - 2 * l)) & 0x300);
    detail::put_signed_point(iq2s_grid[idx], signs[g], 0, 8, q + 8 * g);
  }
}

// IQ3_XXS: 8-bit indexes of 4-weight points, then per 32 weights a word of 4 x 7 sign bits + scale.
inline void unpack_iq3_xxs(const block_iq3_xxs& b, int8_t* q) {
  const uint8_t* scales_and_signs = b.qs + QK_K / 4;
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const uint32_t aux = detail::load_u32(scales_and_signs + 4 * ib);
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
      int8_t* out = q + 32 * ib + 8 * l;
      detail::put_signed_point(iq3xxs_grid[b.qs[8 * ib + 2 * l]], signs, 0, 4, out);
      detail::put_signed_point(iq3xxs_grid[b.qs[8 * ib + 2 * l + 1]], signs, 4, 4, out + 4);
    }
  }
}
inline uint32_t iq3_xxs_scale(const block_iq3_xxs& b, int ib32) {
  return detail::load_u32(b.qs + QK_K / 4 + 4 * ib32) >> 28;
}

// IQ3_S: 9-bit indexes of 4-weight points (bit 8 from qh, one byte per 32 weights), sign bytes.
inline void unpack_iq3_s(const block_iq3_s& b, int8_t* q) {
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const uint32_t qh = b.qh[ib];
    for (int l = 0; l < 4; ++l) {
      const uint8_t signs = b.signs[4 * ib + l];
      int8_t* out = q + 32 * ib + 8 * l;
      const uint32_t i1 = b.qs[8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256);
      const uint32_t i2 = b.qs[8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
      detail::put_signed_point(iq3s_grid[i1], signs, 0, 4, out);
      detail::put_signed_point(iq3s_grid[i2], signs, 4, 4, out + 4);
    }
  }
}
inline uint32_t iq3_s_scale(const block_iq3_s& b, int ib32) { return (b.scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xF; }

// IQ1_S: per 8 weights an 11-bit index of a ternary point (high 3 bits in qh of its 32).
inline void unpack_iq1_s(const block_iq1_s& b, int8_t* q) {
  for (int g = 0; g < QK_K / 8; ++g) {
    const int ib = g / 4, l = g % 4;
    const uint64_t point = iq1s_grid[b.qs[g] | (((b.qh[ib] >> (3 * l)) & 7) << 8)];
    for (int j = 0; j < 8; ++j) q[8 * g + j] = int8_t(detail::grid_byte(point, j));
  }
}
inline uint32_t iq1_s_scale(const block_iq1_s& b, int ib32) { return (b.qh[ib32] >> 12) & 7; }
// True when the shift of these 32 weights is -IQ1S_DELTA.
inline bool iq1_s_delta_negative(const block_iq1_s& b, int ib32) { return (b.qh[ib32] & 0x8000) != 0; }

// IQ1_M: as IQ1_S with the 3 high index bits and the shift sign per 8 weights in a nibble of qh.
inline void unpack_iq1_m(const block_iq1_m& b, int8_t* q) {
  for (int g = 0; g < QK_K / 8; ++g) {
    const uint32_t idx = b.qs[g] | ((uint32_t(b.qh[g / 2]) << (8 - 4 * (g % 2))) & 0x700);
    const uint64_t point = iq1s_grid[idx];
    for (int j = 0; j < 8; ++j) q[8 * g + j] = int8_t(detail::grid_byte(point, j));
  }
}
inline bool iq1_m_delta_negative(const block_iq1_m& b, int ib8) { return (b.qh[ib8 / 2] & (ib8 % 2 ? 0x80 : 0x08)) != 0; }
// The four scale words (ggml reads scales[] as uint16_t).
inline void iq1_m_scale_words(const block_iq1_m& b, uint16_t sc[4]) { std::memcpy(sc, b.scales, 8); }
// The 3-bit scale of 16 weights (ib16 = weight / 16).
inline uint32_t iq1_m_scale(const uint16_t sc[4], int ib16) { return (sc[ib16 / 4] >> (3 * (ib16 % 4))) & 7; }
// The block's fp16 scale, spread over the top nibbles of the scale words.
inline ggml_half iq1_m_d(const uint16_t sc[4]) {
  return ggml_half((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
}

// IQ4_NL / IQ4_XS: 32 weights from 16 bytes, low nibbles first, as kvalues_iq4nl.
inline void unpack_iq4_32(const uint8_t* qs, int8_t* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = kvalues_iq4nl[qs[j] & 0xF];
    q[j + 16] = kvalues_iq4nl[qs[j] >> 4];
  }
}
inline void unpack_iq4_nl(const block_iq4_nl& b, int8_t* q) { unpack_iq4_32(b.qs, q); }
inline void unpack_iq4_xs(const block_iq4_xs& b, int8_t* q) {
  for (int ib = 0; ib < QK_K / 32; ++ib) unpack_iq4_32(b.qs + 16 * ib, q + 32 * ib);
}
// The 6-bit scale of 32 weights (stored + 32).
inline int iq4_xs_scale(const block_iq4_xs& b, int ib32) {
  return ((b.scales_l[ib32 / 2] >> (4 * (ib32 % 2))) & 0xF) | (((b.scales_h >> (2 * ib32)) & 3) << 4);
}

// TQ1_0: 5 base-3 digits per qs byte, 4 per qh byte, stored as the byte = ceil(v * 256 / 243); digit
// n of byte x is the top of (x * 3^n mod 256) * 3. Weights: qs[0..32) digit-major (160), then
// qs[32..48) (80), then qh (16); each weight = digit - 1.
inline int tq1_digit(uint8_t byte, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t v = uint8_t(byte * kPow3[n]);
  return (uint16_t(v) * 3) >> 8;
}
inline void unpack_tq1_0(const block_tq1_0& b, int8_t* q) {
  constexpr int kQs = int(sizeof(block_tq1_0::qs)), kQh = int(sizeof(block_tq1_0::qh));
  constexpr int kMain = kQs - kQs % 32;
  for (int j = 0; j < kMain; j += 32)
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *q++ = int8_t(tq1_digit(b.qs[j + m], n) - 1);
  for (int j = kMain; j < kQs; j += 16)
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *q++ = int8_t(tq1_digit(b.qs[j + m], n) - 1);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < kQh; ++j) *q++ = int8_t(tq1_digit(b.qh[j], n) - 1);
}

// TQ2_0: 2-bit digits, 4 per byte; weight j*4 + 32l + m (j a multiple of 32) = bits 2l of qs[j + m], - 1.
inline void unpack_tq2_0(const block_tq2_0& b, int8_t* q) {
  for (int j = 0; j < int(sizeof(block_tq2_0::qs)); j += 32)
    for (int l = 0; l < 4; ++l)
      for (int m = 0; m < 32; ++m) *q++ = int8_t(((b.qs[j + m] >> (2 * l)) & 3) - 1);
}

// ---------------------------------------------------------------------------------------------
// Dequantizers. x: k / 256 blocks (IQ4_NL: k / 32); y: k floats.

// The float scale of each sub-block as ggml's dequantizer computes it from the block's d.
inline float iq2_xxs_dl(float d, const block_iq2_xxs& b, int ib32) {
  EDGELLM_EXACT_FP_SCOPE
  return d * (0.5f + float(iq2_xxs_scale(b, ib32))) * 0.25f;
}
template <class Block>  // IQ2_XS, IQ2_S
inline float iq2_dl16(float d, const Block& b, int ib16) {
  EDGELLM_EXACT_FP_SCOPE
  return d * (0.5f + float(iq2_scale16(b, ib16))) * 0.25f;
}
inline float iq3_xxs_dl(float d, const block_iq3_xxs& b, int ib32) {
  EDGELLM_EXACT_FP_SCOPE
  return d * (0.5f + float(iq3_xxs_scale(b, ib32))) * 0.5f;
}
inline float iq3_s_dl(float d, const block_iq3_s& b, int ib32) { return d * float(1 + 2 * int(iq3_s_scale(b, ib32))); }
inline float iq4_xs_dl(float d, const block_iq4_xs& b, int ib32) { return d * float(iq4_xs_scale(b, ib32) - 32); }
template <class Block>  // IQ4_NL, TQ1_0, TQ2_0: one scale for the block
inline float block_dl(float d, const Block&, int) { return d; }

namespace detail {
// y = Dl(d, block, s) * q for each sub-block s of kSub weights, blocks of kBlock weights.
template <class Block, int kBlock, int kSub, void (*Unpack)(const Block&, int8_t*),
          float (*Dl)(float, const Block&, int)>
inline void dequantize_row_scaled(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  dequantize_blocks<kBlock>(x, y, k, [](const Block& b, float* out) {
    int8_t q[kBlock];
    const float d = fp16_to_fp32(b.d);
    Unpack(b, q);
    for (int s = 0; s < kBlock / kSub; ++s) {
      const float dl = Dl(d, b, s);
      for (int j = kSub * s; j < kSub * (s + 1); ++j) out[j] = dl * float(q[j]);
    }
  });
}

// IQ1: y[j] = dl * (q[j] + delta) for 8 weights.
inline void iq1_group(float dl, float delta, const int8_t* q, float* y) {
  EDGELLM_EXACT_FP_SCOPE
  for (int j = 0; j < 8; ++j) y[j] = dl * (float(q[j]) + delta);
}
}  // namespace detail

// IQ2_XXS: y = d * (0.5 + s) * 0.25 * (signed grid value), s per 32 weights.
inline void dequantize_row_iq2_xxs(const block_iq2_xxs* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xxs, QK_K, 32, unpack_iq2_xxs, iq2_xxs_dl>(x, y, k);
}
// IQ2_XS / IQ2_S: as IQ2_XXS with s per 16 weights.
inline void dequantize_row_iq2_xs(const block_iq2_xs* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xs, QK_K, 16, unpack_iq2_xs, iq2_dl16<block_iq2_xs>>(x, y, k);
}
inline void dequantize_row_iq2_s(const block_iq2_s* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_s, QK_K, 16, unpack_iq2_s, iq2_dl16<block_iq2_s>>(x, y, k);
}
// IQ3_XXS: y = d * (0.5 + s) * 0.5 * q, s per 32 weights.
inline void dequantize_row_iq3_xxs(const block_iq3_xxs* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq3_xxs, QK_K, 32, unpack_iq3_xxs, iq3_xxs_dl>(x, y, k);
}
// IQ3_S: y = d * (1 + 2s) * q, s per 32 weights.
inline void dequantize_row_iq3_s(const block_iq3_s* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq3_s, QK_K, 32, unpack_iq3_s, iq3_s_dl>(x, y, k);
}
// IQ4_NL: y = d * kvalues_iq4nl[nibble], 32 weights a block.
inline void dequantize_row_iq4_nl(const block_iq4_nl* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq4_nl, QK4_NL, QK4_NL, unpack_iq4_nl, block_dl<block_iq4_nl>>(x, y, k);
}
// IQ4_XS: y = d * (s - 32) * kvalues_iq4nl[nibble], s per 32 weights.
inline void dequantize_row_iq4_xs(const block_iq4_xs* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq4_xs, QK_K, 32, unpack_iq4_xs, iq4_xs_dl>(x, y, k);
}
// TQ1_0 / TQ2_0: y = (digit - 1) * d.
inline void dequantize_row_tq1_0(const block_tq1_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_tq1_0, QK_K, QK_K, unpack_tq1_0, block_dl<block_tq1_0>>(x, y, k);
}
inline void dequantize_row_tq2_0(const block_tq2_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_tq2_0, QK_K, QK_K, unpack_tq2_0, block_dl<block_tq2_0>>(x, y, k);
}

namespace detail {
// The IQ1 types and their transcoded forms (kernels/layouts/transcoded_iquants.hpp) read through
// accessors: the weights q (Unpack), the block's float scale (D), the 3-bit scale of 16 weights
// (Scale16) and whether the shift of 8 weights is negative (Neg8).
// y = d * (2s + 1) * (q +- IQ1S_DELTA) (ggml applies IQ1S_DELTA to IQ1_M too; IQ1M_DELTA has the
// same value).
template <class B, void (*Unpack)(const B&, int8_t*), float (*D)(const B&), uint32_t (*Scale16)(const B&, int),
          bool (*Neg8)(const B&, int)>
inline void dequantize_row_iq1(const B* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::dequantize_blocks<QK_K>(x, y, k, [](const B& b, float* out) {
    int8_t q[QK_K];
    const float d = D(b);
    Unpack(b, q);
    for (int g = 0; g < QK_K / 8; ++g) {
      const float dl = d * float(2 * int(Scale16(b, g / 2)) + 1);
      detail::iq1_group(dl, Neg8(b, g) ? -IQ1S_DELTA : IQ1S_DELTA, q + 8 * g, out + 8 * g);
    }
  });
}
}  // namespace detail
inline float iq1_s_dfloat(const block_iq1_s& b) { return fp16_to_fp32(b.d); }
inline uint32_t iq1_s_scale16(const block_iq1_s& b, int ib16) { return iq1_s_scale(b, ib16 / 2); }
inline bool iq1_s_neg8(const block_iq1_s& b, int ib8) { return iq1_s_delta_negative(b, ib8 / 4); }
inline float iq1_m_dfloat(const block_iq1_m& b) {
  uint16_t sc[4];
  iq1_m_scale_words(b, sc);
  return fp16_to_fp32(iq1_m_d(sc));
}
inline uint32_t iq1_m_scale16(const block_iq1_m& b, int ib16) {
  uint16_t sc[4];
  iq1_m_scale_words(b, sc);
  return iq1_m_scale(sc, ib16);
}

// IQ1_S: y = d * (2s + 1) * (q +- IQ1S_DELTA) per 32 weights.
inline void dequantize_row_iq1_s(const block_iq1_s* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_iq1<block_iq1_s, unpack_iq1_s, iq1_s_dfloat, iq1_s_scale16, iq1_s_neg8>(x, y, k);
}
// IQ1_M: the same, a scale per 16 weights, a shift sign per 8.
inline void dequantize_row_iq1_m(const block_iq1_m* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_iq1<block_iq1_m, unpack_iq1_m, iq1_m_dfloat, iq1_m_scale16, iq1_m_delta_negative>(x, y, k);
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
