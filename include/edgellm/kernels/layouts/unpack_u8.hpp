// Weight rows of any quantized type in one common integer form for prefill GEMM: w[i] =
// s[i / 16] * u[i] + m[i / 16] with u an unsigned byte. Exact (the same values the type's
// dequantizer gives, up to float rounding of s * u + m); unpacked once per row tile and reused by
// every token of the batch, so plain scalar code is fast enough.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgellm/core/dtype.hpp"
#include "edgellm/core/error.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_iquants.hpp"
#include "edgellm/quant/scales.hpp"

namespace edgellm {
namespace unpack {

// u, s and m are __restrict: a uint8_t store may alias anything, and without the promise g++ -O2
// (a user's plain build) kept the byte loops scalar.

// One 16-element group: scale and offset.
inline void group(float* s, float* m, int g, float scale, float offset) {
  s[g] = scale;
  m[g] = offset;
}

// The K-quants' and i-quants' scales also in integer form where the caller asks (ks.sc non-null): the group's
// scale is d[i / 256] * sc[i / 16] with sc the block's integer sub-block scale, so a tile can fold
// sc into its integer sums and multiply by d once per super-block (kernels/x86/gemm_u8-inl.hpp).
struct KScales {
  int16_t* sc = nullptr;  // [n / 16]
  float* d = nullptr;     // [n / 256]
};
inline void kgroup(const KScales& ks, int g, int sc) {
  if (ks.sc) ks.sc[g] = int16_t(sc);
}
inline void kblock(const KScales& ks, int64_t i, float d) {
  if (ks.d) ks.d[i] = d;
}

inline void q4_0(const block_q4_0* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m) {
  for (int64_t i = 0; i < nb; ++i, u += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 16; ++j) {
      u[j] = x[i].qs[j] & 0xF;
      u[j + 16] = x[i].qs[j] >> 4;
    }
    group(s, m, int(2 * i), d, -8 * d);
    group(s, m, int(2 * i + 1), d, -8 * d);
  }
}

inline void q4_1(const block_q4_1* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m) {
  for (int64_t i = 0; i < nb; ++i, u += 32) {
    const float d = fp16_to_fp32(x[i].d), mn = fp16_to_fp32(x[i].m);
    for (int j = 0; j < 16; ++j) {
      u[j] = x[i].qs[j] & 0xF;
      u[j + 16] = x[i].qs[j] >> 4;
    }
    group(s, m, int(2 * i), d, mn);
    group(s, m, int(2 * i + 1), d, mn);
  }
}

// q5_0 / q5_1: bit j of qh is the 5th bit of element j.
template <class B>
inline void q5_bits(const B& b, uint8_t* u) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    u[j] = uint8_t((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
    u[j + 16] = uint8_t((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

inline void q5_0(const block_q5_0* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m) {
  for (int64_t i = 0; i < nb; ++i, u += 32) {
    const float d = fp16_to_fp32(x[i].d);
    q5_bits(x[i], u);
    group(s, m, int(2 * i), d, -16 * d);
    group(s, m, int(2 * i + 1), d, -16 * d);
  }
}

inline void q5_1(const block_q5_1* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m) {
  for (int64_t i = 0; i < nb; ++i, u += 32) {
    const float d = fp16_to_fp32(x[i].d), mn = fp16_to_fp32(x[i].m);
    q5_bits(x[i], u);
    group(s, m, int(2 * i), d, mn);
    group(s, m, int(2 * i + 1), d, mn);
  }
}

// Signed bytes shifted by 128 into the unsigned range; the offset takes the 128 back out.
inline void q8_0(const block_q8_0* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m) {
  for (int64_t i = 0; i < nb; ++i, u += 32) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < 32; ++j) u[j] = uint8_t(x[i].qs[j] + 128);
    group(s, m, int(2 * i), d, -128 * d);
    group(s, m, int(2 * i + 1), d, -128 * d);
  }
}

// q2_K / q3_K: each 128 weights are 32 bytes of 2-bit fields, field j (shift 2j) holding weights
// 32j .. 32j + 31. Written with constant shifts so the byte loops vectorize (by a shift in a
// variable g++ kept them scalar: 0.56 ns per weight for q2_K, 5x q4_K's).
inline void q2_K(const block_q2_K* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m, const KScales& ks = {}) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    kblock(ks, i, d);
    const uint8_t* q = x[i].qs;
    for (int c = 0; c < 2; ++c, q += 32, u += 128) {
      for (int l = 0; l < 32; ++l) {
        u[l] = q[l] & 3;
        u[l + 32] = (q[l] >> 2) & 3;
        u[l + 64] = (q[l] >> 4) & 3;
        u[l + 96] = q[l] >> 6;
      }
      for (int k = 0; k < 8; ++k) {
        const int g = int(16 * i) + 8 * c + k;
        const uint8_t sc = x[i].scales[8 * c + k];
        group(s, m, g, d * (sc & 0xF), -dmin * (sc >> 4));
        kgroup(ks, g, sc & 0xF);
      }
    }
  }
}

// The q3_K high bit clear means -4: u = low bits + 4 * high bit, offset -4. Field j of the c-th
// 128 weights takes hmask bit 4c + j.
inline void q3_K(const block_q3_K* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m, const KScales& ks = {}) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    kblock(ks, i, d);
    int8_t sc[16];
    unpack_scales_q3_K(x[i].scales, sc);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    for (int c = 0; c < 2; ++c, q += 32, u += 128) {
      for (int l = 0; l < 32; ++l) {
        const int h = c == 0 ? hm[l] : hm[l] >> 4;
        u[l] = uint8_t((q[l] & 3) | ((h & 1) << 2));
        u[l + 32] = uint8_t(((q[l] >> 2) & 3) | ((h & 2) << 1));
        u[l + 64] = uint8_t(((q[l] >> 4) & 3) | (h & 4));
        u[l + 96] = uint8_t((q[l] >> 6) | ((h & 8) >> 1));
      }
      for (int k = 0; k < 8; ++k) {
        const int is = 8 * c + k;
        const float dl = d * sc[is];
        group(s, m, int(16 * i) + is, dl, -4 * dl);
        kgroup(ks, int(16 * i) + is, sc[is]);
      }
    }
  }
}

