// Reference (scalar, spec) dequantizers and quantizers of the legacy 32-weight formats
// (q4_0, q4_1, q5_0, q5_1, q8_0, q8_1) and of the plain F16 / BF16 / F32 rows. Same float
// arithmetic, statement by statement, as ggml's reference code, so results match llama.cpp bit for bit.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/group_max.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

// ---------------------------------------------------------------------------------------------
// Plain rows. F16 / BF16 conversions are exact (hardware and *_ref agree), round to nearest even.

namespace detail {
template <class S, class D, D (*Convert)(S)>
inline void convert_row(const S* EDGELLM_RESTRICT x, D* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < k; ++i) y[i] = Convert(x[i]);
}
}  // namespace detail

inline constexpr auto fp16_to_fp32_row = detail::convert_row<ggml_half, float, fp16_to_fp32>;
inline constexpr auto fp32_to_fp16_row = detail::convert_row<float, ggml_half, fp32_to_fp16>;
inline constexpr auto bf16_to_fp32_row = detail::convert_row<ggml_bf16, float, bf16_to_fp32>;
inline constexpr auto fp32_to_bf16_row = detail::convert_row<float, ggml_bf16, fp32_to_bf16>;
inline void fp32_copy_row(const float* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  if (k > 0) std::memcpy(y, x, static_cast<size_t>(k) * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Dequantizers. x: k / 32 blocks; y: k floats. k must be a multiple of 32 (checked by the
// type-erased quant/ref.hpp entry points; debug-asserted here).

namespace detail {
// The 4- and 5-bit legacy formats: kBits, and whether a block stores a min (x = d * q + m) or is
// symmetric (x = d * (q - 2^(kBits - 1))).
template <class Block> struct legacy_format;
template <> struct legacy_format<block_q4_0> { static constexpr int kBits = 4; static constexpr bool kMin = false; };
template <> struct legacy_format<block_q4_1> { static constexpr int kBits = 4; static constexpr bool kMin = true; };
template <> struct legacy_format<block_q5_0> { static constexpr int kBits = 5; static constexpr bool kMin = false; };
template <> struct legacy_format<block_q5_1> { static constexpr int kBits = 5; static constexpr bool kMin = true; };

// The unsigned quants of weights j (low nibble of qs[j]) and j + 16 (high nibble) of a 32-weight
// block; the 5-bit formats add bit j / j + 16 of qh as bit 4.
template <class Block>
inline void legacy_quants(const Block& b, int j, int* q0, int* q1) {
  *q0 = b.qs[j] & 0x0F;
  *q1 = b.qs[j] >> 4;
  if constexpr (legacy_format<Block>::kBits == 5) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof(qh));
    *q0 |= int((qh >> j) & 1) << 4;
    *q1 |= int((qh >> (j + 16)) & 1) << 4;
  }
}

}  // namespace detail

// ggml's dequantize_row_q4_0 ... q5_1 (Block: block_q4_0 ... block_q5_1): y = (q - offset) * d,
// or q * d + m.
template <class Block>
inline void dequantize_row_legacy(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  using F = detail::legacy_format<Block>;
  constexpr int kHalf = int(sizeof(x->qs));
  EDGELLM_DASSERT(k % (2 * kHalf) == 0);
  for (int64_t i = 0; i < k / (2 * kHalf); ++i, y += 2 * kHalf) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      detail::legacy_quants(x[i], j, &q0, &q1);
      if constexpr (F::kMin) {
        const float m = fp16_to_fp32(x[i].m);
        y[j] = q0 * d + m;
        y[j + kHalf] = q1 * d + m;
      } else {
        constexpr int kOffset = 1 << (F::kBits - 1);
        y[j] = (q0 - kOffset) * d;
        y[j + kHalf] = (q1 - kOffset) * d;
      }
    }
  }
}

namespace detail {
// y = q * d for blocks of QK8_0 int8 quants (q8_0, q8_1)
template <class Block>
inline void dequantize_row_q8(const Block* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK8_0 == 0);
  for (int64_t i = 0; i < k / QK8_0; ++i, y += QK8_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = x[i].qs[j] * d;
  }
}
}  // namespace detail

