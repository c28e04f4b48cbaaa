// Transcoded ("decode-friendly") i-quant forms, made losslessly at load from the file's blocks for
// matrices that stay resident (PackedFormat::resident_only): the spec, the scalar transcoders and
// the scalar oracle of the x86 kernels (kernels/x86/transcoded_iquants-inl.hpp). Plain C++ only;
// no ISA headers.
//
// The file's grid types read a table entry (iq3s_grid ...) per 4 or 8 weights: on x86 those scalar
// loads, not the bytes, set the decode speed (issue 47). The forms here store each weight in a few
// bits that SIMD shifts and byte shuffles turn back into the same integers, so the dot kernels
// compute the same integer sums, and the logits are bit for bit those of the file's form.
//
// IQ3_S -> iq3_s_t, 134 bytes per 256 weights (4.19 bits per weight; the file: 110, 3.44):
//   u16 d (the file's), u8 scales[4] (the file's 4-bit scales, unchanged),
//   u8 qs[8][16]: vector v (weights 32v .. 32v + 31): qs[v][j] = n(32v + j) | n(32v + 16 + j) << 4,
//   the nibble n(w) of weight q = +-(2k + 1) (iq3s_grid's values are the odd 1 .. 15): k in bits
//   0..2, bit 3 set when q < 0. A vector's 16 bytes are one load; a shift and a mask give its 32
//   nibbles in weight order, two 16-entry byte shuffles (or one and an abs) its magnitudes and signs.
// IQ2_XXS -> iq2_xxs_t, 134 bytes per 256 weights (4.19 bits per weight; the file: 66, 2.06): as
//   iq3_s_t, d and the 4-bit scale of vector v in nibble v % 2 of scales[v / 2] (the file keeps them
//   in its sign words), the nibble of q = +-{8, 25, 43}[k]: k in bits 0..1, bit 3 set when q < 0.
//   (x86 reads the 3-bit form iq2_xxs_t3 below instead: 2-bit codes and a sign plane, 3.19 bits.)
// IQ2_XS and IQ2_S -> iq2_xs_t (iq2_s_t the same layout), 138 bytes per 256 weights (4.31 bits per
//   weight; the files: 74, 2.31 and 82, 2.56): d, the file's scales[8] unchanged (a 4-bit scale
//   per 16 weights: nibble j % 2 of byte j / 2 for weights 16j ..), qs as iq2_xxs_t. (x86: the
//   3-bit iq2_xs_t3 / iq2_s_t3, 3.31 bits per weight.)
// IQ3_XXS -> iq3_xxs_t, 134 bytes (4.19 bits per weight; the file: 98, 3.06): as iq2_xxs_t, the
//   nibble of q = +-{4, 12, 20, 28, 36, 44, 52, 62}[k]: k in bits 0..2, bit 3 set when q < 0.
// IQ1_S -> iq1_s_t, 70 bytes per 256 weights (2.19 bits per weight; the file: 50, 1.56):
//   u16 d (the file's), u8 sd[4]: vector v's 3-bit scale (the file's qh[v] bits 12..14) in bits
//   0..2 and its shift sign (bit 15; set: -IQ1S_DELTA) in bit 3 of nibble v % 2 of sd[v / 2],
//   u8 qs[64]: the weight q (-1, 0, +1) as the 2-bit code u = q + 1, weight 128c + 32l + j (c < 2,
//   l < 4, j < 32) in bits 2l, 2l + 1 of qs[32c + j] (TQ2_0's order): a 32-byte load shifted right
//   by 2l and masked is vector 4c + l's 32 codes in weight order.
// IQ1_M -> iq1_m_t, 78 bytes (2.44 bits per weight; the file: 56, 1.75): u16 d (the file's F16
//   scale, gathered from its scale words' top nibbles), u8 scales[8]: the 3-bit scale of weights
//   16k .. in nibble k % 2 of scales[k / 2], u8 neg[4]: bit g % 8 of neg[g / 8] set when the shift
//   of weights 8g .. 8g + 7 is negative, qs as iq1_s_t.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/kernels/layouts/unpack_u8.hpp"
#include "edgellm/kernels/scalar/dot_iquants.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/exact_fp.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/ref_iquants.hpp"

EDGELLM_EXACT_FP_BEGIN
namespace edgellm {

struct block_iq3_s_t {
  ggml_half d;
  uint8_t scales[IQ3S_N_SCALE];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq3_s_t) == 134, "wrong iq3_s_t block size/padding");