// q4_K / q5_K (Block): per 64 weights the low nibbles then the high nibbles of 32 bytes, q5_K
// with bit j / j + 1 of qh[l] as bit 4; a 6-bit scale and min per 32.
template <class Block>
inline void k4(const Block* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m, const KScales& ks) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    kblock(ks, i, d);
    uint8_t sc[8], mn[8];
    unpack_scales_mins_k4(x[i].scales, sc, mn);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32, u += 64) {
      for (int l = 0; l < 32; ++l) {
        u[l] = q[l] & 0xF;
        u[l + 32] = q[l] >> 4;
        if constexpr (std::is_same_v<Block, block_q5_K>) {
          u[l] = uint8_t(u[l] | (((x[i].qh[l] >> j) & 1) << 4));
          u[l + 32] = uint8_t(u[l + 32] | (((x[i].qh[l] >> (j + 1)) & 1) << 4));
        }
      }
      for (int k = 0; k < 2; ++k) {
        const int g = int(16 * i) + 2 * (j + k);
        group(s, m, g, d * sc[j + k], -dmin * mn[j + k]);
        group(s, m, g + 1, d * sc[j + k], -dmin * mn[j + k]);
        kgroup(ks, g, sc[j + k]);
        kgroup(ks, g + 1, sc[j + k]);
      }
    }
  }
}