inline void dequantize_row_q8_0(const block_q8_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_q8(x, y, k);
}
// Not in ggml (q8_1 is an activation-only format there); here for round-trip tests and tools.
inline void dequantize_row_q8_1(const block_q8_1* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_q8(x, y, k);
}

// ---------------------------------------------------------------------------------------------
// Quantizers. The legacy formats use the max-abs rule: the scale maps the value of largest
// magnitude (signed, for the symmetric types) to the end of the range; no search.

// ggml's quantize_row_q4_0_ref ... q5_1_ref (Block: block_q4_0 ... block_q5_1). Symmetric formats:
// the value of largest |x| maps to q = 0 (d = max / -2^(kBits - 1)), so the range is used fully on
// that side; q = x / d + offset rounded half up by truncation after + offset + 0.5, values near
// -max reaching 2^kBits clamp to 2^kBits - 1. Formats with a min: d = (max - min) / (2^kBits - 1),
// q = (x - min) / d + 0.5 truncated (below 2^kBits - 0.5 by construction, so ggml's clamp on q4_1
// and none on q5_1 are the same thing).
template <class Block>
inline void quantize_row_legacy_ref(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  using F = detail::legacy_format<Block>;
  constexpr int kHalf = int(sizeof(y->qs)), kTop = (1 << F::kBits) - 1;
  EDGELLM_DASSERT(k % (2 * kHalf) == 0);
  for (int64_t i = 0; i < k / (2 * kHalf); ++i, x += 2 * kHalf) {
    float min = 0.0f, d;
    if constexpr (F::kMin) {
      float max = -FLT_MAX;
      min = FLT_MAX;
      for (int j = 0; j < 2 * kHalf; ++j) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
      }
      d = (max - min) / kTop;
      y[i].m = fp32_to_fp16(min);
    } else {
      float amax;
      d = detail::signed_max(x, 2 * kHalf, &amax) / -(1 << (F::kBits - 1));
    }
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    const auto quant = [&](float v) {
      if constexpr (F::kMin) return std::min(kTop, int(int8_t((v - min) * id + 0.5f)));
      constexpr float kHalfUp = float(1 << (F::kBits - 1)) + 0.5f;
      return std::min(kTop, int(int8_t(v * id + kHalfUp)));
    };
    uint32_t qh = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = quant(x[j]), q1 = quant(x[kHalf + j]);
      y[i].qs[j] = uint8_t((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + kHalf);
    }
    if constexpr (F::kBits == 5) std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}


// Weights and activations of the legacy types: d = amax / 127, q = roundf(x * (1 / d))
// (half away from zero, multiplying by the reciprocal as ggml does).
namespace detail {
// One 32-weight q8_0 / q8_1 block: stores the quants, returns d.
inline float quantize_q8_block(const float* EDGELLM_RESTRICT x, int8_t* EDGELLM_RESTRICT q) {
  EDGELLM_EXACT_FP_SCOPE
  float amax = 0.0f;
  for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / ((1 << 7) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  for (int j = 0; j < QK8_0; ++j) q[j] = int8_t(std::round(x[j] * id));
  return d;
}
}  // namespace detail

inline void quantize_row_q8_0_ref(const float* EDGELLM_RESTRICT x, block_q8_0* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_DASSERT(k % QK8_0 == 0);
  for (int64_t i = 0; i < k / QK8_0; ++i, x += QK8_0) y[i].d = fp32_to_fp16(detail::quantize_q8_block(x, y[i].qs));
}

// As q8_0, plus s = d * sum(q) (integer sum, scaled once).
inline void quantize_row_q8_1_ref(const float* EDGELLM_RESTRICT x, block_q8_1* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  static_assert(QK8_1 == QK8_0, "q8_1 and q8_0 blocks hold the same quants");
  EDGELLM_DASSERT(k % QK8_1 == 0);
  for (int64_t i = 0; i < k / QK8_1; ++i, x += QK8_1) {
    const float d = detail::quantize_q8_block(x, y[i].qs);
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) sum += y[i].qs[j];
    y[i].s = fp32_to_fp16(sum * d);
  }
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