namespace transcode {
// The nibble of an odd weight q, |q| <= 15; throws on any other (the transcode is exact or fails).
inline uint8_t odd_nibble(int q) {
  const int m = q < 0 ? -q : q;
  EDGELLM_CHECK(m % 2 == 1 && m <= 15, "transcode: weight ", q, " is not an odd value of at most 15");
  return uint8_t((m - 1) / 2 | (q < 0 ? 8 : 0));
}
inline int odd_value(uint8_t n) { return (n & 8 ? -1 : 1) * (2 * (n & 7) + 1); }
// The nibble of weight q in a table of values by nibble (codes (n & 7) < codes); throws on none.
inline uint8_t table_nibble(int q, const int8_t (&values)[16], int codes, const char* type) {
  for (uint8_t n = 0; n < 16; ++n)
    if ((n & 7) < codes && values[n] == q) return n;
  throw_error("transcode: weight ", q, " is not an ", type, " grid value");
}
// IQ2's grid values by nibble (codes 3..7 unused).
inline constexpr int8_t kIq2Values[16] = {8, 25, 43, 0, 0, 0, 0, 0, -8, -25, -43, 0, 0, 0, 0, 0};
inline uint8_t iq2_nibble(int q) { return table_nibble(q, kIq2Values, 3, "IQ2"); }
inline int iq2_value(uint8_t n) { return kIq2Values[n & 15]; }
// IQ3_XXS's grid values by nibble.
inline constexpr int8_t kIq3XxsValues[16] = {4, 12, 20, 28, 36, 44, 52, 62, -4, -12, -20, -28, -36, -44, -52, -62};
inline uint8_t iq3_xxs_nibble(int q) { return table_nibble(q, kIq3XxsValues, 8, "IQ3_XXS"); }
inline int iq3_xxs_value(uint8_t n) { return kIq3XxsValues[n & 15]; }
// The 4-bit scale of 32 weights ib32 in the forms' scales (nibble ib32 % 2 of byte ib32 / 2).
template <class T>
inline uint32_t nibble_scale(const T& t, int ib32) { return (t.scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xF; }
// Its u8 GEMM integer scale 2s + 1, and ggml's float scale d * (0.5 + s) / kInv (IQ3_XXS: kInv 2).
template <class T>
inline int odd_sc(const T& t, int ib32) { return 2 * int(nibble_scale(t, ib32)) + 1; }
template <class T, int kInv>
inline float half_odd_dl(float d, const T& t, int ib32) {
  EDGELLM_EXACT_FP_SCOPE
  return d * (0.5f + float(nibble_scale(t, ib32))) * (1.0f / float(kInv));
}
// A block's weights q from its nibbles (qs[16 v + j]: weights 32v + j low, 32v + 16 + j high).
template <class T, int (*Value)(uint8_t)>
inline void unpack_nibbles(const T& t, int8_t* q) {
  for (int v = 0; v < QK_K / 32; ++v)
    for (int j = 0; j < 16; ++j) {
      q[32 * v + j] = int8_t(Value(t.qs[16 * v + j] & 15));
      q[32 * v + 16 + j] = int8_t(Value(t.qs[16 * v + j] >> 4));
    }
}
// A block's u8 GEMM form u = q + kOff, 8 weights at a time: U8(8 nibbles, one a byte) -> 8 u.
template <class T, uint64_t (*U8)(uint64_t)>
inline void nibbles_u8(const T& t, uint8_t* __restrict u) {
  constexpr uint64_t kLow = 0x0F0F0F0F0F0F0F0Full;
  for (int v = 0; v < QK_K / 32; ++v)
    for (int h = 0; h < 2; ++h) {
      uint64_t x;
      std::memcpy(&x, t.qs + 16 * v + 8 * h, 8);
      unpack::put_u64(u + 32 * v + 8 * h, U8(x & kLow));
      unpack::put_u64(u + 32 * v + 16 + 8 * h, U8((x >> 4) & kLow));
    }
}
inline constexpr uint64_t kOnes = 0x0101010101010101ull;
// 0xFF bytes where bit 3 (the sign) is set.
inline uint64_t negative_bytes(uint64_t nibbles) { return ((nibbles >> 3) & kOnes) * 0xFF; }
// IQ2 (kOff 43): t = 17k + (k >> 1) (0, 17, 35 for 8, 25, 43); u = 51 + t, or 35 - t when negative.
inline uint64_t iq2_u8(uint64_t nibbles) {
  const uint64_t k = nibbles & (3 * kOnes);
  const uint64_t t = (k << 4) + k + ((k >> 1) & kOnes), neg = negative_bytes(nibbles);
  return ((51 * kOnes + t) & ~neg) | ((35 * kOnes - t) & neg);
}
// IQ3_XXS (kOff 62): m = 8k + 4, + 2 for k = 7 (62); u = 62 + m, or 62 - m when negative.
inline uint64_t iq3_xxs_u8(uint64_t nibbles) {
  const uint64_t k = nibbles & (7 * kOnes);
  const uint64_t m = (k << 3) + 4 * kOnes + (((k + kOnes) >> 2) & (2 * kOnes)), neg = negative_bytes(nibbles);
  return ((62 * kOnes + m) & ~neg) | ((62 * kOnes - m) & neg);
}
// The 16 bytes of each vector v of a form of 8-weight groups (iq2_xxs_t ...): Group(v, l) gives
// group l's (weights 32v + 8l .. + 7) magnitude codes, one a byte, and its 8 sign bits (bit j:
// weight j negative); the signs go to the codes' bit 3, the group to the low (l < 2) or high
// nibbles of bytes 8 (l % 2) .. + 7.
// The scales (nibble v % 2 of scales[v / 2]) from the top 4 bits of each vector's sign word
// Word(v) (IQ2_XXS, IQ3_XXS).
template <class Word>
inline void put_word_scales(uint8_t (&scales)[4], Word&& word) {
  std::memset(scales, 0, sizeof scales);
  for (int v = 0; v < QK_K / 32; ++v) scales[v / 2] |= uint8_t((word(v) >> 28) << (4 * (v % 2)));
}
template <class Group>
inline void put_groups8(uint8_t* qs, Group&& group) {
  for (int v = 0; v < QK_K / 32; ++v) {
    uint64_t out[2] = {0, 0};
    for (int l = 0; l < 4; ++l) {
      const std::pair<uint64_t, uint8_t> g = group(v, l);
      const uint64_t bits = (uint64_t(g.second) * kOnes) & 0x8040201008040201ull;
      const uint64_t neg = (((bits + 0x7F7F7F7F7F7F7F7Full) | bits) & 0x8080808080808080ull) >> 4;  // 0x08 per set bit
      const uint64_t w = g.first | neg;
      out[l % 2] |= l < 2 ? w : w << 4;
    }
    std::memcpy(qs + 16 * v, out, sizeof out);
  }
}
}  // namespace transcode

// The activation form: Q8_K blocks as the type's vec_dot reads them.
inline size_t act_bytes_q8_K_rows(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(block_q8_K); }
// A transcoded form's PackedFormat pieces (rows = 1: a group is a row's blocks in order) and the
// gemm of a one-row group over its scalar oracle Self::vec_dot_ref.
template <class Self, class File, class T, void (*Transcode)(const File&, T&)>
struct TranscodedRows {
  static size_t group_bytes(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(T); }
  static void pack(const void* src, size_t, int count, int64_t n_in, void* dst) {
    EDGELLM_CHECK(count == 1 && n_in % QK_K == 0, "transcoded form: one row of whole blocks, got ", count, " of ", n_in);
    const auto* x = static_cast<const File*>(src);
    auto* t = static_cast<T*>(dst);
    for (int64_t b = 0; b < n_in / QK_K; ++b) Transcode(x[b], t[b]);
  }
  static void gemm_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
    for (int t = 0; t < ntok; ++t)
      out[size_t(t) * out_stride] =
          Self::vec_dot_ref(int(n_in), group, static_cast<const uint8_t*>(act) + size_t(t) * act_bytes_q8_K_rows(n_in));
  }
};
// A nibble form's scalar oracle: the file's reference dot (detail::vec_dot_iq_odd_scales) over the
// transcoded weights, equal to it bit for bit. Scale(t, s) is the 4-bit scale of sub-block s of
// kSub weights.
template <class File, class T, void (*Transcode)(const File&, T&), void (*Unpack)(const T&, int8_t*),
          uint32_t (*Scale)(const T&, int), int kInvScale, int kSub = 32>
struct TranscodedForm
    : TranscodedRows<TranscodedForm<File, T, Transcode, Unpack, Scale, kInvScale, kSub>, File, T, Transcode> {
  static float vec_dot_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
    return detail::vec_dot_iq_odd_scales<T, kSub, Unpack, Scale, kInvScale>(n, w, a);
  }
};