inline void q6_K(const block_q6_K* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m, const KScales& ks = {}) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    kblock(ks, i, d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < QK_K; n += 128, u += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        u[l + 0] = uint8_t((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
        u[l + 32] = uint8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
        u[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        u[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
      // Group g of this 128 (16 elements) has scale sc[g]: l / 16 picks 0/1, the quarter adds 2.
      for (int g = 0; g < 8; ++g) {
        const float dl = d * sc[g];
        group(s, m, int(16 * i) + n / 16 + g, dl, -32 * dl);
        kgroup(ks, int(16 * i) + n / 16 + g, sc[g]);
      }
    }
  }
}

// The i-quants and ternary types: quant/ref_iquants.hpp's signed integer weights q (what its
// dequantizers scale) shifted by kOff into the unsigned range, and per 16 weights the sub-block
// scale dl (sub-blocks of kSub weights) with m = -kOff * dl. One formula per type, Sc: the K form
// takes the integer Sc(block, sub-block) under d / 2^kDShift (ks, where the caller asks), the float
// form dl = (d / 2^kDShift) * Sc. That equals the reference dequantizer's dl bit for bit (e.g.
// IQ2_XS: d * (ls + 0.5) * 0.25 = d / 8 * (2 ls + 1), one rounding either way, scaling by a power
// of two being exact), which test_dot_iquants checks. UnpackU writes a block's u = q + kOff
// (shifted below, or a faster type-specific form).
template <class Block, int kBlock, int kSub, int kOff, void (*UnpackU)(const Block&, uint8_t*),
          int (*Sc)(const Block&, int), int kDShift>
inline void iq_scaled(const Block* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m,
                      const KScales& ks) {
  for (int64_t i = 0; i < nb; ++i, u += kBlock) {
    const float dk = fp16_to_fp32(x[i].d) * (1.0f / float(1 << kDShift));
    kblock(ks, i, dk);
    UnpackU(x[i], u);
    for (int g = 0; g < kBlock / 16; ++g) {
      const int sc = Sc(x[i], 16 * g / kSub);
      const float dl = dk * float(sc);
      group(s, m, int(i * (kBlock / 16) + g), dl, -float(kOff) * dl);
      kgroup(ks, int(i * (kBlock / 16) + g), sc);
    }
  }
}
// u = q + kOff from the type's signed unpacker (quant/ref_iquants.hpp).
template <class Block, int kBlock, int kOff, void (*Unpack)(const Block&, int8_t*)>
inline void shifted(const Block& b, uint8_t* __restrict u) {
  int8_t q[kBlock];
  Unpack(b, q);
  for (int j = 0; j < kBlock; ++j) u[j] = uint8_t(q[j] + kOff);
}

// The grid types' u = kOff +- grid byte for 8 weights at once in 64-bit words (perf: the byte
// loop of unpack_iq3_s was 12 % of a TinyLlama IQ3_S pp512 with the K form). Bytes of point are
// <= off's, so neither off - point nor off + point borrows or carries between bytes. Sign bit j
// of signs set: byte j negated.
inline uint64_t signed_point_u8(uint64_t point, uint32_t signs, uint64_t off) {
  const uint64_t bits = (uint64_t(signs & 0xFF) * 0x0101010101010101ull) & 0x8040201008040201ull;
  const uint64_t neg = ((((bits + 0x7F7F7F7F7F7F7F7Full) | bits) & 0x8080808080808080ull) >> 7) * 0xFF;
  return ((off - point) & neg) | ((off + point) & ~neg);
}
inline void put_u64(uint8_t* u, uint64_t v) { std::memcpy(u, &v, 8); }
// IQ3_S (kOff 15): per 8 weights two 4-byte points (9-bit indexes) and a sign byte.
inline void iq3_s_u(const block_iq3_s& b, uint8_t* __restrict u) {
  constexpr uint64_t kOff = 15 * 0x0101010101010101ull;
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const uint32_t qh = b.qh[ib];
    for (int l = 0; l < 4; ++l) {
      const uint32_t i1 = b.qs[8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256);
      const uint32_t i2 = b.qs[8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
      const uint64_t point = uint64_t(iq3s_grid[i1]) | (uint64_t(iq3s_grid[i2]) << 32);
      put_u64(u + 32 * ib + 8 * l, signed_point_u8(point, b.signs[4 * ib + l], kOff));
    }
  }
}
// IQ2_XS (kOff 43): per 8 weights a 9-bit index of an 8-byte point and 7 sign bits.
inline void iq2_xs_u(const block_iq2_xs& b, uint8_t* __restrict u) {
  constexpr uint64_t kOff = 43 * 0x0101010101010101ull;
  for (int g = 0; g < QK_K / 8; ++g) put_u64(u + 8 * g, signed_point_u8(iq2xs_grid[b.qs[g] & 511], ksigns_iq2xs[b.qs[g] >> 9], kOff));
}

// The integer sub-block scales of iq_scaled's K form (quant/ref_iquants.hpp's *_dl without d).
inline int iq2_xxs_sc(const block_iq2_xxs& b, int ib32) { return 2 * int(iq2_xxs_scale(b, ib32)) + 1; }
template <class Block>
inline int iq2_sc16(const Block& b, int ib16) { return 2 * int(iq2_scale16(b, ib16)) + 1; }
inline int iq3_xxs_sc(const block_iq3_xxs& b, int ib32) { return 2 * int(iq3_xxs_scale(b, ib32)) + 1; }
inline int iq3_s_sc(const block_iq3_s& b, int ib32) { return 2 * int(iq3_s_scale(b, ib32)) + 1; }
inline int iq4_xs_sc(const block_iq4_xs& b, int ib32) { return iq4_xs_scale(b, ib32) - 32; }
template <class Block>  // one float scale for the block (IQ4_NL, whose activations are Q8_0, has no K form)
inline int unit_sc(const Block&, int) { return 1; }

// IQ1_S / IQ1_M: w = dl * (q + delta / 8) = (dl / 8) * (8q + delta), 8q + delta in [-9, 9] shifted
// by 9; the K form's integer scale 2s + 1 under d / 8.
inline void iq1_group8(const int8_t* q, bool negative, uint8_t* __restrict u) {
  for (int j = 0; j < 8; ++j) u[j] = uint8_t(8 * q[j] + (negative ? -1 : 1) + 9);
}
// An IQ1 type or transcoded form through the accessors of detail::dequantize_row_iq1.
template <class B, void (*Unpack)(const B&, int8_t*), float (*D)(const B&), uint32_t (*Scale16)(const B&, int),
          bool (*Neg8)(const B&, int)>
inline void iq1(const B* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m,
                const KScales& ks) {
  int8_t q[QK_K];
  for (int64_t i = 0; i < nb; ++i, u += QK_K) {
    const float d = D(x[i]);
    kblock(ks, i, d * 0.125f);
    Unpack(x[i], q);
    for (int g = 0; g < QK_K / 8; ++g) iq1_group8(q + 8 * g, Neg8(x[i], g), u + 8 * g);
    for (int g = 0; g < QK_K / 16; ++g) {
      const int isc = 2 * int(Scale16(x[i], g)) + 1;
      const float dl = d * float(isc) * 0.125f;
      group(s, m, int(16 * i) + g, dl, -9 * dl);
      kgroup(ks, int(16 * i) + g, isc);
    }
  }
}
inline void iq1_s(const block_iq1_s* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m,
                  const KScales& ks) {
  iq1<block_iq1_s, unpack_iq1_s, iq1_s_dfloat, iq1_s_scale16, iq1_s_neg8>(x, nb, u, s, m, ks);
}
inline void iq1_m(const block_iq1_m* x, int64_t nb, uint8_t* __restrict u, float* __restrict s, float* __restrict m,
                  const KScales& ks) {
  iq1<block_iq1_m, unpack_iq1_m, iq1_m_dfloat, iq1_m_scale16, iq1_m_delta_negative>(x, nb, u, s, m, ks);
}

}  // namespace unpack

// Whether unpack_row_u8 handles the type.
inline bool can_unpack_u8(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ4_NL: case DType::IQ4_XS: case DType::TQ1_0:
    case DType::TQ2_0: return true;
    default: return false;
  }
}

