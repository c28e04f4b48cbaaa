// Scalar reference dot products (the spec every SIMD variant is tested against), VecDotFn signature.
// Integer sums per block / sub-block, then one float scale, as ggml's generic kernels do.
// Standard library only; no ISA headers.
#pragma once
#include <cstdint>
#include <cstring>

#include "edgellm/config.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/scales.hpp"

namespace edgellm {

// ---- legacy types: 32-weight blocks against Q8_0 (q4_1 / q5_1: Q8_1) activations ----

// w: [n/32] block_q4_0, a: [n/32] block_q8_0
inline float vec_dot_q4_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q4_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK4_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      isum += ((x[b].qs[j] & 0xF) - 8) * y[b].qs[j];
      isum += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK4_0 / 2];
    }
    sum += float(isum) * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
  }
  return sum;
}

// w: [n/32] block_q4_1, a: [n/32] block_q8_1. Per block d_w * d_a * isum + m_w * s_a, where the
// activation's s = fp16(d * sum(q8)) carries the min term (ggml's generic kernel, same float order).
inline float vec_dot_q4_1_q8_1_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q4_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK4_1; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < QK4_1 / 2; ++j)
      isum += (x[b].qs[j] & 0xF) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + QK4_1 / 2];
    sum += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * float(isum) + fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sum;
}

// Bit 4 of the quants of weight j (low nibbles) and j + 16 (high nibbles) of a q5 block.
inline void q5_high_bits_ref(const uint8_t qh_bytes[4], int j, int* hi_lo, int* hi_hi) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  *hi_lo = int((qh >> j) & 1) << 4;
  *hi_hi = int((qh >> (j + 16)) & 1) << 4;
}

// w: [n/32] block_q5_0, a: [n/32] block_q8_0
inline float vec_dot_q5_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q5_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK5_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      int h0, h1;
      q5_high_bits_ref(x[b].qh, j, &h0, &h1);
      isum += (((x[b].qs[j] & 0xF) | h0) - 16) * y[b].qs[j];
      isum += (((x[b].qs[j] >> 4) | h1) - 16) * y[b].qs[j + QK5_0 / 2];
    }
    sum += float(isum) * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
  }
  return sum;
}

// w: [n/32] block_q5_1, a: [n/32] block_q8_1 (min term as in q4_1)
inline float vec_dot_q5_1_q8_1_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q5_1*>(w);
  const auto* y = static_cast<const block_q8_1*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK5_1; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      int h0, h1;
      q5_high_bits_ref(x[b].qh, j, &h0, &h1);
      isum += ((x[b].qs[j] & 0xF) | h0) * y[b].qs[j] + ((x[b].qs[j] >> 4) | h1) * y[b].qs[j + QK5_1 / 2];
    }
    sum += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * float(isum) + fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sum;
}

// w: [n/32] block_q8_0, a: [n/32] block_q8_0
inline float vec_dot_q8_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q8_0*>(w);
  const auto* y = static_cast<const block_q8_0*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK8_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < QK8_0; ++j) isum += x[b].qs[j] * y[b].qs[j];
    sum += float(isum) * fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d);
  }
  return sum;
}

// ---- K-quants: 256-weight super-blocks against Q8_K activations ----
// Minimums are applied through the activation's bsums (sums of 16 quants).

// w: [n/256] block_q2_K, a: [n/256] block_q8_K. Weight i of a block: 2 bits at qs[(i/128)*32 + i%32]
// >> 2*((i%128)/32); scale/min nibbles of scales[i/16].
inline float vec_dot_q2_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q2_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t summs = 0;
    for (int g = 0; g < QK_K / 16; ++g) summs += y[b].bsums[g] * (x[b].scales[g] >> 4);
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int l = 0; l < 16; ++l) {
        const int i = g * 16 + l;
        const int q = (x[b].qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        gsum += q * y[b].qs[i];
      }
      isum += gsum * (x[b].scales[g] & 0xF);
    }
    const float d8 = y[b].d;
    sum += d8 * fp16_to_fp32(x[b].d) * float(isum) - d8 * fp16_to_fp32(x[b].dmin) * float(summs);
  }
  return sum;
}

