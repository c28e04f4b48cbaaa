// Quality reference quantizers of the K-quant weight formats (q2_K ... q6_K): per sub-block scale
// (and min) searches, then 4/6/8-bit quantization of those scales. The same algorithms and float
// operation order as ggml's reference quantizers, which llama-quantize uses when there is no imatrix.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgellm/config.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_kquants.hpp"
#include "edgellm/quant/scales.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {
namespace detail {

// Asymmetric search (ggml's make_qkx2_quants): x ~ scale * L + min with L in [0, nmax], min <= 0.
// Starts from the min/max fit, then for nstep + 1 trial scales (nmax + rmin + rdelta * is) / range
// rounds L and solves the weighted least-squares scale and min for that L, keeping the best by
// weighted |err| (use_mad) or err^2. Returns the scale; *the_min = -min (>= 0).
// x, weights: [n]; L, Laux: [n] scratch/result.
inline float make_qkx2_quants(int n, int nmax, const float* EDGELLM_RESTRICT x, const float* EDGELLM_RESTRICT weights,
                              uint8_t* EDGELLM_RESTRICT L, float* EDGELLM_RESTRICT the_min,
                              uint8_t* EDGELLM_RESTRICT Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  EDGELLM_EXACT_FP_SCOPE
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric search for q3_K (ggml's make_q3_quants): L in [-nmax, nmax - 1] from the signed max
// rule; with do_rmse, up to 5 passes move single L values when that raises sum(w*x*L)^2/sum(w*L^2)
// (w = x^2), i.e. lowers the weighted error of the optimal scale. Stores L + nmax; returns the scale.
inline float make_q3_quants(int n, int nmax, const float* EDGELLM_RESTRICT x, int8_t* EDGELLM_RESTRICT L, bool do_rmse) {
  EDGELLM_EXACT_FP_SCOPE
  float amax;
  const float max = signed_max(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  if (do_rmse) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      L[i] = int8_t(l);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * L[i];
        if (slx > 0) {
          float sl2 = suml2 - w * L[i] * L[i];
          int new_l = nearest_int(x[i] * sl2 / slx);
          new_l = std::max(-nmax, std::min(nmax - 1, new_l));
          if (new_l != L[i]) {
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = int8_t(new_l);
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
    return sumlx / suml2;
  }
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
  }
  return 1 / iscale;
}

// Symmetric search (ggml's make_qx_quants, rmse_type 1): weights qw, or x^2 when qw is null;
// trial inverse scales -(nmax + 0.1 * is) / max for is in -9..9, keeping the one that maximises
// sum(w*x*L)^2 / sum(w*L^2). Stores L + nmax in [0, 2 nmax - 1]; returns the scale. (ggml's other
// rmse types are not used by any quantizer llama-quantize runs.)
inline float make_qx_quants(int n, int nmax, const float* EDGELLM_RESTRICT x, int8_t* EDGELLM_RESTRICT L, int rmse_type,
                            const float* EDGELLM_RESTRICT qw) {
  EDGELLM_EXACT_FP_SCOPE
  EDGELLM_DASSERT(rmse_type == 1);
  (void)rmse_type;
  float amax;
  const float max = signed_max(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = int8_t(l + nmax);
    const float w = qw ? qw[i] : x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = qw ? qw[i] : x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Packs 4 groups of 32 2-bit values (L[0..128), each < 4) into 32 bytes: group g at bits 2g.
inline void pack_2bit_128(const uint8_t* L, uint8_t* q) {
  EDGELLM_EXACT_FP_SCOPE
  for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[l] | (L[l + 32] << 2) | (L[l + 64] << 4) | (L[l + 96] << 6));
}

// q3_K: L in [0, 8): bit 2 of weight j to hmask (bit j / 32 of byte j % 32), low 2 bits as q2_K.
inline void pack_q3_K_quants(const int8_t* L, block_q3_K& y) {
  EDGELLM_EXACT_FP_SCOPE
  std::memset(y.hmask, 0, sizeof(y.hmask));
  uint8_t Lu[QK_K];
  int m = 0;
  uint8_t hm = 1;
  for (int j = 0; j < QK_K; ++j) {
    Lu[j] = uint8_t(L[j]);
    if (Lu[j] > 3) {
      y.hmask[m] = uint8_t(y.hmask[m] | hm);
      Lu[j] = uint8_t(Lu[j] - 4);
    }
    if (++m == QK_K / 8) {
      m = 0;
      hm = uint8_t(hm << 1);
    }
  }
  for (int j = 0; j < QK_K; j += 128) pack_2bit_128(Lu + j, y.qs + j / 4);
}

// q3_K: the 16 6-bit scales (0..63, i.e. value + 32): low 4 bits in bytes 0..7, high 2 in 8..11.
// `scales` must be zeroed.
inline void pack_scales_q3_K(const int* ls, uint8_t* scales) {
  for (int j = 0; j < QK_K / 16; ++j) {
    int l = ls[j];
    if (j < 8) scales[j] = uint8_t(l & 0xF);
    else scales[j - 8] = uint8_t(scales[j - 8] | ((l & 0xF) << 4));
    l >>= 4;
    scales[j % 4 + 8] = uint8_t(scales[j % 4 + 8] | (l << (2 * (j / 4))));
  }
}

// q3_K block tail, once d and the scales are stored: L re-derived from them, then packed.
inline void store_block_q3_K(const float* EDGELLM_RESTRICT x, int8_t* L, block_q3_K& y) {
  EDGELLM_EXACT_FP_SCOPE
  int8_t sc[16];
  unpack_scales_q3_K(y.scales, sc);
  for (int j = 0; j < QK_K / 16; ++j) {
    const float d = fp16_to_fp32(y.d) * sc[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = nearest_int(x[16 * j + ii] / d);
      L[16 * j + ii] = int8_t(std::max(-4, std::min(3, l)) + 4);
    }
  }
  pack_q3_K_quants(L, y);
}

// q4_K: per 64 weights, 32 bytes: weight l in the low nibble, weight l + 32 in the high one.
inline void pack_q4_K_quants(const uint8_t* L, uint8_t* q) {
  EDGELLM_EXACT_FP_SCOPE
  for (int j = 0; j < QK_K; j += 64, q += 32)
    for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
}

// q5_K: L in [0, 32): low nibbles as q4_K, bit 4 of each 64-weight group's two halves in qh.
inline void pack_q5_K_quants(const uint8_t* L, uint8_t* qh, uint8_t* ql) {
  EDGELLM_EXACT_FP_SCOPE
  std::memset(qh, 0, QK_K / 8);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < QK_K; n += 64, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] = uint8_t(qh[j] | m1);
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] = uint8_t(qh[j] | m2);
      }
      ql[j] = uint8_t(l1 | (l2 << 4));
    }
    m1 = uint8_t(m1 << 2);
    m2 = uint8_t(m2 << 2);
  }
}