// The largest byte u unpack_row_u8 writes for the type (the quant range, q8_0 shifted by 128).
inline int u8_form_max(DType t) {
  switch (t) {
    case DType::Q2_K: return 3;
    case DType::Q3_K: return 7;
    case DType::Q4_0: case DType::Q4_1: case DType::Q4_K: return 15;
    case DType::Q5_0: case DType::Q5_1: case DType::Q5_K: return 31;
    case DType::Q6_K: return 63;
    case DType::TQ1_0: return 2;
    case DType::TQ2_0: return 3;  // 2-bit digits: ggml's quantizer writes 0 .. 2, a file may hold 3
    case DType::IQ1_S: case DType::IQ1_M: return 18;
    case DType::IQ3_S: return 30;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: return 86;
    case DType::IQ3_XXS: return 124;
    case DType::IQ4_NL: case DType::IQ4_XS: return 240;
    default: return 255;
  }
}

// Whether the type's weights are an int8 value times a float scale per 32 (the signed form below):
// q8_0, and IQ4_NL / IQ4_XS (kvalues_iq4nl, -127 .. 113), whose bytes shifted into the unsigned form
// reach 240.
inline bool has_signed_form(DType t) { return t == DType::Q8_0 || t == DType::IQ4_NL || t == DType::IQ4_XS; }

// Block b of 32 weights of a row of a has_signed_form type: its int8 values q and its scale.
inline float signed_block32(DType t, const void* row, int64_t b, int8_t* q) {
  switch (t) {
    case DType::Q8_0: {
      const block_q8_0& x = static_cast<const block_q8_0*>(row)[b];
      std::memcpy(q, x.qs, 32);
      return fp16_to_fp32(x.d);
    }
    case DType::IQ4_NL: {
      const block_iq4_nl& x = static_cast<const block_iq4_nl*>(row)[b];
      unpack_iq4_32(x.qs, q);
      return fp16_to_fp32(x.d);
    }
    case DType::IQ4_XS: {
      const block_iq4_xs& x = static_cast<const block_iq4_xs*>(row)[b / 8];
      unpack_iq4_32(x.qs + 16 * (b % 8), q);
      return iq4_xs_dl(fp16_to_fp32(x.d), x, int(b % 8));
    }
    default: throw_error("u8 GEMM: the signed form takes q8_0, iq4_nl or iq4_xs, not ", dtype_name(t));
  }
}

// Whether the type also has the signed K form below (int8 values, an integer scale per 32 under a
// float d per 256, against Q8_K): IQ4_XS, whose scale is ls - 32 under the block's d.
inline bool has_signed_k_form(DType t) { return t == DType::IQ4_XS; }

// Whether the type's groups have integer scales under a per-256 d (unpack_row_u8's ks, the K form):
// the K-quants, and the i-quants and ternary types whose activations are Q8_K (all but IQ4_NL).
inline bool has_kscales(DType t) {
  switch (t) {
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ4_XS: case DType::TQ1_0: case DType::TQ2_0: return true;
    default: return false;
  }
}

// The offset off of a has_kscales type whose unpacked bytes are u = value + off with m = -off * dl
// (the signed-offset K form's types), else -1 (Q2_K, Q4_K, Q5_K: a min per group).
inline int u8_form_offset(DType t) {
  switch (t) {
    case DType::Q3_K: return 4;
    case DType::Q6_K: return 32;
    case DType::TQ1_0: case DType::TQ2_0: return 1;
    case DType::IQ1_S: case DType::IQ1_M: return 9;
    case DType::IQ3_S: return 15;
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: return 43;
    case DType::IQ3_XXS: return 62;
    case DType::IQ4_XS: return 127;
    default: return -1;
  }
}
// The largest |value| of the signed-offset K form's bytes (max(off, u8_form_max - off)).
inline int u8_form_max_abs(DType t) {
  const int off = u8_form_offset(t);
  return off < 0 ? -1 : off > u8_form_max(t) - off ? off : u8_form_max(t) - off;
}