// w: [n/256] block_q3_K, a: [n/256] block_q8_K. Weight i: low 2 bits as in q2_K, high bit
// hmask[i%32] bit (i/32); a clear high bit means q - 4. Scales (value - 32) per 16 weights.
inline float vec_dot_q3_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q3_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    int8_t sc[16];
    unpack_scales_q3_K(x[b].scales, sc);
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int l = 0; l < 16; ++l) {
        const int i = g * 16 + l;
        const int lo = (x[b].qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        const int hi = (x[b].hmask[i % 32] >> (i / 32)) & 1;
        gsum += (lo - (hi ? 0 : 4)) * y[b].qs[i];
      }
      isum += gsum * sc[g];
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * float(isum);
  }
  return sum;
}

// w: [n/256] block_q4_K, a: [n/256] block_q8_K. Sub-block s (32 weights): qs[(s/2)*32 + l], low
// nibble for even s, high for odd; 6-bit scale/min from unpack_scales_mins_k4.
inline float vec_dot_q4_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q4_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x[b].scales, sc, mn);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t ssum = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = x[b].qs[(s / 2) * 32 + l];
        ssum += ((s & 1) ? (byte >> 4) : (byte & 0xF)) * y[b].qs[s * 32 + l];
      }
      isum += ssum * sc[s];
      msum += (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]) * mn[s];
    }
    sum += y[b].d * (fp16_to_fp32(x[b].d) * float(isum) - fp16_to_fp32(x[b].dmin) * float(msum));
  }
  return sum;
}

// w: [n/256] block_q5_K, a: [n/256] block_q8_K. As q4_K plus bit s of qh[l] as bit 4.
inline float vec_dot_q5_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q5_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x[b].scales, sc, mn);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t ssum = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = x[b].qs[(s / 2) * 32 + l];
        const int q = ((s & 1) ? (byte >> 4) : (byte & 0xF)) | (((x[b].qh[l] >> s) & 1) << 4);
        ssum += q * y[b].qs[s * 32 + l];
      }
      isum += ssum * sc[s];
      msum += (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]) * mn[s];
    }
    sum += y[b].d * (fp16_to_fp32(x[b].d) * float(isum) - fp16_to_fp32(x[b].dmin) * float(msum));
  }
  return sum;
}

// w: [n/256] block_q6_K, a: [n/256] block_q8_K. Weight i, with c = i/128, k = (i%128)/32, l = i%32:
// low 4 bits from ql[c*64 + (k&1)*32 + l] (low nibble for k < 2, high for k >= 2), top 2 bits from
// qh[c*32 + l] >> 2k; q - 32, int8 scale per 16 weights.
inline float vec_dot_q6_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const block_q6_K*>(w);
  const auto* y = static_cast<const block_q8_K*>(a);
  float sum = 0.0f;
  for (int b = 0; b < n / QK_K; ++b) {
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int t = 0; t < 16; ++t) {
        const int i = g * 16 + t;
        const int c = i / 128, k = (i % 128) / 32, l = i % 32;
        const uint8_t lb = x[b].ql[c * 64 + (k & 1) * 32 + l];
        const int lo = k < 2 ? (lb & 0xF) : (lb >> 4);
        const int hi = (x[b].qh[c * 32 + l] >> (2 * k)) & 3;
        gsum += ((lo | (hi << 4)) - 32) * y[b].qs[i];
      }
      isum += gsum * x[b].scales[g];
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * float(isum);
  }
  return sum;
}

// ---- float weights against F32 activations ----

// w: [n] float, a: [n] float
inline float vec_dot_f32_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(x[i]) * double(y[i]);
  return float(sum);
}

// w: [n] F16 bits, a: [n] float
inline float vec_dot_f16_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(fp16_to_fp32_ref(x[i])) * double(y[i]);
  return float(sum);
}

// w: [n] BF16 bits, a: [n] float
inline float vec_dot_bf16_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(bf16_to_fp32(x[i])) * double(y[i]);
  return float(sum);
}

}  // namespace edgellm