// q6_K block: per 16 weights the make_qx_quants search (nmax 32, weights qw or x^2), 8-bit
// scales against the signed largest scale (-128 / max), then L re-derived from the stored scales.
inline void quantize_block_q6_K(const float* EDGELLM_RESTRICT x, const float* EDGELLM_RESTRICT qw, block_q6_K& y) {
  EDGELLM_EXACT_FP_SCOPE
  int8_t L[QK_K];
  float scales[QK_K / 16];
  for (int ib = 0; ib < QK_K / 16; ++ib)
    scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw ? qw + 16 * ib : nullptr);
  float max_abs_scale;
  const float max_scale = signed_max(scales, QK_K / 16, &max_abs_scale);
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof(block_q6_K));
    y.d = fp32_to_fp16(0.f);
    return;
  }
  const float iscale = -128.f / max_scale;
  y.d = fp32_to_fp16(1 / iscale);
  for (int ib = 0; ib < QK_K / 16; ++ib) y.scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < QK_K / 16; ++j) {
    const float d = fp16_to_fp32(y.d) * y.scales[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = nearest_int(x[16 * j + ii] / d);
      L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
    }
  }
  uint8_t* ql = y.ql;
  uint8_t* qh = y.qh;
  for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = uint8_t(L[j + l + 0] & 0xF);
      const uint8_t q2 = uint8_t(L[j + l + 32] & 0xF);
      const uint8_t q3 = uint8_t(L[j + l + 64] & 0xF);
      const uint8_t q4 = uint8_t(L[j + l + 96] & 0xF);
      ql[l + 0] = uint8_t(q1 | (q3 << 4));
      ql[l + 32] = uint8_t(q2 | (q4 << 4));
      qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                      ((L[j + l + 96] >> 4) << 6));
    }
  }
}