// row: n elements of type t (n a multiple of the block size). u: [n] bytes; s, m: [n / 16] floats.
// ks (has_kscales types only): also the integer scales [n / 16] and d [n / 256].
inline void unpack_row_u8(DType t, const void* row, int64_t n, uint8_t* u, float* s, float* m,
                          const unpack::KScales& ks = {}) {
  const int64_t nb = n / dtype_block_size(t);
  EDGELLM_CHECK(!ks.sc || has_kscales(t), "unpack_row_u8: type ", dtype_name(t), " has no integer scales");
  using namespace unpack;  // the i-quants' helpers below
  switch (t) {
    case DType::Q4_0: return unpack::q4_0(static_cast<const block_q4_0*>(row), nb, u, s, m);
    case DType::Q4_1: return unpack::q4_1(static_cast<const block_q4_1*>(row), nb, u, s, m);
    case DType::Q5_0: return unpack::q5_0(static_cast<const block_q5_0*>(row), nb, u, s, m);
    case DType::Q5_1: return unpack::q5_1(static_cast<const block_q5_1*>(row), nb, u, s, m);
    case DType::Q8_0: return unpack::q8_0(static_cast<const block_q8_0*>(row), nb, u, s, m);
    case DType::Q2_K: return unpack::q2_K(static_cast<const block_q2_K*>(row), nb, u, s, m, ks);
    case DType::Q3_K: return unpack::q3_K(static_cast<const block_q3_K*>(row), nb, u, s, m, ks);
    case DType::Q4_K: return unpack::k4(static_cast<const block_q4_K*>(row), nb, u, s, m, ks);
    case DType::Q5_K: return unpack::k4(static_cast<const block_q5_K*>(row), nb, u, s, m, ks);
    case DType::Q6_K: return unpack::q6_K(static_cast<const block_q6_K*>(row), nb, u, s, m, ks);
    case DType::IQ2_XXS:
      return iq_scaled<block_iq2_xxs, QK_K, 32, 43, shifted<block_iq2_xxs, QK_K, 43, unpack_iq2_xxs>,
                       iq2_xxs_sc, 3>(static_cast<const block_iq2_xxs*>(row), nb, u, s, m, ks);
    case DType::IQ2_XS:
      return iq_scaled<block_iq2_xs, QK_K, 16, 43, iq2_xs_u, iq2_sc16<block_iq2_xs>, 3>(
          static_cast<const block_iq2_xs*>(row), nb, u, s, m, ks);
    case DType::IQ2_S:
      return iq_scaled<block_iq2_s, QK_K, 16, 43, shifted<block_iq2_s, QK_K, 43, unpack_iq2_s>,
                       iq2_sc16<block_iq2_s>, 3>(static_cast<const block_iq2_s*>(row), nb, u, s, m, ks);
    case DType::IQ3_XXS:
      return iq_scaled<block_iq3_xxs, QK_K, 32, 62, shifted<block_iq3_xxs, QK_K, 62, unpack_iq3_xxs>,
                       iq3_xxs_sc, 2>(static_cast<const block_iq3_xxs*>(row), nb, u, s, m, ks);
    case DType::IQ3_S:
      return iq_scaled<block_iq3_s, QK_K, 32, 15, iq3_s_u, iq3_s_sc, 0>(static_cast<const block_iq3_s*>(row), nb, u,
                                                                        s, m, ks);
    case DType::IQ4_NL:
      return iq_scaled<block_iq4_nl, QK4_NL, QK4_NL, 127, shifted<block_iq4_nl, QK4_NL, 127, unpack_iq4_nl>,
                       unit_sc<block_iq4_nl>, 0>(static_cast<const block_iq4_nl*>(row), nb, u, s, m, ks);
    case DType::IQ4_XS:
      return iq_scaled<block_iq4_xs, QK_K, 32, 127, shifted<block_iq4_xs, QK_K, 127, unpack_iq4_xs>,
                       iq4_xs_sc, 0>(static_cast<const block_iq4_xs*>(row), nb, u, s, m, ks);
    case DType::TQ1_0:
      return iq_scaled<block_tq1_0, QK_K, QK_K, 1, shifted<block_tq1_0, QK_K, 1, unpack_tq1_0>,
                       unit_sc<block_tq1_0>, 0>(static_cast<const block_tq1_0*>(row), nb, u, s, m, ks);
    case DType::TQ2_0:
      return iq_scaled<block_tq2_0, QK_K, QK_K, 1, shifted<block_tq2_0, QK_K, 1, unpack_tq2_0>,
                       unit_sc<block_tq2_0>, 0>(static_cast<const block_tq2_0*>(row), nb, u, s, m, ks);
    case DType::IQ1_S: return unpack::iq1_s(static_cast<const block_iq1_s*>(row), nb, u, s, m, ks);
    case DType::IQ1_M: return unpack::iq1_m(static_cast<const block_iq1_m*>(row), nb, u, s, m, ks);
    default: throw_error("unpack_row_u8: type ", dtype_name(t), " is not supported");
  }
}

// ---- the u8 GEMM's row form (KernelTable::u8_gemm, kernels/matmul.hpp) ----
// One row or token in the GEMM's form. Weights: u = unsigned quants, sv = scale of each int32
// lane (4 weights; per 32 weights: s[2k] x 4, s[2k+1] x 4), m = offset per 16. Activations: u =
// int8 quants, sv = the block's scale for each lane, m = scale * sum of the 16 quants.
// Sizes per row of n: u n bytes, sv n / 4 floats, m n / 16 floats.
// Two more weight forms (U8GemmKernel::tile_k at every x86 level, tile_s8 without VNNI). Both pack rows in
// groups of kGroupRows, the register tile's rows, interleaved so that one 32-byte load holds 4
// weights of each of the 8 rows (a lane per row): per 4 weights, the 4 bytes of each row in turn
// (n * 8 bytes). A group fills the first u8_gemm_group_bytes(form, n) bytes of its 8 GEMM rows'
// memory, from the first row's u; rows a short group lacks are zero.
// - K form (has_kscales weights: K-quants and i-quants against Q8_K activations; n % 256 == 0):
//   after the unsigned quants, per 16 weights the rows' integer group scales sc as int16 pairs
//   (sc, sc) for vpmaddwd (32 bytes), then per 16 weights the rows' offsets m (8 floats), then per 256 weights the rows'
//   super-block scales d (8 floats): w = d * sc * u + m. Activations also give d.
// - signed-offset K form (the K form's types whose m is only their bytes' offset, -off * d * sc
//   (u8_form_offset: not Q2_K / Q4_K / Q5_K, whose mins are their own); tile_ks, levels without
//   VNNI): the K form with the int8 values u - off instead of u, and in place of the offsets per
//   256 weights the rows' int32 corrections c = 128 * sum over the super-block's 16-groups of
//   sc * (sum of the group's values), then d. The tile takes the activations as unsigned bytes
//   a + 128, so sum(w * a) = sum(w * (a + 128)) - 128 * sum(w) per row, and
//   dot = d_w * d_a * (sum over groups of sc * sum(w * (a + 128)) - c): the offsets' per-16 float
//   step per token of the K form gone, the super-block's integer sum exact.
// - signed form (has_signed_form weights: q8_0 against Q8_0, iq4_nl against Q8_0, iq4_xs against
//   Q8_K; n % 32 == 0): after the int8 values (not shifted), per 32 weights the rows' block scales
//   (8 floats): w = d * int8(u).
// - signed K form (has_signed_k_form weights: iq4_xs against Q8_K; n % 256 == 0): after the int8
//   values, per 32 weights the rows' integer block scales sc as int16 pairs (sc, sc) for vpmaddwd
//   (32 bytes), then per 256 weights the rows' super-block scales d (8 floats): w = d * sc * int8(u).
// Sizes per row of n: u n bytes, sv n / 4 floats, m n / 16 floats, d ceil(n / 256) floats.
inline size_t u8_gemm_row_bytes(int64_t n) {
  return size_t(n) + size_t(n) / 4 * 4 + size_t(n) / 16 * 4 + size_t((n + 255) / 256) * 4;
}