// ---- IQ3_S ----

// Each grid point's magnitudes (one a byte) as their nibble codes (the sign bits 0).
template <class G, size_t N, uint8_t (*Nibble)(int)>
inline std::array<G, N> grid_nibbles(const IqGrid<G, N>& grid) {
  std::array<G, N> t{};
  for (size_t i = 0; i < N; ++i)
    for (size_t j = 0; j < sizeof(G); ++j) t[i] |= G(Nibble(int((grid[i] >> (8 * j)) & 0xFF))) << (8 * j);
  return t;
}
inline const uint32_t* iq3_s_grid_nibbles() {
  static const std::array<uint32_t, 512> table = grid_nibbles<uint32_t, 512, transcode::odd_nibble>(iq3s_grid);
  return table.data();
}
// Point p of vector v (weights 32v + 4p .. + 3): the grid point's nibbles with the 4 sign bits in
// their bit 3, or'ed into the low (p < 4) or high nibbles of bytes 4 (p % 4) .. + 3 of the vector.
inline void transcode_iq3_s(const block_iq3_s& x, block_iq3_s_t& t) {
  const uint32_t* nib = iq3_s_grid_nibbles();
  t.d = x.d;
  std::memcpy(t.scales, x.scales, sizeof t.scales);
  for (int v = 0; v < QK_K / 32; ++v) {
    uint32_t out[4] = {0, 0, 0, 0};
    for (int p = 0; p < 8; ++p) {
      const uint32_t i = x.qs[8 * v + p] | (((uint32_t(x.qh[v]) >> p) & 1) << 8);
      const uint32_t s4 = (uint32_t(x.signs[4 * v + p / 2]) >> (4 * (p % 2))) & 15;
      const uint32_t w = nib[i] | (((s4 * 0x00204081u) & 0x01010101u) << 3);
      out[p % 4] |= p < 4 ? w : w << 4;
    }
    std::memcpy(t.qs + 16 * v, out, sizeof out);
  }
}
// The weights q of a transcoded block, as unpack_iq3_s gives the file's.
inline void unpack_iq3_s_t(const block_iq3_s_t& t, int8_t* q) { transcode::unpack_nibbles<block_iq3_s_t, transcode::odd_value>(t, q); }
inline uint32_t iq3_s_t_scale(const block_iq3_s_t& t, int ib32) { return transcode::nibble_scale(t, ib32); }
inline float iq3_s_t_dl(float d, const block_iq3_s_t& t, int ib32) { return d * float(1 + 2 * int(iq3_s_t_scale(t, ib32))); }
// y = d * (1 + 2s) * q, as dequantize_row_iq3_s.
inline void dequantize_row_iq3_s_t(const block_iq3_s_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq3_s_t, QK_K, 32, unpack_iq3_s_t, iq3_s_t_dl>(x, y, k);
}

// The u8 GEMM's form of a transcoded row (PackedFormat::unpack_u8): unpack_row_u8's of the file's
// row (u = q + 15, the same scales), 8 weights at a time from their nibbles: u = 16 + 2k, or 14 - 2k
// when negative.
inline uint64_t iq3_s_t_u8(uint64_t nibbles) {
  using transcode::kOnes;
  const uint64_t k2 = (nibbles & (7 * kOnes)) << 1, neg = transcode::negative_bytes(nibbles);
  return ((16 * kOnes + k2) & ~neg) | ((14 * kOnes - k2) & neg);
}
inline void iq3_s_t_u(const block_iq3_s_t& t, uint8_t* __restrict u) { transcode::nibbles_u8<block_iq3_s_t, iq3_s_t_u8>(t, u); }
inline int iq3_s_t_sc(const block_iq3_s_t& t, int ib32) { return 2 * int(iq3_s_t_scale(t, ib32)) + 1; }
inline void unpack_u8_iq3_s_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq3_s_t, QK_K, 32, 15, iq3_s_t_u, iq3_s_t_sc, 0>(static_cast<const block_iq3_s_t*>(row),
                                                                             n / QK_K, u, s, m, ks);
}

using FormIQ3_S_T = TranscodedForm<block_iq3_s, block_iq3_s_t, transcode_iq3_s, unpack_iq3_s_t, iq3_s_t_scale, 1>;

// ---- IQ2_XXS ----

struct block_iq2_xxs_t {
  ggml_half d;
  uint8_t scales[4];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq2_xxs_t) == 134, "wrong iq2_xxs_t block size/padding");

inline const uint64_t* iq2_xxs_grid_nibbles() {
  static const std::array<uint64_t, 256> table = grid_nibbles<uint64_t, 256, transcode::iq2_nibble>(iq2xxs_grid);
  return table.data();
}
// Point l of vector v (weights 32v + 8l .. + 7): its codes with the 8 sign bits (ksigns_iq2xs of
// the 7 stored) in their bit 3, or'ed into the low (l < 2) or high nibbles of bytes 8 (l % 2) .. + 7.
inline void transcode_iq2_xxs(const block_iq2_xxs& x, block_iq2_xxs_t& t) {
  const uint64_t* nib = iq2_xxs_grid_nibbles();
  t.d = x.d;
  transcode::put_word_scales(t.scales, [&](int v) { return detail::load_u32(x.qs + 4 * v + 2); });
  transcode::put_groups8(t.qs, [&](int v, int l) {
    const uint32_t idx = detail::load_u32(x.qs + 4 * v), sgn = detail::load_u32(x.qs + 4 * v + 2);
    return std::make_pair(nib[(idx >> (8 * l)) & 255], ksigns_iq2xs[(sgn >> (7 * l)) & 127]);
  });
}
inline void unpack_iq2_xxs_t(const block_iq2_xxs_t& t, int8_t* q) {
  transcode::unpack_nibbles<block_iq2_xxs_t, transcode::iq2_value>(t, q);
}
// y = d * (0.5 + s) * 0.25 * q, as dequantize_row_iq2_xxs.
inline void dequantize_row_iq2_xxs_t(const block_iq2_xxs_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xxs_t, QK_K, 32, unpack_iq2_xxs_t, transcode::half_odd_dl<block_iq2_xxs_t, 4>>(
      x, y, k);
}
// unpack_row_u8's form: u = q + 43, the integer scale 2s + 1 under d / 8.
inline void unpack_u8_iq2_xxs_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq2_xxs_t, QK_K, 32, 43, transcode::nibbles_u8<block_iq2_xxs_t, transcode::iq2_u8>,
                    transcode::odd_sc<block_iq2_xxs_t>, 3>(static_cast<const block_iq2_xxs_t*>(row), n / QK_K, u, s, m, ks);
}
using FormIQ2_XXS_T = TranscodedForm<block_iq2_xxs, block_iq2_xxs_t, transcode_iq2_xxs, unpack_iq2_xxs_t,
                                     transcode::nibble_scale<block_iq2_xxs_t>, 8>;