// q4_K / q5_K: 8 scales and 8 mins (6 bits each) into the 12-byte layout get_scale_min_k4 reads.
inline void pack_scales_mins_k4(const int ls[8], const int lm[8], uint8_t* s) {
  EDGELLM_EXACT_FP_SCOPE
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = uint8_t(ls[j]);
      s[j + 4] = uint8_t(lm[j]);
    } else {
      s[j + 4] = uint8_t((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] = uint8_t(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = uint8_t(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// q4_K / q5_K block tail: packs the 6-bit scales ls and mins lm, stores the fp16 super-scales d
// and dmin, then re-derives L in [0, nmax] from the stored values.
inline void store_block_k4(const float* EDGELLM_RESTRICT x, int nmax, const int ls[8], const int lm[8], float d_block,
                           float m_block, uint8_t* L, ggml_half* d_out, ggml_half* dmin_out, uint8_t* scales_out) {
  EDGELLM_EXACT_FP_SCOPE
  pack_scales_mins_k4(ls, lm, scales_out);
  *d_out = fp32_to_fp16(d_block);
  *dmin_out = fp32_to_fp16(m_block);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales_out, &sc, &m);
    const float d = fp16_to_fp32(*d_out) * sc;
    if (!d) continue;
    const float dm = fp16_to_fp32(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}

// Shared by q4_K and q5_K: per 32-weight sub-block, weights av|x| + |x| and the qkx2 search;
// then 6-bit scales/mins against the block maxima, and L re-derived from the stored values.
// x: [QK_K]; L: [QK_K] in [0, nmax]. Writes d, dmin, scales of the block.
inline void quantize_block_k4(const float* EDGELLM_RESTRICT x, int nmax, float rmin, int nstep, uint8_t* L,
                              ggml_half* d_out, ggml_half* dmin_out, uint8_t* scales_out) {
  EDGELLM_EXACT_FP_SCOPE
  uint8_t Laux[32];
  float weights[32];
  float mins[QK_K / 32], scales[QK_K / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  int ls[8], lm[8];
  for (int j = 0; j < QK_K / 32; ++j) {
    ls[j] = std::min(63, nearest_int(inv_scale * scales[j]));
    lm[j] = std::min(63, nearest_int(inv_min * mins[j]));
  }
  store_block_k4(x, nmax, ls, lm, max_scale / 63.f, max_min / 63.f, L, d_out, dmin_out, scales_out);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// The quantizers. x: k floats (k a multiple of QK_K); y: k / QK_K blocks.

// q2_K: per 16 weights a min/scale fit by mean-absolute-error (weights |x|), scales and mins to
// 4 bits against the block maxima, then L re-derived from the stored scale and min.
inline void quantize_row_q2_K_ref(const float* EDGELLM_RESTRICT x, block_q2_K* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::quantize_blocks<QK_K>(x, y, k, [](const float* xb, block_q2_K& b) {
    constexpr float q4scale = 15.f;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(xb[16 * j + l]);
      scales[j] = detail::make_qkx2_quants(16, 3, xb + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) b.scales[j] = uint8_t(detail::nearest_int(iscale * scales[j]));
      b.d = fp32_to_fp16(max_scale / q4scale);
    } else {
      for (int j = 0; j < QK_K / 16; ++j) b.scales[j] = 0;
      b.d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < QK_K / 16; ++j)
        b.scales[j] = uint8_t(b.scales[j] | (detail::nearest_int(iscale * mins[j]) << 4));
      b.dmin = fp32_to_fp16(max_min / q4scale);
    } else {
      b.dmin = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_fp32(b.d) * (b.scales[j] & 0xF);
      if (!d) continue;
      const float dm = fp16_to_fp32(b.dmin) * (b.scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = detail::nearest_int((xb[16 * j + ii] + dm) / d);
        L[16 * j + ii] = uint8_t(std::max(0, std::min(3, l)));
      }
    }
    for (int j = 0; j < QK_K; j += 128) detail::pack_2bit_128(L + j, b.qs + j / 4);
  });
}

// q3_K: per 16 weights the symmetric make_q3_quants search, 6-bit signed scales against the
// signed largest scale, then L re-derived; high bit to hmask, low 2 bits as q2_K.
inline void quantize_row_q3_K_ref(const float* EDGELLM_RESTRICT x, block_q3_K* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::quantize_blocks<QK_K>(x, y, k, [](const float* xb, block_q3_K& b) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int j = 0; j < QK_K / 16; ++j) scales[j] = detail::make_q3_quants(16, 4, xb + 16 * j, L + 16 * j, true);
    float amax;
    const float max_scale = detail::signed_max(scales, QK_K / 16, &amax);
    std::memset(b.scales, 0, sizeof(b.scales));
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      int ls[16];
      for (int j = 0; j < QK_K / 16; ++j) ls[j] = std::max(-32, std::min(31, detail::nearest_int(iscale * scales[j]))) + 32;
      detail::pack_scales_q3_K(ls, b.scales);
      b.d = fp32_to_fp16(1 / iscale);
    } else {
      b.d = fp32_to_fp16(0.f);
    }
    detail::store_block_q3_K(xb, L, b);
  });
}

// q4_K / q5_K: quantize_block_k4's search (q4_K: nmax 15, rmin -1, 20 steps; q5_K: 31, -0.5, 15),
// then the quants packed in the block's layout.
template <class Block>
inline void quantize_row_k4_ref(const float* EDGELLM_RESTRICT x, Block* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  constexpr bool kQ5 = std::is_same_v<Block, block_q5_K>;
  detail::quantize_blocks<QK_K>(x, y, k, [](const float* xb, Block& b) {
    uint8_t L[QK_K];
    detail::quantize_block_k4(xb, kQ5 ? 31 : 15, kQ5 ? -0.5f : -1.f, kQ5 ? 15 : 20, L, &b.d, &b.dmin, b.scales);
    if constexpr (kQ5) {
      detail::pack_q5_K_quants(L, b.qh, b.qs);
    } else {
      detail::pack_q4_K_quants(L, b.qs);
    }
  });
}
inline constexpr auto quantize_row_q4_K_ref = quantize_row_k4_ref<block_q4_K>;
inline constexpr auto quantize_row_q5_K_ref = quantize_row_k4_ref<block_q5_K>;

// q6_K: per 16 weights the make_qx_quants search (nmax 32), 8-bit scales against the signed
// largest scale (-128 / max), then L re-derived from the stored scales.
inline void quantize_row_q6_K_ref(const float* EDGELLM_RESTRICT x, block_q6_K* EDGELLM_RESTRICT y, int64_t k) {
  EDGELLM_EXACT_FP_SCOPE
  detail::quantize_blocks<QK_K>(x, y, k,
                                [](const float* xb, block_q6_K& b) { detail::quantize_block_q6_K(xb, nullptr, b); });
}

}  // namespace edgellm
EDGELLM_EXACT_FP_END