struct U8GemmRow {
  uint8_t* u;
  float* sv;
  float* m;
  float* d;
  static U8GemmRow at(uint8_t* base, int64_t n, int64_t i) {
    uint8_t* p = base + size_t(i) * u8_gemm_row_bytes(n);
    return {p, reinterpret_cast<float*>(p + n), reinterpret_cast<float*>(p + n + n),
            reinterpret_cast<float*>(p + n + n + size_t(n) / 16 * 4)};
  }
};

// The tiles read each scale repeated over several lanes. These write the repeats with 64-bit
// stores: g++ -O2 (a user's plain build) stored them element by element, 22 % of its Q4_K_M
// prefill. repeat8: `copies` copies of the 8 bytes of pattern at dst.
inline void repeat8(void* dst, uint64_t pattern, int copies) {
  for (int i = 0; i < copies; ++i) std::memcpy(static_cast<uint8_t*>(dst) + 8 * i, &pattern, 8);
}
inline uint64_t float_x2(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return uint64_t(b) * 0x0000000100000001ull;
}

// Blocks of 32 int8 quants and an fp16 d (Q8_0, Q8_1) into the GEMM form: quants, the block's
// scale per lane, and m per 16 from half_m(block, h). Activations.
template <class B, class HalfM>
inline void u8_gemm_pack_blocks32(const B* q8, int64_t n, U8GemmRow out, HalfM half_m) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = fp16_to_fp32(q8[b].d);
    for (int j = 0; j < 32; ++j) out.u[b * 32 + j] = uint8_t(q8[b].qs[j]);
    repeat8(out.sv + b * 8, float_x2(d), 4);
    for (int h = 0; h < 2; ++h) out.m[b * 2 + h] = half_m(q8[b], h);
  }
}

// Floats of scratch u8_gemm_pack_weight_row needs for a row of n.
inline size_t u8_gemm_pack_scratch(int64_t n) { return size_t(n) / 16; }

enum class U8Form { Unsigned, KScales, Signed, SignedK, KSigned };

// The grouped forms (K and signed, see above): rows per group, bytes of a group of rows of n, and
// the scratch bytes u8_gemm_pack_group needs.
inline constexpr int kGroupRows = 8;
static_assert(kGroupRows * 4 == 32, "a group's 4 weights per row fill one 32-byte vector");
// Byte offsets of a group's sections after its n * 8 quant bytes (each 4 bytes per row): K form
// sc (int16 pairs), m and d; signed form d (the block scales); signed K form sc (int16 pairs per
// 32) and d. bytes: the whole group.
struct U8GroupLayout {
  size_t sc = 0, m = 0, d = 0, bytes = 0;
  U8GroupLayout(U8Form form, int64_t n) {
    const size_t G = kGroupRows, un = size_t(n);
    if (form == U8Form::KScales) {
      sc = un * G;
      m = sc + un / 16 * G * 4;
      d = m + un / 16 * G * 4;
      bytes = d + un / 256 * G * 4;
    } else if (form == U8Form::KSigned) {
      sc = un * G;
      m = sc + un / 16 * G * 4;  // the corrections c, int32
      d = m + un / 256 * G * 4;
      bytes = d + un / 256 * G * 4;
    } else if (form == U8Form::SignedK) {
      sc = un * G;
      d = sc + un / 32 * G * 4;
      bytes = d + un / 256 * G * 4;
    } else {
      d = un * G;
      bytes = d + un / 32 * G * 4;
    }
  }
};
inline size_t u8_gemm_group_bytes(U8Form form, int64_t n) { return U8GroupLayout(form, n).bytes; }
inline size_t u8_gemm_group_scratch(int64_t n) {  // per row: u, then floats s, m, int16 sc, floats d
  return size_t(kGroupRows) * (size_t(n) + size_t(n) / 16 * 4 * 2 + size_t(n) / 16 * 2 + size_t(n + 255) / 256 * 4);
}