// ---- IQ2_XS and IQ2_S ----

struct block_iq2_xs_t {
  ggml_half d;
  uint8_t scales[QK_K / 32];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq2_xs_t) == 138, "wrong iq2_xs_t block size/padding");
using block_iq2_s_t = block_iq2_xs_t;

inline const uint64_t* iq2_xs_grid_nibbles() {
  static const std::array<uint64_t, 512> table = grid_nibbles<uint64_t, 512, transcode::iq2_nibble>(iq2xs_grid);
  return table.data();
}
inline const uint64_t* iq2_s_grid_nibbles() {
  static const std::array<uint64_t, 1024> table = grid_nibbles<uint64_t, 1024, transcode::iq2_nibble>(iq2s_grid);
  return table.data();
}
// Group l of vector v: word 4v + l's 9-bit index and 7 sign bits (ksigns_iq2xs).
inline void transcode_iq2_xs(const block_iq2_xs& x, block_iq2_xs_t& t) {
  const uint64_t* nib = iq2_xs_grid_nibbles();
  t.d = x.d;
  std::memcpy(t.scales, x.scales, sizeof t.scales);
  transcode::put_groups8(t.qs, [&](int v, int l) {
    const uint16_t w = x.qs[4 * v + l];
    return std::make_pair(nib[w & 511], ksigns_iq2xs[w >> 9]);
  });
}
// Group g = 4v + l: index byte g with 2 bits of qh[v], sign byte g of the second half of qs.
inline void transcode_iq2_s(const block_iq2_s& x, block_iq2_s_t& t) {
  const uint64_t* nib = iq2_s_grid_nibbles();
  t.d = x.d;
  std::memcpy(t.scales, x.scales, sizeof t.scales);
  transcode::put_groups8(t.qs, [&](int v, int l) {
    const int g = 4 * v + l;
    const uint32_t idx = x.qs[g] | ((uint32_t(x.qh[v]) << (8 - 2 * l)) & 0x300);
    return std::make_pair(nib[idx], x.qs[QK_K / 8 + g]);
  });
}
inline void unpack_iq2_xs_t(const block_iq2_xs_t& t, int8_t* q) {
  transcode::unpack_nibbles<block_iq2_xs_t, transcode::iq2_value>(t, q);
}
// y = d * (0.5 + s) * 0.25 * q, s per 16 weights (iq2_dl16 reads the same scales), as dequantize_row_iq2_xs / _s.
inline void dequantize_row_iq2_xs_t(const block_iq2_xs_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xs_t, QK_K, 16, unpack_iq2_xs_t, iq2_dl16<block_iq2_xs_t>>(x, y, k);
}
// unpack_row_u8's form: u = q + 43, the integer scale 2s + 1 per 16 under d / 8.
inline void unpack_u8_iq2_xs_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq2_xs_t, QK_K, 16, 43, transcode::nibbles_u8<block_iq2_xs_t, transcode::iq2_u8>,
                    unpack::iq2_sc16<block_iq2_xs_t>, 3>(static_cast<const block_iq2_xs_t*>(row), n / QK_K, u, s, m, ks);
}
using FormIQ2_XS_T =
    TranscodedForm<block_iq2_xs, block_iq2_xs_t, transcode_iq2_xs, unpack_iq2_xs_t, iq2_scale16<block_iq2_xs_t>, 8, 16>;
using FormIQ2_S_T =
    TranscodedForm<block_iq2_s, block_iq2_s_t, transcode_iq2_s, unpack_iq2_xs_t, iq2_scale16<block_iq2_s_t>, 8, 16>;

// ---- IQ2's 3-bit forms (x86) ----

// iq2_xxs_t3 / iq2_xs_t3 (iq2_s_t3 the same layout): each weight q = +-{8, 25, 43}[k] as a 2-bit
// code k and a sign bit, made from the nibble forms above (the same d and scales).
//   qs[64]: weight 128c + 32l + j (c < 2, l < 4, j < 32) in bits 2l, 2l + 1 of qs[32c + j] (TQ2_0's
//     and iq1_s_t's order): a 32-byte load shifted right by 2l and masked is vector 4c + l's codes;
//   signs[32]: bit v of signs[j] set when weight 32v + j is negative: one 32-byte load holds the
//     block's signs, and shifting it left by 7 - v puts vector v's in each byte's top bit.
// 102 bytes per 256 weights for IQ2_XXS (3.19 bits per weight, the nibble form 4.19), 106 for
// IQ2_XS / IQ2_S (3.31, 4.31): a quarter fewer bytes per token where decode reads the memory's
// limit, and on x86 no more operations per vector than the nibble form. NEON keeps the nibble
// forms: its decode of them is an and or ushr and a tbl per 16 weights, which a sign plane would
// about triple, and on the A55 the transcoded decode's compute is already near the board's
// bandwidth (docs/PERF.md, RK3568 projection; a NEON 3-bit form is not built or measured).
template <int kScaleBytes>
struct block_iq2_t3 {
  ggml_half d;
  uint8_t scales[kScaleBytes];
  uint8_t signs[QK_K / 8];
  uint8_t qs[QK_K / 4];
};
using block_iq2_xxs_t3 = block_iq2_t3<4>;          // a 4-bit scale per 32 weights
using block_iq2_xs_t3 = block_iq2_t3<QK_K / 32>;  // a 4-bit scale per 16
static_assert(sizeof(block_iq2_xxs_t3) == 102, "wrong iq2_xxs_t3 block size/padding");
static_assert(sizeof(block_iq2_xs_t3) == 106, "wrong iq2_xs_t3 block size/padding");
using block_iq2_s_t3 = block_iq2_xs_t3;

