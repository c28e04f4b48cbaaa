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

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

// ---------------------------------------------------------------------------------------------
// Plain rows. F16 / BF16 conversions are exact (hardware and *_ref agree), round to nearest even.

inline void fp16_to_fp32_row(const ggml_half* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < k; ++i) y[i] = fp16_to_fp32(x[i]);
}
inline void fp32_to_fp16_row(const float* EDGELLM_RESTRICT x, ggml_half* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < k; ++i) y[i] = fp32_to_fp16(x[i]);
}
inline void bf16_to_fp32_row(const ggml_bf16* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_fp32(x[i]);
}
inline void fp32_to_bf16_row(const float* EDGELLM_RESTRICT x, ggml_bf16* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  for (int64_t i = 0; i < k; ++i) y[i] = fp32_to_bf16(x[i]);
}
inline void fp32_copy_row(const float* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  if (k > 0) std::memcpy(y, x, static_cast<size_t>(k) * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Dequantizers. x: k / 32 blocks; y: k floats. k must be a multiple of 32 (checked by the
// type-erased quant/ref.hpp entry points; debug-asserted here).

inline void dequantize_row_q4_0(const block_q4_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK4_0 == 0);
  const int64_t nb = k / QK4_0;
  for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + QK4_0 / 2] = x1 * d;
    }
  }
}

inline void dequantize_row_q4_1(const block_q4_1* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK4_1 == 0);
  const int64_t nb = k / QK4_1;
  for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + QK4_1 / 2] = x1 * d + m;
    }
  }
}

inline void dequantize_row_q5_0(const block_q5_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK5_0 == 0);
  const int64_t nb = k / QK5_0;
  for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
    const float d = fp16_to_fp32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const uint8_t xh_0 = uint8_t(((qh >> j) << 4) & 0x10);         // bit j -> bit 4
      const uint8_t xh_1 = uint8_t((qh >> (j + 12)) & 0x10);         // bit j + 16 -> bit 4
      const int x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
      const int x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
      y[j] = x0 * d;
      y[j + QK5_0 / 2] = x1 * d;
    }
  }
}

inline void dequantize_row_q5_1(const block_q5_1* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK5_1 == 0);
  const int64_t nb = k / QK5_1;
  for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const uint8_t xh_0 = uint8_t(((qh >> j) << 4) & 0x10);
      const uint8_t xh_1 = uint8_t((qh >> (j + 12)) & 0x10);
      const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
      const int x1 = (x[i].qs[j] >> 4) | xh_1;
      y[j] = x0 * d + m;
      y[j + QK5_1 / 2] = x1 * d + m;
    }
  }
}

inline void dequantize_row_q8_0(const block_q8_0* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK8_0 == 0);
  const int64_t nb = k / QK8_0;
  for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = x[i].qs[j] * d;
  }
}

// Not in ggml (q8_1 is an activation-only format there); here for round-trip tests and tools.
inline void dequantize_row_q8_1(const block_q8_1* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK8_1 == 0);
  const int64_t nb = k / QK8_1;
  for (int64_t i = 0; i < nb; ++i, y += QK8_1) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < QK8_1; ++j) y[j] = x[i].qs[j] * d;
  }
}

// ---------------------------------------------------------------------------------------------
// Quantizers. The legacy formats use the max-abs rule: the scale maps the value of largest
// magnitude (signed, for the symmetric types) to the end of the range; no search.

// x = d * (q - 8): the largest-|x| value maps to q = 0 (d = max / -8), so the range [-8, 7]
// is used fully on that side.
inline void quantize_row_q4_0_ref(const float* EDGELLM_RESTRICT x, block_q4_0* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK4_0 == 0);
  const int64_t nb = k / QK4_0;
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[QK4_0 / 2 + j] * id;
      // truncation after +8.5 rounds half up; values near -max reach 16 and clamp to 15
      const int xi0 = std::min(15, int(int8_t(x0 + 8.5f)));
      const int xi1 = std::min(15, int(int8_t(x1 + 8.5f)));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

inline void quantize_row_q4_1_ref(const float* EDGELLM_RESTRICT x, block_q4_1* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK4_1 == 0);
  const int64_t nb = k / QK4_1;
  for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK4_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 4) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[QK4_1 / 2 + j] - min) * id;
      const int xi0 = std::min(15, int(int8_t(x0 + 0.5f)));
      const int xi1 = std::min(15, int(int8_t(x1 + 0.5f)));
      y[i].qs[j] = uint8_t(xi0 | (xi1 << 4));
    }
  }
}

inline void quantize_row_q5_0_ref(const float* EDGELLM_RESTRICT x, block_q5_0* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK5_0 == 0);
  const int64_t nb = k / QK5_0;
  for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK5_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[QK5_0 / 2 + j] * id;
      const uint32_t xi0 = uint32_t(std::min(31, int(int8_t(x0 + 16.5f))));
      const uint32_t xi1 = uint32_t(std::min(31, int(int8_t(x1 + 16.5f))));
      y[i].qs[j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + QK5_0 / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

inline void quantize_row_q5_1_ref(const float* EDGELLM_RESTRICT x, block_q5_1* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK5_1 == 0);
  const int64_t nb = k / QK5_1;
  for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK5_1; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / ((1 << 5) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const float x0 = (x[j] - min) * id;
      const float x1 = (x[QK5_1 / 2 + j] - min) * id;
      const uint32_t xi0 = uint32_t(uint8_t(x0 + 0.5f));
      const uint32_t xi1 = uint32_t(uint8_t(x1 + 0.5f));
      y[i].qs[j] = uint8_t((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + QK5_1 / 2);
    }
    std::memcpy(y[i].qh, &qh, sizeof(qh));
  }
}

// Weights and activations of the legacy types: d = amax / 127, q = roundf(x * (1 / d))
// (half away from zero, multiplying by the reciprocal as ggml does).
inline void quantize_row_q8_0_ref(const float* EDGELLM_RESTRICT x, block_q8_0* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK8_0 == 0);
  const int64_t nb = k / QK8_0;
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = int8_t(std::round(x[j] * id));
  }
}

// As q8_0, plus s = d * sum(q) (integer sum, scaled once).
inline void quantize_row_q8_1_ref(const float* EDGELLM_RESTRICT x, block_q8_1* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(k % QK8_1 == 0);
  const int64_t nb = k / QK8_1;
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1 / 2; ++j) {
      y[i].qs[j] = int8_t(std::round(x[j] * id));
      y[i].qs[QK8_1 / 2 + j] = int8_t(std::round(x[QK8_1 / 2 + j] * id));
      sum += y[i].qs[j];
      sum += y[i].qs[QK8_1 / 2 + j];
    }
    y[i].s = fp32_to_fp16(sum * d);
  }
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