// The quant bytes of a group: kGroupRows rows of n bytes (row r at src + r * stride) interleaved
// into out, 4 bytes of each row per 32-byte step. n % 32 == 0. (KernelTable::u8_gemm.interleave
// does the same with vector shuffles.)
inline void u8_gemm_interleave_ref(const uint8_t* src, size_t stride, int64_t n, uint8_t* __restrict out) {
  for (int64_t s4 = 0; s4 < n / 4; ++s4)
    for (int r = 0; r < kGroupRows; ++r) std::memcpy(out + (size_t(s4) * kGroupRows + size_t(r)) * 4, src + size_t(r) * stride + 4 * s4, 4);
}
using U8InterleaveFn = void (*)(const uint8_t* src, size_t stride, int64_t n, uint8_t* out);
// A stored row's unpack_row_u8 from another form of it (PackedFormat::unpack_u8); null: the type's.
using UnpackRowU8Fn = void (*)(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks);

// Rows (nrows <= kGroupRows of them) into one group of a grouped form at out
// (u8_gemm_group_bytes(form, n) bytes): KScales takes has_kscales types, Signed has_signed_form,
// SignedK has_signed_k_form. scratch: u8_gemm_group_scratch(n) bytes. interleave: the table's,
// else u8_gemm_interleave_ref. unpack: the rows' unpacker where they are not t's file rows (the
// K form only).
inline void u8_gemm_pack_group(DType t, U8Form form, const void* const* rows, int nrows, int64_t n,
                               uint8_t* __restrict out, uint8_t* scratch, U8InterleaveFn interleave = nullptr,
                               UnpackRowU8Fn unpack = nullptr) {
  constexpr int G = kGroupRows;
  const bool ksigned = form == U8Form::KSigned, k = form == U8Form::KScales || ksigned, sk = form == U8Form::SignedK;
  EDGELLM_CHECK(form != U8Form::Unsigned, "u8 GEMM: the unsigned form packs one row at a time");
  EDGELLM_CHECK(ksigned ? u8_form_offset(t) >= 0 : k ? has_kscales(t) : sk ? has_signed_k_form(t) : has_signed_form(t), "u8 GEMM: the ",
                ksigned ? "signed-offset K form takes K-quants and Q8_K i-quants without mins"
                : k     ? "K form takes K-quants and Q8_K i-quants"
                : sk    ? "signed K form takes iq4_xs"
                        : "signed form takes q8_0, iq4_nl or iq4_xs",
                ", not ", dtype_name(t));
  EDGELLM_CHECK(!unpack || k, "u8 GEMM: rows in another form than the file's take the K form");
  const int64_t step = k || sk ? 256 : 32;
  EDGELLM_CHECK(nrows >= 0 && nrows <= G && n % step == 0, "u8 GEMM: a group takes at most ", G,
                " rows of a multiple of ", step, ", got ", nrows, " of ", n);
  const U8GroupLayout at(form, n);
  if (nrows < G) std::memset(out, 0, at.bytes);
  if (sk) {  // IQ4_XS: per 32 weights the int8 values and (ls - 32, ls - 32), per 256 d
    float* gd = reinterpret_cast<float*>(out + at.d);
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; ++b)
      for (int r = 0; r < nrows; ++r) {
        const block_iq4_xs& x = static_cast<const block_iq4_xs*>(rows[r])[b / 8];
        unpack_iq4_32(x.qs + 16 * (b % 8), q);
        for (int j = 0; j < 8; ++j) std::memcpy(out + ((size_t(b) * 8 + size_t(j)) * G + size_t(r)) * 4, q + 4 * j, 4);
        const uint32_t pair = uint32_t(uint16_t(int16_t(unpack::iq4_xs_sc(x, int(b % 8))))) * 0x00010001u;
        std::memcpy(out + at.sc + (size_t(b) * G + size_t(r)) * 4, &pair, 4);
        if (b % 8 == 0) gd[size_t(b / 8) * G + size_t(r)] = fp16_to_fp32(x.d);
      }
    return;
  }
  if (!k) {
    float* scales = reinterpret_cast<float*>(out + at.d);
    int8_t q[32];
    for (int64_t b = 0; b < n / 32; ++b) {  // written in order, as the K form below
      for (int r = 0; r < nrows; ++r) {
        scales[size_t(b) * G + size_t(r)] = signed_block32(t, rows[r], b, q);
        for (int j = 0; j < 8; ++j) std::memcpy(out + ((size_t(b) * 8 + size_t(j)) * G + size_t(r)) * 4, q + 4 * j, 4);
      }
    }
    return;
  }
  // The group's rows unpacked one after another (u, s, m, sc, d each; a short group's missing
  // rows zero), then interleaved step by step, so the group is written in order (a row at a time,
  // its 4-byte stores 32 bytes apart cost twice the unpacking).
  const size_t per_row = u8_gemm_group_scratch(n) / G;
  auto row_u = [&](int r) { return scratch + size_t(r) * per_row; };
  auto row_f = [&](int r, int64_t off) { return reinterpret_cast<float*>(row_u(r) + n) + off; };  // s, m, sc, d
  const int64_t ng = n / 16;
  for (int r = 0; r < nrows; ++r) {
    const unpack::KScales ks{reinterpret_cast<int16_t*>(row_f(r, 2 * ng)), row_f(r, 2 * ng) + ng / 2};
    if (unpack) unpack(rows[r], n, row_u(r), row_f(r, 0), row_f(r, ng), ks);
    else unpack_row_u8(t, rows[r], n, row_u(r), row_f(r, 0), row_f(r, ng), ks);
  }
  auto row_sc = [&](int r) { return reinterpret_cast<const int16_t*>(row_f(r, 2 * ng)); };
  if (ksigned) {  // values u - off, and per super-block c = 128 * sum over groups of sc * sum(values)
    const int off = u8_form_offset(t);
    int32_t* gc = reinterpret_cast<int32_t*>(out + at.m);
    for (int r = 0; r < nrows; ++r) {
      uint8_t* u = row_u(r);
      for (int64_t b = 0; b < n / 256; ++b) {
        int32_t c = 0;
        for (int64_t g = b * 16; g < b * 16 + 16; ++g) {
          int32_t sum = 0;
          for (int64_t i = g * 16; i < g * 16 + 16; ++i) {
            const int v = int(u[i]) - off;
            u[i] = uint8_t(int8_t(v));
            sum += v;
          }
          c += int32_t(row_sc(r)[g]) * sum;
        }
        gc[size_t(b) * G + size_t(r)] = 128 * c;
      }
    }
  }
  for (int r = nrows; r < G; ++r) std::memset(row_u(r), 0, size_t(n));
  (interleave ? interleave : u8_gemm_interleave_ref)(scratch, per_row, n, out);
  uint8_t* gsc = out + at.sc;
  float* gm = reinterpret_cast<float*>(out + at.m);
  float* gd = reinterpret_cast<float*>(out + at.d);
  for (int64_t g = 0; g < ng; ++g)
    for (int r = 0; r < nrows; ++r) {
      const uint32_t pair = uint32_t(uint16_t(row_sc(r)[g])) * 0x00010001u;
      std::memcpy(gsc + (size_t(g) * G + size_t(r)) * 4, &pair, 4);
      if (!ksigned) gm[size_t(g) * G + size_t(r)] = row_f(r, ng)[g];
    }
  for (int64_t b = 0; b < n / 256; ++b)
    for (int r = 0; r < nrows; ++r) gd[size_t(b) * G + size_t(r)] = (row_f(r, 2 * ng) + ng / 2)[b];
}