namespace transcode {
// A nibble form's weights (nib[16 v + j]: weight 32v + j low, 32v + 16 + j high; the code in bits
// 0..1, the sign in bit 3) as the 3-bit form's codes and signs, 8 weights at a time.
inline void nibbles_to_t3(const uint8_t* nib, uint8_t (&qs)[QK_K / 4], uint8_t (&signs)[QK_K / 8]) {
  uint64_t q[QK_K / 32] = {}, g[4] = {};
  for (int v = 0; v < QK_K / 32; ++v)
    for (int l = 0; l < 4; ++l) {  // weights 32v + 8l .. + 7: low (l < 2) or high nibbles of bytes 8 (l % 2) ..
      uint64_t x;
      std::memcpy(&x, nib + 16 * v + 8 * (l % 2), 8);
      const uint64_t w = (l < 2 ? x : x >> 4) & 0x0F0F0F0F0F0F0F0Full;
      q[4 * (v / 4) + l] |= (w & (3 * kOnes)) << (2 * (v % 4));
      g[l] |= ((w >> 3) & kOnes) << v;
    }
  std::memcpy(qs, q, sizeof qs);
  std::memcpy(signs, g, sizeof signs);
}
// Weights j .. j + 7 of vector v as 8 nibbles (code | sign << 3), one a byte.
template <class T>
inline uint64_t t3_nibbles(const T& t, int v, int j) {
  uint64_t c, g;
  std::memcpy(&c, t.qs + 32 * (v / 4) + j, 8);
  std::memcpy(&g, t.signs + j, 8);
  return ((c >> (2 * (v % 4))) & (3 * kOnes)) | (((g >> v) & kOnes) << 3);
}
template <class T>
inline void unpack_t3(const T& t, int8_t* q) {
  for (int v = 0; v < QK_K / 32; ++v)
    for (int j = 0; j < 32; j += 8) {
      const uint64_t x = t3_nibbles(t, v, j);
      for (int i = 0; i < 8; ++i) q[32 * v + j + i] = int8_t(iq2_value(uint8_t(x >> (8 * i))));
    }
}
// The u8 GEMM form u = q + 43 (iq2_u8), 8 weights at a time.
template <class T>
inline void t3_u8(const T& t, uint8_t* __restrict u) {
  for (int v = 0; v < QK_K / 32; ++v)
    for (int j = 0; j < 32; j += 8) unpack::put_u64(u + 32 * v + j, iq2_u8(t3_nibbles(t, v, j)));
}
// A 3-bit form from the file's block through its nibble form.
template <class File, class Nib, void (*ToNibbles)(const File&, Nib&), class T>
inline void transcode_t3(const File& x, T& t) {
  Nib n;
  ToNibbles(x, n);
  t.d = n.d;
  static_assert(sizeof t.scales == sizeof n.scales, "a 3-bit form keeps its nibble form's scales");
  std::memcpy(t.scales, n.scales, sizeof t.scales);
  nibbles_to_t3(n.qs, t.qs, t.signs);
}
}  // namespace transcode

inline void transcode_iq2_xxs_t3(const block_iq2_xxs& x, block_iq2_xxs_t3& t) {
  transcode::transcode_t3<block_iq2_xxs, block_iq2_xxs_t, transcode_iq2_xxs>(x, t);
}
inline void transcode_iq2_xs_t3(const block_iq2_xs& x, block_iq2_xs_t3& t) {
  transcode::transcode_t3<block_iq2_xs, block_iq2_xs_t, transcode_iq2_xs>(x, t);
}
inline void transcode_iq2_s_t3(const block_iq2_s& x, block_iq2_s_t3& t) {
  transcode::transcode_t3<block_iq2_s, block_iq2_s_t, transcode_iq2_s>(x, t);
}
inline void unpack_iq2_xxs_t3(const block_iq2_xxs_t3& t, int8_t* q) { transcode::unpack_t3(t, q); }
inline void unpack_iq2_xs_t3(const block_iq2_xs_t3& t, int8_t* q) { transcode::unpack_t3(t, q); }
// y = d * (0.5 + s) * 0.25 * q (s per 32 weights, or per 16), as dequantize_row_iq2_xxs / _xs / _s.
inline void dequantize_row_iq2_xxs_t3(const block_iq2_xxs_t3* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xxs_t3, QK_K, 32, unpack_iq2_xxs_t3, transcode::half_odd_dl<block_iq2_xxs_t3, 4>>(
      x, y, k);
}
inline void dequantize_row_iq2_xs_t3(const block_iq2_xs_t3* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq2_xs_t3, QK_K, 16, unpack_iq2_xs_t3, iq2_dl16<block_iq2_xs_t3>>(x, y, k);
}
// unpack_row_u8's form: u = q + 43, the integer scale 2s + 1 (per 32 or per 16) under d / 8.
inline void unpack_u8_iq2_xxs_t3(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq2_xxs_t3, QK_K, 32, 43, transcode::t3_u8<block_iq2_xxs_t3>,
                    transcode::odd_sc<block_iq2_xxs_t3>, 3>(static_cast<const block_iq2_xxs_t3*>(row), n / QK_K, u, s, m, ks);
}
inline void unpack_u8_iq2_xs_t3(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq2_xs_t3, QK_K, 16, 43, transcode::t3_u8<block_iq2_xs_t3>, unpack::iq2_sc16<block_iq2_xs_t3>,
                    3>(static_cast<const block_iq2_xs_t3*>(row), n / QK_K, u, s, m, ks);
}
using FormIQ2_XXS_T3 = TranscodedForm<block_iq2_xxs, block_iq2_xxs_t3, transcode_iq2_xxs_t3, unpack_iq2_xxs_t3,
                                      transcode::nibble_scale<block_iq2_xxs_t3>, 8>;
using FormIQ2_XS_T3 = TranscodedForm<block_iq2_xs, block_iq2_xs_t3, transcode_iq2_xs_t3, unpack_iq2_xs_t3,
                                     iq2_scale16<block_iq2_xs_t3>, 8, 16>;
using FormIQ2_S_T3 = TranscodedForm<block_iq2_s, block_iq2_s_t3, transcode_iq2_s_t3, unpack_iq2_xs_t3,
                                    iq2_scale16<block_iq2_s_t3>, 8, 16>;

// ---- IQ3_XXS ----

using block_iq3_xxs_t = block_iq2_xxs_t;  // the same layout, IQ3_XXS's codes in the nibbles

