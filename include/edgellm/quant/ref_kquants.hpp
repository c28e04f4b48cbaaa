// Reference (scalar, spec) dequantizers and quantizers of the K-quant formats (q2_K ... q6_K,
// q8_K; 256-weight super-blocks). Dequantizers follow ggml's float operation order exactly;
// quantizers use the same searches as ggml's reference quantizers (llama-quantize without imatrix).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgellm/config.hpp"
#include "edgellm/quant/block_rows.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/group_max.hpp"
#include "edgellm/quant/scales.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

// ---------------------------------------------------------------------------------------------
// Dequantizers. x: k / 256 blocks; y: k floats (k a multiple of QK_K).

// q2_K: each 32-byte group of qs holds 4 x 32 weights (2 bits each, shift 0, 2, 4, 6);
// each 16-weight sub-block has its own 4-bit scale (low nibble) and min (high nibble).
// q3_K: 2 low bits as in q2_K plus a high bit in hmask (bit set = no offset, clear = -4);
// hmask bit m covers weights 32m .. 32m + 31; 6-bit scales (already minus 32) per 16 weights.
template <class Block>
inline void dequantize_row_k2(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr bool kQ3 = std::is_same_v<Block, block_q3_K>;
  detail::dequantize_blocks<QK_K>(x, y, k, [](const Block& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    int8_t scales[16];
    float min = 0.0f;
    if constexpr (kQ3) {
      unpack_scales_q3_K(b.scales, scales);
    } else {
      min = fp16_to_fp32(b.dmin);
    }
    const uint8_t* q = b.qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
        for (int half = 0; half < 2; ++half, ++is) {
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            if constexpr (kQ3) {
              *out++ = d * scales[is] * (int8_t((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4));
            } else {
              *out++ = d * (b.scales[is] & 0xF) * int8_t((q[l] >> shift) & 3) - min * (b.scales[is] >> 4);
            }
          }
        }
      }
    }
  });
}

// q4_K: 64 weights per 32 bytes of qs (low nibbles = first 32, high nibbles = next 32), each
// 32-weight sub-block with a 6-bit scale and min: y = d * sc * q - dmin * m. q5_K: plus a 5th bit;
// qh bit 2p / 2p + 1 of byte l belongs to weight 64p + l / 64p + 32 + l.
template <class Block>
inline void dequantize_row_k4(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::dequantize_blocks<QK_K>(x, y, k, [](const Block& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    const float min = fp16_to_fp32(b.dmin);
    const uint8_t* ql = b.qs;
    for (int is = 0; is < QK_K / 32; is += 2, ql += 32) {
      uint8_t sc, m;
      get_scale_min_k4(is + 0, b.scales, &sc, &m);
      const float d1 = d * sc;
      const float m1 = min * m;
      get_scale_min_k4(is + 1, b.scales, &sc, &m);
      const float d2 = d * sc;
      const float m2 = min * m;
      for (int half = 0; half < 2; ++half) {
        for (int l = 0; l < 32; ++l) {
          int q = half ? ql[l] >> 4 : ql[l] & 0xF;
          if constexpr (std::is_same_v<Block, block_q5_K>) q += (b.qh[l] >> (is + half)) & 1 ? 16 : 0;
          *out++ = half ? d2 * q - m2 : d1 * q - m1;
        }
      }
    }
  });
}

inline constexpr auto dequantize_row_q2_K = dequantize_row_k2<block_q2_K>;
inline constexpr auto dequantize_row_q3_K = dequantize_row_k2<block_q3_K>;
inline constexpr auto dequantize_row_q4_K = dequantize_row_k4<block_q4_K>;
inline constexpr auto dequantize_row_q5_K = dequantize_row_k4<block_q5_K>;

// q6_K: per 128 weights, 64 bytes of ql (low nibbles: weights 0..31 / 32..63, high nibbles:
// 64..95 / 96..127) and 32 bytes of qh (2 bits for each of the 4 quarters); 8-bit scales per 16.
inline void dequantize_row_q6_K(const block_q6_K* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::dequantize_blocks<QK_K>(x, y, k, [](const block_q6_K& b, float* out) {
    const float d = fp16_to_fp32(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int n = 0; n < QK_K; n += 128, out += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int8_t((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int8_t((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l + 0] = d * sc[is + 0] * q1;
        out[l + 32] = d * sc[is + 2] * q2;
        out[l + 64] = d * sc[is + 4] * q3;
        out[l + 96] = d * sc[is + 6] * q4;
      }
    }
  });
}

inline void dequantize_row_q8_K(const block_q8_K* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::dequantize_blocks<QK_K>(x, y, k, [](const block_q8_K& b, float* out) {
    for (int j = 0; j < QK_K; ++j) out[j] = b.d * b.qs[j];
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers of the quantizers.

namespace detail {

// Round to nearest, ties to even, for |f| < 2^22: adding 1.5 * 2^23 leaves the rounded integer
// in the low mantissa bits (the FPU's default rounding does the work).
inline int nearest_int(float f) {
  EDGELLM_EXACT_FP_SCOPE
  const float val = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// Groups whose largest |x| is below this are stored as zeros.
constexpr float kGroupMaxEps = 1e-15f;

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Q8_K activations: the signed max rule. max = the value of largest |x| (first one on ties),
// iscale = -127 / max, q = nearest-even(iscale * x) clamped to 127, d = 1 / iscale, and bsums[g] =
// sum of quants 16g .. 16g + 15. This is ggml's rule since early 2024 (llama.cpp build 4748
// included): -127, not the older -128 (which needed the clamp for the max itself).
inline void quantize_row_q8_K_ref(const float* EDGELLM_RESTRICT x, block_q8_K* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK_K == 0);
  const int64_t nb = k / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float amax;
    const float max = detail::signed_max(x, QK_K, &amax);
    if (!amax) {
      // ggml leaves bsums untouched here; we zero the whole block so it is well defined
      std::memset(&y[i], 0, sizeof(block_q8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) y[i].qs[j] = int8_t(std::min(127, detail::nearest_int(iscale * x[j])));
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = int16_t(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