// A weight row into the unsigned GEMM form (the other forms pack groups of rows,
// u8_gemm_pack_group); scratch: u8_gemm_pack_scratch(n) floats. unpack: as u8_gemm_pack_group's.
inline void u8_gemm_pack_weight_row(DType t, const void* row, int64_t n, U8GemmRow out, float* scratch,
                                    UnpackRowU8Fn unpack = nullptr) {
  float* s16 = scratch;  // [n / 16] floats
  if (unpack) unpack(row, n, out.u, s16, out.m, unpack::KScales{});
  else unpack_row_u8(t, row, n, out.u, s16, out.m);
  for (int64_t g = 0; g < n / 16; ++g) repeat8(out.sv + g * 4, float_x2(s16[g]), 2);
}

// An activation row (n floats) into the GEMM form, quantized by `quantize` (the table's from_float
// of act: Q8_0 / Q8_1, a scale per 32, or Q8_K, per 256 with bsums) exactly as the GEMV quantizes
// it, so the GEMM gives the GEMV's products. scratch: dtype_row_bytes(act, n) bytes.
// Q8_1 (the activations of q4_1 / q5_1, whose offset m is the same for both halves of a block):
// m = s / 2 for each half, so m_w * s / 2 + m_w * s / 2 is the GEMV's m_w * s exactly (halving is
// exact in float), where d * sum(half) would use the fp16-rounded d instead of the block's s.
inline void u8_gemm_pack_act_row(DType act, FromFloatFn quantize, const float* x, int64_t n, U8GemmRow out,
                                 void* scratch) {
  EDGELLM_CHECK(act == DType::Q8_0 || act == DType::Q8_1 || act == DType::Q8_K,
                "u8 GEMM: activations must be q8_0, q8_1 or q8_K, got ", dtype_name(act));
  quantize(x, scratch, n);
  if (act == DType::Q8_K) {
    const auto* q8 = static_cast<const block_q8_K*>(scratch);
    for (int64_t b = 0; b < n / QK_K; ++b) {
      for (int j = 0; j < QK_K; ++j) out.u[b * QK_K + j] = uint8_t(q8[b].qs[j]);
      repeat8(out.sv + b * QK_K / 4, float_x2(q8[b].d), QK_K / 8);
      for (int g = 0; g < QK_K / 16; ++g) out.m[b * QK_K / 16 + g] = q8[b].d * float(q8[b].bsums[g]);
      out.d[b] = q8[b].d;
    }
    return;
  }
  if (act == DType::Q8_1) {
    u8_gemm_pack_blocks32(static_cast<const block_q8_1*>(scratch), n, out,
                          [](const block_q8_1& b, int) { return 0.5f * fp16_to_fp32(b.s); });
    return;
  }
  u8_gemm_pack_blocks32(static_cast<const block_q8_0*>(scratch), n, out, [](const block_q8_0& b, int h) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += b.qs[h * 16 + j];
    return fp16_to_fp32(b.d) * float(s);
  });
}

// The signed-offset K form's tiles (U8GemmKernel::tile_ks) read an activation row's bytes + 128:
// q8_K's int8 a as the unsigned byte a ^ 0x80. The driver biases each row once after packing it
// (kernels/matmul.hpp), where the tile would spend an operation per 16 bytes of every token on
// every tile of rows. Calling it twice restores the row.
inline void u8_gemm_bias_act(U8GemmRow a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a.u[i] ^= 0x80;
}

}  // namespace edgellm