inline const uint32_t* iq3_xxs_grid_nibbles() {
  static const std::array<uint32_t, 256> table = grid_nibbles<uint32_t, 256, transcode::iq3_xxs_nibble>(iq3xxs_grid);
  return table.data();
}
// Group l of vector v: points 8v + 2l and + 1 (4 weights each), the sign bits (ksigns_iq2xs) of
// bits 7l .. of the vector's sign word, whose top 4 bits are its scale.
inline void transcode_iq3_xxs(const block_iq3_xxs& x, block_iq3_xxs_t& t) {
  const uint32_t* nib = iq3_xxs_grid_nibbles();
  const uint8_t* signs = x.qs + QK_K / 4;
  t.d = x.d;
  transcode::put_word_scales(t.scales, [&](int v) { return detail::load_u32(signs + 4 * v); });
  transcode::put_groups8(t.qs, [&](int v, int l) {
    const uint8_t* p = x.qs + 8 * v + 2 * l;
    return std::make_pair(nib[p[0]] | uint64_t(nib[p[1]]) << 32,
                          ksigns_iq2xs[(detail::load_u32(signs + 4 * v) >> (7 * l)) & 127]);
  });
}
inline void unpack_iq3_xxs_t(const block_iq3_xxs_t& t, int8_t* q) {
  transcode::unpack_nibbles<block_iq3_xxs_t, transcode::iq3_xxs_value>(t, q);
}
// y = d * (0.5 + s) * 0.5 * q, as dequantize_row_iq3_xxs.
inline void dequantize_row_iq3_xxs_t(const block_iq3_xxs_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_scaled<block_iq3_xxs_t, QK_K, 32, unpack_iq3_xxs_t, transcode::half_odd_dl<block_iq3_xxs_t, 2>>(
      x, y, k);
}
// unpack_row_u8's form: u = q + 62, the integer scale 2s + 1 under d / 4.
inline void unpack_u8_iq3_xxs_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq_scaled<block_iq3_xxs_t, QK_K, 32, 62, transcode::nibbles_u8<block_iq3_xxs_t, transcode::iq3_xxs_u8>,
                    transcode::odd_sc<block_iq3_xxs_t>, 2>(static_cast<const block_iq3_xxs_t*>(row), n / QK_K, u, s, m,
                                                           ks);
}
using FormIQ3_XXS_T = TranscodedForm<block_iq3_xxs, block_iq3_xxs_t, transcode_iq3_xxs, unpack_iq3_xxs_t,
                                     transcode::nibble_scale<block_iq3_xxs_t>, 4>;

// ---- IQ4_XS ----

// IQ4_XS -> iq4_xs_t, 136 bytes (the file's size and header: d, scales_h, scales_l), the same
// nibbles (kvalues_iq4nl indexes) in chunk order: chunk c (0 .. 7) holds weights 4c .. 4c + 3 of
// each of the block's 8 vectors, vector v at its bytes 4v .. 4v + 3, in the low (c even) or high
// (c odd) nibbles of qs[32 (c / 2) ..]. A chunk's products summed by 4 put vector v in int32 lane v
// alone, so one scale vector serves the whole block (the file's order needs one per vector). The
// activations come in the matching order (iq4_xs_t_act: a Q8_K block's qs with chunk c at slot
// iq4_slot(c), d and bsums unchanged), so that the low and the high nibbles of a 64-byte load
// meet 64 contiguous activations each. Streamed and prefill rows read the file's bytes back
// (iq4_xs_t_to_file_row): the u8 GEMM's form is the file's.
struct block_iq4_xs_t {
  ggml_half d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs_t) == sizeof(block_iq4_xs), "iq4_xs_t keeps the file's block size");

namespace transcode {
// The activation slot of chunk c: chunks 0, 2, 1, 3, 4, 6, 5, 7 in memory.
inline constexpr int iq4_slot(int c) { return (c & 4) | ((c & 1) << 1) | ((c >> 1) & 1); }
// A block's nibbles as bytes, w[v][c]: weights 4c .. 4c + 3 of vector v (4 bytes, one a weight),
// from the file's order (qs[16 v + j]: weight j low, 16 + j high) or chunk order, and back; a
// dozen word operations per 16 bytes.
inline constexpr uint32_t kLow4 = 0x0F0F0F0Fu;
inline void iq4_file_words(const uint8_t* qs, uint32_t (&w)[8][8]) {
  for (int v = 0; v < 8; ++v) {
    uint32_t a[4];
    std::memcpy(a, qs + 16 * v, 16);
    for (int k = 0; k < 4; ++k) {
      w[v][k] = a[k] & kLow4;
      w[v][4 + k] = (a[k] >> 4) & kLow4;
    }
  }
}
inline void iq4_file_put(const uint32_t (&w)[8][8], uint8_t* qs) {
  for (int v = 0; v < 8; ++v) {
    uint32_t a[4];
    for (int k = 0; k < 4; ++k) a[k] = w[v][k] | w[v][4 + k] << 4;
    std::memcpy(qs + 16 * v, a, 16);
  }
}
inline void iq4_chunk_words(const uint8_t* qs, uint32_t (&w)[8][8]) {
  for (int m = 0; m < 4; ++m) {
    uint32_t a[8];
    std::memcpy(a, qs + 32 * m, 32);
    for (int v = 0; v < 8; ++v) {
      w[v][2 * m] = a[v] & kLow4;
      w[v][2 * m + 1] = (a[v] >> 4) & kLow4;
    }
  }
}
inline void iq4_chunk_put(const uint32_t (&w)[8][8], uint8_t* qs) {
  for (int m = 0; m < 4; ++m) {
    uint32_t a[8];
    for (int v = 0; v < 8; ++v) a[v] = w[v][2 * m] | w[v][2 * m + 1] << 4;
    std::memcpy(qs + 32 * m, a, 32);
  }
}
}  // namespace transcode

