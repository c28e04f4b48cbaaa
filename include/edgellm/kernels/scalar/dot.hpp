// Scalar reference dot products (the spec every SIMD variant is tested against), VecDotFn signature.
// Integer sums per block / sub-block, then one float scale, as ggml's generic kernels do.
// Standard library only; no ISA headers.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgellm/config.hpp"
#include "edgellm/kernels/scalar/block_walk.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_legacy.hpp"
#include "edgellm/quant/scales.hpp"

namespace edgellm {

namespace detail {
// q4_0 / q5_0 against q8_0: d_w * d_a * sum((q - offset) * q8). q4_1 / q5_1 against q8_1:
// d_w * d_a * sum(q * q8) + m_w * s_a, where the activation's s = fp16(d * sum(q8)) carries the min
// term (ggml's generic kernels, same float order).
template <class W, class A>
inline float vec_dot_legacy_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  using F = legacy_format<W>;
  return sum_over_blocks<W, A>(n, w, a, [](const W& x, const A& y) {
    constexpr int kOffset = F::kMin ? 0 : 1 << (F::kBits - 1), kHalf = int(sizeof(x.qs));
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      int q0, q1;
      legacy_quants(x, j, &q0, &q1);
      isum += (q0 - kOffset) * y.qs[j] + (q1 - kOffset) * y.qs[j + kHalf];
    }
    if constexpr (F::kMin) {
      return (fp16_to_fp32(x.d) * fp16_to_fp32(y.d)) * float(isum) + fp16_to_fp32(x.m) * fp16_to_fp32(y.s);
    } else {
      return float(isum) * fp16_to_fp32(x.d) * fp16_to_fp32(y.d);
    }
  });
}

// The 2 low bits of weight i of a q2_K / q3_K block: qs[(i/128)*32 + i%32] >> 2*((i%128)/32).
inline int q2_low_bits(const uint8_t* qs, int i) { return (qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

// q4_K / q5_K: sub-block s (32 weights) at qs[(s/2)*32 + l], low nibble for even s, high for odd,
// plus for q5_K bit s of qh[l] as bit 4; 6-bit scale/min from unpack_scales_mins_k4.
template <class W>
inline float vec_dot_k4_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return sum_over_blocks<W, block_q8_K>(n, w, a, [](const W& x, const block_q8_K& y) {
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x.scales, sc, mn);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t ssum = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = x.qs[(s / 2) * 32 + l];
        int q = (s & 1) ? (byte >> 4) : (byte & 0xF);
        if constexpr (std::is_same_v<W, block_q5_K>) q |= ((x.qh[l] >> s) & 1) << 4;
        ssum += q * y.qs[s * 32 + l];
      }
      isum += ssum * sc[s];
      msum += (y.bsums[2 * s] + y.bsums[2 * s + 1]) * mn[s];
    }
    return y.d * (fp16_to_fp32(x.d) * float(isum) - fp16_to_fp32(x.dmin) * float(msum));
  });
}
}  // namespace detail

// ---- legacy types: 32-weight blocks against Q8_0 (q4_1 / q5_1: Q8_1) activations ----

// w: [n/32] block_q4_0, a: [n/32] block_q8_0
inline float vec_dot_q4_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_legacy_ref<block_q4_0, block_q8_0>(n, w, a);
}
// w: [n/32] block_q4_1, a: [n/32] block_q8_1
inline float vec_dot_q4_1_q8_1_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_legacy_ref<block_q4_1, block_q8_1>(n, w, a);
}
// w: [n/32] block_q5_0, a: [n/32] block_q8_0
inline float vec_dot_q5_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_legacy_ref<block_q5_0, block_q8_0>(n, w, a);
}
// w: [n/32] block_q5_1, a: [n/32] block_q8_1
inline float vec_dot_q5_1_q8_1_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_legacy_ref<block_q5_1, block_q8_1>(n, w, a);
}

// w: [n/32] block_q8_0, a: [n/32] block_q8_0
inline float vec_dot_q8_0_q8_0_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::sum_over_blocks<block_q8_0, block_q8_0>(n, w, a, [](const block_q8_0& x, const block_q8_0& y) {
    int32_t isum = 0;
    for (int j = 0; j < QK8_0; ++j) isum += x.qs[j] * y.qs[j];
    return float(isum) * fp16_to_fp32(x.d) * fp16_to_fp32(y.d);
  });
}