// The header copied, the nibbles moved from the file's order to chunk order (kToChunks) or back.
template <bool kToChunks, class From, class To>
inline void iq4_xs_reorder(const From& a, To& b) {
  b.d = a.d;
  b.scales_h = a.scales_h;
  std::memcpy(b.scales_l, a.scales_l, sizeof b.scales_l);
  uint32_t w[8][8];
  if (kToChunks) {
    transcode::iq4_file_words(a.qs, w);
    transcode::iq4_chunk_put(w, b.qs);
  } else {
    transcode::iq4_chunk_words(a.qs, w);
    transcode::iq4_file_put(w, b.qs);
  }
}
inline void transcode_iq4_xs(const block_iq4_xs& x, block_iq4_xs_t& t) { iq4_xs_reorder<true>(x, t); }
inline void iq4_xs_t_to_file(const block_iq4_xs_t& t, block_iq4_xs& x) { iq4_xs_reorder<false>(t, x); }
// The file's bytes of a transcoded row of n weights (PackedFormat::to_file_row).
inline void iq4_xs_t_to_file_row(const void* row, int64_t n, int /*row 0 of a one-row group*/, void* file) {
  for (int64_t b = 0; b < n / QK_K; ++b)
    iq4_xs_t_to_file(static_cast<const block_iq4_xs_t*>(row)[b], static_cast<block_iq4_xs*>(file)[b]);
}
inline void unpack_iq4_xs_t(const block_iq4_xs_t& t, int8_t* q) {
  block_iq4_xs x;
  iq4_xs_t_to_file(t, x);
  unpack_iq4_xs(x, q);
}
inline void dequantize_row_iq4_xs_t(const block_iq4_xs_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  for (int64_t b = 0; b < k / QK_K; ++b) {
    block_iq4_xs f;
    iq4_xs_t_to_file(x[b], f);
    dequantize_row_iq4_xs(&f, y + QK_K * b, QK_K);
  }
}
// Q8_K activation rows (n weights) from the natural order to iq4_xs_t's (kToChunks) or back; d and
// bsums unchanged.
template <bool kToChunks>
inline void iq4_xs_t_act_order(const void* in, int64_t n, void* out) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const block_q8_K& y = static_cast<const block_q8_K*>(in)[b];
    block_q8_K& o = static_cast<block_q8_K*>(out)[b];
    o.d = y.d;
    std::memcpy(o.bsums, y.bsums, sizeof o.bsums);
    for (int c = 0; c < 8; ++c)
      for (int v = 0; v < QK_K / 32; ++v) {
        const int natural = 32 * v + 4 * c, chunked = 32 * transcode::iq4_slot(c) + 4 * v;
        std::memcpy(o.qs + (kToChunks ? chunked : natural), y.qs + (kToChunks ? natural : chunked), 4);
      }
  }
}
inline void iq4_xs_t_act(const void* natural, int64_t n, void* out) { iq4_xs_t_act_order<true>(natural, n, out); }
// iq4_xs_t's activations (PackedFormat::prepare_act): a table's Q8_K quantizer, then the chunk order.
template <void (*Quantize)(const float*, void*, int64_t)>
inline void iq4_xs_t_prepare_act(const float* x, int64_t n_in, void* dst) {
  thread_local std::vector<uint8_t> natural;
  natural.resize(act_bytes_q8_K_rows(n_in));
  Quantize(x, natural.data(), n_in);
  iq4_xs_t_act(natural.data(), n_in, dst);
}
// iq4_xs_t's PackedFormat pieces (one row a group) and its scalar oracle: the file's reference dot
// of the file's bytes against the natural activations, read back from both forms.
struct FormIQ4_XS_T {
  static size_t group_bytes(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(block_iq4_xs_t); }
  static void pack(const void* src, size_t, int count, int64_t n_in, void* dst) {
    EDGELLM_CHECK(count == 1 && n_in % QK_K == 0, "transcoded form: one row of whole blocks, got ", count, " of ", n_in);
    for (int64_t b = 0; b < n_in / QK_K; ++b)
      transcode_iq4_xs(static_cast<const block_iq4_xs*>(src)[b], static_cast<block_iq4_xs_t*>(dst)[b]);
  }
  static float vec_dot_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
    std::vector<block_iq4_xs> x(size_t(n / QK_K));
    std::vector<block_q8_K> y(size_t(n / QK_K));
    iq4_xs_t_to_file_row(w, n, 0, x.data());
    iq4_xs_t_act_order<false>(a, n, y.data());
    return vec_dot_iq4_xs_q8_K_ref(n, x.data(), y.data());
  }
  static void gemm_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
    for (int t = 0; t < ntok; ++t)
      out[size_t(t) * out_stride] =
          vec_dot_ref(int(n_in), group, static_cast<const uint8_t*>(act) + size_t(t) * act_bytes_q8_K_rows(n_in));
  }
};

// ---- IQ1_S and IQ1_M ----

struct block_iq1_s_t {
  ggml_half d;
  uint8_t sd[QK_K / 64];
  uint8_t qs[QK_K / 4];
};
static_assert(sizeof(block_iq1_s_t) == 70, "wrong iq1_s_t block size/padding");
struct block_iq1_m_t {
  ggml_half d;
  uint8_t scales[QK_K / 32];
  uint8_t neg[QK_K / 64];
  uint8_t qs[QK_K / 4];
};
static_assert(sizeof(block_iq1_m_t) == 78, "wrong iq1_m_t block size/padding");

namespace transcode {
// The 2-bit code u = q + 1 of a ternary weight q; throws on any other.
inline uint8_t ternary_code(int q) {
  EDGELLM_CHECK(q >= -1 && q <= 1, "transcode: weight ", q, " is not an IQ1 grid value");
  return uint8_t(q + 1);
}
// A block's weights as codes: weight 128c + 32l + j in bits 2l of qs[32c + j]; and back.
inline void put_ternary_codes(const int8_t* q, uint8_t* qs) {
  std::memset(qs, 0, QK_K / 4);
  for (int w = 0; w < QK_K; ++w) qs[32 * (w / 128) + w % 32] |= uint8_t(ternary_code(q[w]) << (2 * ((w / 32) % 4)));
}
template <class T>
inline void unpack_ternary_codes(const T& t, int8_t* __restrict q) {
  for (int c = 0; c < 2; ++c)
    for (int l = 0; l < 4; ++l)
      for (int j = 0; j < 32; ++j) q[128 * c + 32 * l + j] = int8_t(((t.qs[32 * c + j] >> (2 * l)) & 3) - 1);
}
}  // namespace transcode

inline void transcode_iq1_s(const block_iq1_s& x, block_iq1_s_t& t) {
  int8_t q[QK_K];
  unpack_iq1_s(x, q);
  t.d = x.d;
  std::memset(t.sd, 0, sizeof t.sd);
  for (int v = 0; v < QK_K / 32; ++v) t.sd[v / 2] |= uint8_t((x.qh[v] >> 12) << (4 * (v % 2)));
  transcode::put_ternary_codes(q, t.qs);
}
inline void unpack_iq1_s_t(const block_iq1_s_t& t, int8_t* q) { transcode::unpack_ternary_codes(t, q); }
inline float iq1_s_t_dfloat(const block_iq1_s_t& t) { return fp16_to_fp32(t.d); }
inline uint32_t iq1_s_t_nibble(const block_iq1_s_t& t, int ib32) { return (t.sd[ib32 / 2] >> (4 * (ib32 % 2))) & 15; }
inline uint32_t iq1_s_t_scale16(const block_iq1_s_t& t, int ib16) { return iq1_s_t_nibble(t, ib16 / 2) & 7; }
inline bool iq1_s_t_neg8(const block_iq1_s_t& t, int ib8) { return (iq1_s_t_nibble(t, ib8 / 4) & 8) != 0; }