// ---- K-quants: 256-weight super-blocks against Q8_K activations ----
// Minimums are applied through the activation's bsums (sums of 16 quants).

// w: [n/256] block_q2_K, a: [n/256] block_q8_K. Weight i: q2_low_bits; scale/min nibbles of
// scales[i/16].
inline float vec_dot_q2_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::sum_over_blocks<block_q2_K, block_q8_K>(n, w, a, [](const block_q2_K& x, const block_q8_K& y) {
    int32_t summs = 0;
    for (int g = 0; g < QK_K / 16; ++g) summs += y.bsums[g] * (x.scales[g] >> 4);
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int i = g * 16; i < g * 16 + 16; ++i) gsum += detail::q2_low_bits(x.qs, i) * y.qs[i];
      isum += gsum * (x.scales[g] & 0xF);
    }
    const float d8 = y.d;
    return d8 * fp16_to_fp32(x.d) * float(isum) - d8 * fp16_to_fp32(x.dmin) * float(summs);
  });
}

// w: [n/256] block_q3_K, a: [n/256] block_q8_K. Weight i: low 2 bits as in q2_K, high bit
// hmask[i%32] bit (i/32); a clear high bit means q - 4. Scales (value - 32) per 16 weights.
inline float vec_dot_q3_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::sum_over_blocks<block_q3_K, block_q8_K>(n, w, a, [](const block_q3_K& x, const block_q8_K& y) {
    int8_t sc[16];
    unpack_scales_q3_K(x.scales, sc);
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int i = g * 16; i < g * 16 + 16; ++i) {
        const int hi = (x.hmask[i % 32] >> (i / 32)) & 1;
        gsum += (detail::q2_low_bits(x.qs, i) - (hi ? 0 : 4)) * y.qs[i];
      }
      isum += gsum * sc[g];
    }
    return fp16_to_fp32(x.d) * y.d * float(isum);
  });
}

// w: [n/256] block_q4_K, a: [n/256] block_q8_K
inline float vec_dot_q4_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_k4_ref<block_q4_K>(n, w, a);
}
// w: [n/256] block_q5_K, a: [n/256] block_q8_K
inline float vec_dot_q5_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_k4_ref<block_q5_K>(n, w, a);
}

// w: [n/256] block_q6_K, a: [n/256] block_q8_K. Weight i, with c = i/128, k = (i%128)/32, l = i%32:
// low 4 bits from ql[c*64 + (k&1)*32 + l] (low nibble for k < 2, high for k >= 2), top 2 bits from
// qh[c*32 + l] >> 2k; q - 32, int8 scale per 16 weights.
inline float vec_dot_q6_K_q8_K_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::sum_over_blocks<block_q6_K, block_q8_K>(n, w, a, [](const block_q6_K& x, const block_q8_K& y) {
    int32_t isum = 0;
    for (int g = 0; g < QK_K / 16; ++g) {
      int32_t gsum = 0;
      for (int i = g * 16; i < g * 16 + 16; ++i) {
        const int c = i / 128, k = (i % 128) / 32, l = i % 32;
        const uint8_t lb = x.ql[c * 64 + (k & 1) * 32 + l];
        const int lo = k < 2 ? (lb & 0xF) : (lb >> 4);
        const int hi = (x.qh[c * 32 + l] >> (2 * k)) & 3;
        gsum += ((lo | (hi << 4)) - 32) * y.qs[i];
      }
      isum += gsum * x.scales[g];
    }
    return fp16_to_fp32(x.d) * y.d * float(isum);
  });
}

// ---- float weights against F32 activations ----

namespace detail {
inline float f32_value(float v) { return v; }

// w: [n] T, a: [n] float; products and sum in double (exact products, one rounding at the end).
template <class T, float (*ToF32)(T)>
inline float vec_dot_float_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  const auto* x = static_cast<const T*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(ToF32(x[i])) * double(y[i]);
  return float(sum);
}
}  // namespace detail

// w: [n] float, a: [n] float
inline float vec_dot_f32_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_float_ref<float, detail::f32_value>(n, w, a);
}
// w: [n] F16 bits, a: [n] float
inline float vec_dot_f16_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_float_ref<uint16_t, fp16_to_fp32_ref>(n, w, a);
}
// w: [n] BF16 bits, a: [n] float
inline float vec_dot_bf16_f32_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return detail::vec_dot_float_ref<uint16_t, bf16_to_fp32>(n, w, a);
}

}  // namespace edgellm