inline void transcode_iq1_m(const block_iq1_m& x, block_iq1_m_t& t) {
  int8_t q[QK_K];
  uint16_t sc[4];
  unpack_iq1_m(x, q);
  iq1_m_scale_words(x, sc);
  t.d = iq1_m_d(sc);
  std::memset(t.scales, 0, sizeof t.scales);
  std::memset(t.neg, 0, sizeof t.neg);
  for (int k = 0; k < QK_K / 16; ++k) t.scales[k / 2] |= uint8_t(iq1_m_scale(sc, k) << (4 * (k % 2)));
  for (int g = 0; g < QK_K / 8; ++g) t.neg[g / 8] |= uint8_t(iq1_m_delta_negative(x, g) ? 1 << (g % 8) : 0);
  transcode::put_ternary_codes(q, t.qs);
}
inline void unpack_iq1_m_t(const block_iq1_m_t& t, int8_t* q) { transcode::unpack_ternary_codes(t, q); }
inline float iq1_m_t_dfloat(const block_iq1_m_t& t) { return fp16_to_fp32(t.d); }
inline uint32_t iq1_m_t_scale16(const block_iq1_m_t& t, int ib16) { return transcode::nibble_scale(t, ib16); }
inline bool iq1_m_t_neg8(const block_iq1_m_t& t, int ib8) { return (t.neg[ib8 / 8] >> (ib8 % 8)) & 1; }

// dequantize_row_iq1_s / _m's floats, unpack_row_u8's form (u = 8q +- 1 + 9, the integer scale 2s + 1
// per 16 under d / 8).
inline void dequantize_row_iq1_s_t(const block_iq1_s_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_iq1<block_iq1_s_t, unpack_iq1_s_t, iq1_s_t_dfloat, iq1_s_t_scale16, iq1_s_t_neg8>(x, y, k);
}
inline void dequantize_row_iq1_m_t(const block_iq1_m_t* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t k) {
  detail::dequantize_row_iq1<block_iq1_m_t, unpack_iq1_m_t, iq1_m_t_dfloat, iq1_m_t_scale16, iq1_m_t_neg8>(x, y, k);
}
inline void unpack_u8_iq1_s_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq1<block_iq1_s_t, unpack_iq1_s_t, iq1_s_t_dfloat, iq1_s_t_scale16, iq1_s_t_neg8>(
      static_cast<const block_iq1_s_t*>(row), n / QK_K, u, s, m, ks);
}
inline void unpack_u8_iq1_m_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack::iq1<block_iq1_m_t, unpack_iq1_m_t, iq1_m_t_dfloat, iq1_m_t_scale16, iq1_m_t_neg8>(
      static_cast<const block_iq1_m_t*>(row), n / QK_K, u, s, m, ks);
}

// The IQ1 forms' scalar oracle: detail::vec_dot_iq1 (the shift's activation sums from the quants:
// IQ1_S's reference takes them from bsums, which quantize_row_q8_K makes equal) over the transcoded
// weights, equal to the file's reference bit for bit.
template <class File, class T, void (*Transcode)(const File&, T&), void (*Unpack)(const T&, int8_t*),
          float (*D)(const T&), uint32_t (*Scale16)(const T&, int), bool (*Neg8)(const T&, int)>
struct TranscodedIq1Form
    : TranscodedRows<TranscodedIq1Form<File, T, Transcode, Unpack, D, Scale16, Neg8>, File, T, Transcode> {
  static float vec_dot_ref(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
    return detail::vec_dot_iq1<T, Unpack, D, Scale16, Neg8>(n, w, a);
  }
};
using FormIQ1_S_T = TranscodedIq1Form<block_iq1_s, block_iq1_s_t, transcode_iq1_s, unpack_iq1_s_t, iq1_s_t_dfloat,
                                      iq1_s_t_scale16, iq1_s_t_neg8>;
using FormIQ1_M_T = TranscodedIq1Form<block_iq1_m, block_iq1_m_t, transcode_iq1_m, unpack_iq1_m_t, iq1_m_t_dfloat,
                                      iq1_m_t_scale16, iq1_m_t_neg8>;

// ---- TQ1_0 ----

// TQ1_0 -> tq1_0_t, a TQ2_0 block (66 bytes per 256 weights, 2.06 bits per weight; the file: 54,
// 1.69): d copied, each weight's base-3 digit (q + 1, read as unpack_tq1_0 does) as a 2-bit field
// (weight 128j + 32l + m in bits 2l of qs[32j + m]), which SIMD takes with a shift and a mask
// instead of TQ1_0's multiplies per byte. Its kernels are TQ2_0's: both files' kernels do the same
// float steps (vec_dot_ternary's: the exact integer block sum times d * y.d), so its decode is TQ1_0's
// vec_dot bit for bit. Its u8 GEMM form is unpack_row_u8's of TQ2_0 (u = q + 1, one scale d).
using block_tq1_0_t = block_tq2_0;
inline void transcode_tq1_0(const block_tq1_0& x, block_tq1_0_t& t) {
  int8_t q[QK_K];
  unpack_tq1_0(x, q);
  t.d = x.d;
  for (int j = 0; j < QK_K / 128; ++j)
    for (int m = 0; m < 32; ++m) {
      uint32_t b = 0;
      for (int l = 0; l < 4; ++l) b |= uint32_t(q[128 * j + 32 * l + m] + 1) << (2 * l);
      t.qs[32 * j + m] = uint8_t(b);
    }
}
inline void unpack_u8_tq1_0_t(const void* row, int64_t n, uint8_t* u, float* s, float* m, const unpack::KScales& ks) {
  unpack_row_u8(DType::TQ2_0, row, n, u, s, m, ks);
}
// tq1_0_t's PackedFormat pieces (one row a group) and its scalar oracle: TQ2_0's reference dot,
// the same float steps as TQ1_0's.
struct FormTQ1_0_T {
  static size_t group_bytes(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(block_tq1_0_t); }
  static void pack(const void* src, size_t, int count, int64_t n_in, void* dst) {
    EDGELLM_CHECK(count == 1 && n_in % QK_K == 0, "tq1_0_t: one row of whole blocks, got ", count, " of ", n_in);
    for (int64_t b = 0; b < n_in / QK_K; ++b)
      transcode_tq1_0(static_cast<const block_tq1_0*>(src)[b], static_cast<block_tq1_0_t*>(dst)[b]);
  }
  static void gemm_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
    for (int t = 0; t < ntok; ++t)
      out[size_t(t) * out_stride] = vec_dot_tq2_0_q8_K_ref(
          int(n_in), group, static_cast<const uint8_t*>(act) + size_t(t) * act_bytes_q8_K_rows(n_in));
  }
};

}  // namespace edgellm
EDGELLM_EXACT_FP_END
