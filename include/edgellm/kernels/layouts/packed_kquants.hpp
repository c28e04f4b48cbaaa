// Row-interleaved ("packed") K-quant layouts, Q2_K .. Q6_K x Rows rows: the spec, the packers and
// plain C++ GEMMs that are the oracle of the AVX-512 (kernels/x86/packed_kquants_x16-inl.hpp, 16 rows) and
// NEON dotprod (kernels/neon/packed_kquants.hpp, 4 rows) kernels.
// Plain C++ only; no ISA headers.
//
// A group holds Rows consecutive weight rows as n_in / 256 packed super-blocks, one after another (a
// group is one sequential stream). Inside a super-block everything a kernel needs per sub-block is
// stored [sub-block][row] so that one SIMD lane carries one row: quants come as [row][4] byte
// quads, the u8 operand of one vpdpbusd (Rows rows x 4 weights) against 4 broadcast activation
// bytes. Scales and mins are unpacked at pack time; d / dmin are Rows consecutive fp16. Quants are
// stored unsigned (q3_K + 4, q6_K + 32); "quad k of sub-block g" = weights 16g + 4k + b, b < 4.
// Bytes per super-block, and for 16 rows against 16 original blocks:
//
// Q2_K, 84 * Rows (1344 = +0%):
//   u16 d[Rows], dmin[Rows]; u8 sm[8][Rows][2]: the scale bytes (scale | min << 4) of 2p, 2p + 1;
//   u8 qs[16][Rows][4]: byte = sum over k of quad k << 2k.
// Q3_K, 114 * Rows, rounded up to 64 for 16 rows (1856 = +5.5%; 4 rows: 456 = +3.6%, no padding):
//   u16 d[Rows]; i8 sc[8][Rows][2]: the 6-bit scales - 32 of 2p, 2p + 1;
//   per pair p, with v0..v7 = quads 0..3 of sub-block 2p, then of 2p + 1 (3 bits each):
//     u8 a[Rows][4] = v0 | v1 << 3 | (v6 & 3) << 6,  u8 b[Rows][4] = v2 | v3 << 3 | (v7 & 3) << 6,
//     u8 c[Rows][4] = v4 | v5 << 3 | (v7 >> 2) << 6 | (v6 >> 2) << 7.
//   Six quads are one AND (and a shift); v6 / v7 take 3 ops on NEON (shift-inserts), 4 on x86. The
//   layout before it (2-bit planes + a third-bit vector, as Q2_K) took ~35 ops per pair.
// Q4_K, 148 * Rows (2368 = +2.8%); sub-blocks s of 32 weights:
//   u16 d[Rows], dmin[Rows]; u8 sc[8][Rows]; u8 mn[4][Rows][2]: mins of 2p, 2p + 1 (int16 pairs);
//   u8 qs[8][4][Rows][4]: qs[s][j][r][b] = q(32s + 4j + b) | q(32s + 16 + 4j + b) << 4.
// Q5_K, 180 * Rows (2880 = +2.3%): as Q4_K, each sub-block's 4 quad vectors followed by
//   u8 qh[Rows][4]: bit j = bit 4 of q(32s + 4j + b), bit 4 + j = bit 4 of q(32s + 16 + 4j + b).
// Q6_K, 210 * Rows, rounded up to 64 for 16 rows (3392 = +0.95%; 4 rows: 840 = +0%, no padding):
//   u16 d[Rows]; i8 sc[8][Rows][2]: scales of 2p, 2p + 1;
//   per sub-block g: u8 v[3][Rows][4]: v[j] = quad j (all 6 bits) | bits 2j, 2j + 1 of quad 3 << 6.
//   Quads 0..2 are one AND (0x3F) each; quad 3 gathers the three top-bit pairs (x86: three byte
//   shifts and two bit-selects, NEON: one shift and two shift-inserts). The layout before it
//   (two nibble vectors + one vector of top bits) took 17 vector ops per sub-block on x86, 9 on NEON.
//
// Activations (PackedActQ8K, one per 256): the block_q8_K of quantize_row_q8_K plus its sums per
// 32 quants (Q4_K / Q5_K mins multiply them). Mins of Q2_K and the offsets of Q3_K / Q6_K are
// applied through bsums: dot(q - o, y) = dot(q, y) - o * sum(y).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "edgellm/core/error.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/dequantize.hpp"
#include "edgellm/quant/ref_kquants.hpp"
#include "edgellm/quant/scales.hpp"

namespace edgellm {

// One super-block of activations in the packed K-quant GEMMs' form.
struct PackedActQ8K {
  block_q8_K q;         // exactly as quantize_row_q8_K makes it
  int16_t bsums32[8];   // bsums32[s] = q.bsums[2s] + q.bsums[2s + 1]
};
static_assert(sizeof(PackedActQ8K) == sizeof(block_q8_K) + 16, "wrong PackedActQ8K size/padding");

inline size_t packed_act_q8_K_bytes(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(PackedActQ8K); }

// Fills the sums per 32 of already quantized blocks: dst[b].q must be set.
inline void finish_packed_act_q8_K(PackedActQ8K* dst, int64_t nblocks) {
  for (int64_t b = 0; b < nblocks; ++b)
    for (int s = 0; s < 8; ++s) dst[b].bsums32[s] = int16_t(dst[b].q.bsums[2 * s] + dst[b].q.bsums[2 * s + 1]);
}

// x: [n_in] floats -> dst: [n_in / 256] PackedActQ8K, quantized block by block by `quantize` (a Q8_K
// row quantizer: the ref one, or a SIMD one bit-exact with it).
template <FromFloatFn quantize>
inline void prepare_act_q8_K_packed(const float* x, int64_t n_in, void* dst) {
  auto* a = static_cast<PackedActQ8K*>(dst);
  for (int64_t b = 0; b < n_in / QK_K; ++b) quantize(x + b * QK_K, &a[b].q, QK_K);
  finish_packed_act_q8_K(a, n_in / QK_K);
}
inline void prepare_act_q8_K_packed_ref(const float* x, int64_t n_in, void* dst) {
  prepare_act_q8_K_packed<detail::quantize_erased<block_q8_K, quantize_row_q8_K_ref>>(x, n_in, dst);
}

namespace packed_k {

// Packed super-block sizes for R rows (see the layouts above). Groups of 16 rows or more (x86,
// 64-byte vector loads) pad q3_K / q6_K super-blocks to whole cache lines so no load splits two;
// narrower groups (NEON x4: 16-byte loads, one in four at most crossing a line) are not padded,
// which keeps q6_K at the file's 210 bytes per row and q3_K at 114 (the padding made them 224
// and 128: +6.7 % and +16 % of what a board must hold and read per token).
constexpr size_t round_up64(size_t n) { return (n + 63) / 64 * 64; }
constexpr size_t pad_for_rows(size_t n, int rows) { return rows >= 16 ? round_up64(n) : n; }
constexpr size_t q2_K_bytes(int rows) { return size_t(84) * size_t(rows); }
constexpr size_t q3_K_bytes(int rows) { return pad_for_rows(size_t(114) * size_t(rows), rows); }
constexpr size_t q4_K_bytes(int rows) { return size_t(148) * size_t(rows); }
constexpr size_t q5_K_bytes(int rows) { return size_t(180) * size_t(rows); }
constexpr size_t q6_K_bytes(int rows) { return pad_for_rows(size_t(210) * size_t(rows), rows); }

// The 256 unsigned quants of one block, as the packed layouts store them (q3_K + 4, q6_K + 32).
// Decoded a block at a time (not per index) so that packing at load stays fast.
inline void quants_of(const block_q2_K& x, uint8_t q[QK_K]) {
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) q[c * 128 + k * 32 + l] = uint8_t((x.qs[c * 32 + l] >> (2 * k)) & 3);
}
inline void quants_of(const block_q3_K& x, uint8_t q[QK_K]) {
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l)
        q[c * 128 + k * 32 + l] =
            uint8_t(((x.qs[c * 32 + l] >> (2 * k)) & 3) | ((x.hmask[l] >> (4 * c + k)) & 1) << 2);
}
template <class Block>  // q4_K; q5_K adds its fifth bits
void nibbles_of(const Block& x, uint8_t q[QK_K]) {
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      q[p * 64 + l] = x.qs[p * 32 + l] & 0xF;
      q[p * 64 + 32 + l] = x.qs[p * 32 + l] >> 4;
    }
}
inline void quants_of(const block_q4_K& x, uint8_t q[QK_K]) { nibbles_of(x, q); }
inline void quants_of(const block_q5_K& x, uint8_t q[QK_K]) {
  nibbles_of(x, q);
  for (int s = 0; s < 8; ++s)
    for (int l = 0; l < 32; ++l) q[s * 32 + l] = uint8_t(q[s * 32 + l] | ((x.qh[l] >> s) & 1) << 4);
}
inline void quants_of(const block_q6_K& x, uint8_t q[QK_K]) {
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const uint8_t lb = x.ql[c * 64 + (k & 1) * 32 + l];
        q[c * 128 + k * 32 + l] = uint8_t((k < 2 ? (lb & 0xF) : (lb >> 4)) | ((x.qh[c * 32 + l] >> (2 * k)) & 3) << 4);
      }
}

// The skeleton of every packer: checks, zeroes the group (rows count..Rows-1 and padding stay 0),
// then f(super-block bytes, row r, block, its quants) for each super-block of each source row.
template <int Rows, class Block, class F>
void pack_groups(const char* type, size_t sb_bytes, const void* src, size_t row_bytes, int count, int64_t n_in,
                 void* dst, F&& f) {
  EDGELLM_CHECK(n_in > 0 && n_in % QK_K == 0, "packed ", type, ": n_in must be a positive multiple of 256, got ", n_in);
  EDGELLM_CHECK(count >= 0 && count <= Rows, "packed ", type, ": count must be in [0, ", Rows, "], got ", count);
  std::memset(dst, 0, size_t(n_in / QK_K) * sb_bytes);
  for (int64_t b = 0; b < n_in / QK_K; ++b)
    for (int r = 0; r < count; ++r) {
      Block x;
      std::memcpy(&x, static_cast<const uint8_t*>(src) + size_t(r) * row_bytes + size_t(b) * sizeof(Block), sizeof(Block));
      uint8_t q[QK_K];
      quants_of(x, q);
      f(static_cast<uint8_t*>(dst) + size_t(b) * sb_bytes, r, x, q);
    }
}

inline float fp16_at(const uint8_t* p, int i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return fp16_to_fp32(h);
}

// The skeleton of every reference GEMM: out[t * out_stride + r] = sum over super-blocks b of
// sb_dot(packed super-block b, activation block b of token t, r).
template <int Rows, class SbDot>
void gemm_groups(size_t sb_bytes, int64_t n_in, const void* group, const void* act, int ntok, float* out,
                 size_t out_stride, SbDot&& sb_dot) {
  const auto* acts = static_cast<const PackedActQ8K*>(act);
  const int64_t nsb = n_in / QK_K;
  for (int t = 0; t < ntok; ++t)
    for (int r = 0; r < Rows; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nsb; ++b)
        sum += sb_dot(static_cast<const uint8_t*>(group) + size_t(b) * sb_bytes, acts[size_t(t) * size_t(nsb) + size_t(b)], r);
      out[size_t(t) * out_stride + size_t(r)] = sum;
    }
}

// Integer dot of row r's quad (4 bytes at w + 4r, each decoded by u) with 4 activation bytes.
template <class U>
int32_t quad_dot(const uint8_t* w, int r, const int8_t* a, U&& u) {
  int32_t s = 0;
  for (int e = 0; e < 4; ++e) s += u(w[r * 4 + e]) * a[e];
  return s;
}

// The float result of one super-block in the order of the per-row refs: d8 * (d * isum - dmin *
// msum) for q4_K / q5_K, d8 * d * isum - d8 * dmin * msum for q2_K (the terms often nearly cancel).
inline float scale_d_dmin(bool factored, const uint8_t* sb, int rows, const PackedActQ8K& a, int r, int32_t isum,
                          int32_t msum) {
  const float d = fp16_at(sb, r), dmin = fp16_at(sb + 2 * rows, r);
  return factored ? a.q.d * (d * float(isum) - dmin * float(msum)) : a.q.d * d * float(isum) - a.q.d * dmin * float(msum);
}

}  // namespace packed_k

// ---- packers: rows [0, count) of src (row r at src + r * row_bytes) -> one group at dst ----

template <int Rows>
size_t group_bytes_q2_K_packed(int64_t n_in) { return size_t(n_in / QK_K) * packed_k::q2_K_bytes(Rows); }
template <int Rows>
size_t group_bytes_q3_K_packed(int64_t n_in) { return size_t(n_in / QK_K) * packed_k::q3_K_bytes(Rows); }
template <int Rows>
size_t group_bytes_q4_K_packed(int64_t n_in) { return size_t(n_in / QK_K) * packed_k::q4_K_bytes(Rows); }
template <int Rows>
size_t group_bytes_q5_K_packed(int64_t n_in) { return size_t(n_in / QK_K) * packed_k::q5_K_bytes(Rows); }
template <int Rows>
size_t group_bytes_q6_K_packed(int64_t n_in) { return size_t(n_in / QK_K) * packed_k::q6_K_bytes(Rows); }

template <int Rows>
void pack_q2_K_packed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  packed_k::pack_groups<Rows, block_q2_K>(
      "q2_K", packed_k::q2_K_bytes(Rows), src, row_bytes, count, n_in, dst, [](uint8_t* sb, int r, const block_q2_K& x, const uint8_t* q) {
        std::memcpy(sb + 2 * r, &x.d, 2);
        std::memcpy(sb + 2 * Rows + 2 * r, &x.dmin, 2);
        for (int g = 0; g < 16; ++g) {
          sb[4 * Rows + (g / 2) * Rows * 2 + r * 2 + g % 2] = x.scales[g];
          uint8_t* qs = sb + 20 * Rows + g * 4 * Rows;
          const uint8_t* qg = q + 16 * g;
          for (int e = 0; e < 4; ++e) qs[r * 4 + e] = uint8_t(qg[e] | qg[4 + e] << 2 | qg[8 + e] << 4 | qg[12 + e] << 6);
        }
      });
}

template <int Rows>
void pack_q3_K_packed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  packed_k::pack_groups<Rows, block_q3_K>(
      "q3_K", packed_k::q3_K_bytes(Rows), src, row_bytes, count, n_in, dst, [](uint8_t* sb, int r, const block_q3_K& x, const uint8_t* q) {
        std::memcpy(sb + 2 * r, &x.d, 2);
        int8_t sc[16];
        unpack_scales_q3_K(x.scales, sc);
        for (int g = 0; g < 16; ++g) sb[2 * Rows + (g / 2) * Rows * 2 + r * 2 + g % 2] = uint8_t(sc[g]);
        for (int p = 0; p < 8; ++p) {
          uint8_t* pair = sb + 18 * Rows + p * 12 * Rows;
          for (int e = 0; e < 4; ++e) {
            int v[8];
            for (int j = 0; j < 8; ++j) v[j] = q[16 * (2 * p + j / 4) + 4 * (j % 4) + e];
            pair[r * 4 + e] = uint8_t(v[0] | v[1] << 3 | (v[6] & 3) << 6);
            pair[4 * Rows + r * 4 + e] = uint8_t(v[2] | v[3] << 3 | (v[7] & 3) << 6);
            pair[8 * Rows + r * 4 + e] = uint8_t(v[4] | v[5] << 3 | (v[7] >> 2) << 6 | (v[6] >> 2) << 7);
          }
        }
      });
}

// q4_K and q5_K share the layout but for q5_K's bit planes after each sub-block's quads.
template <int Rows, class Block>
void pack_q45_K_sb(uint8_t* sb, int r, const Block& x, const uint8_t* q, int sub_bytes) {
  std::memcpy(sb + 2 * r, &x.d, 2);
  std::memcpy(sb + 2 * Rows + 2 * r, &x.dmin, 2);
  uint8_t s8[8], m8[8];
  unpack_scales_mins_k4(x.scales, s8, m8);
  for (int s = 0; s < 8; ++s) {
    sb[4 * Rows + s * Rows + r] = s8[s];
    sb[12 * Rows + (s / 2) * Rows * 2 + r * 2 + s % 2] = m8[s];
    uint8_t* qs = sb + 20 * Rows + s * sub_bytes;
    for (int j = 0; j < 4; ++j)
      for (int e = 0; e < 4; ++e) {
        const int i0 = 32 * s + 4 * j + e, i1 = i0 + 16;
        qs[j * 4 * Rows + r * 4 + e] = uint8_t((q[i0] & 15) | (q[i1] & 15) << 4);
        if (sub_bytes > 16 * Rows)  // q5_K: bit j = bit 4 of quad j (low nibbles), bit 4 + j of quad 4 + j
          qs[16 * Rows + r * 4 + e] = uint8_t(qs[16 * Rows + r * 4 + e] | (q[i0] >> 4) << j | (q[i1] >> 4) << (4 + j));
      }
  }
}

template <int Rows>
void pack_q4_K_packed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  packed_k::pack_groups<Rows, block_q4_K>(
      "q4_K", packed_k::q4_K_bytes(Rows), src, row_bytes, count, n_in, dst, [](uint8_t* sb, int r, const block_q4_K& x, const uint8_t* q) {
        pack_q45_K_sb<Rows>(sb, r, x, q, 16 * Rows);
      });
}

template <int Rows>
void pack_q5_K_packed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  packed_k::pack_groups<Rows, block_q5_K>(
      "q5_K", packed_k::q5_K_bytes(Rows), src, row_bytes, count, n_in, dst, [](uint8_t* sb, int r, const block_q5_K& x, const uint8_t* q) {
        pack_q45_K_sb<Rows>(sb, r, x, q, 20 * Rows);
      });
}

template <int Rows>
void pack_q6_K_packed(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  packed_k::pack_groups<Rows, block_q6_K>(
      "q6_K", packed_k::q6_K_bytes(Rows), src, row_bytes, count, n_in, dst, [](uint8_t* sb, int r, const block_q6_K& x, const uint8_t* q) {
        std::memcpy(sb + 2 * r, &x.d, 2);
        for (int g = 0; g < 16; ++g) {
          sb[2 * Rows + (g / 2) * Rows * 2 + r * 2 + g % 2] = uint8_t(x.scales[g]);
          uint8_t* v = sb + 18 * Rows + g * 12 * Rows;
          for (int j = 0; j < 3; ++j)
            for (int e = 0; e < 4; ++e) {
              const int i = 16 * g + e;
              v[j * 4 * Rows + r * 4 + e] = uint8_t(q[i + 4 * j] | ((q[i + 12] >> (2 * j)) & 3) << 6);
            }
        }
      });
}

// Sets t.packed_of(type) (one of Q2_K .. Q6_K) to an ISA's Rows-row form of it: the layout above,
// the ISA's activation preparer and GEMM, and a name for -v. An ISA registers each type it has a
// kernel for; the others keep no packed form.
using PackedGemmFn = void (*)(int64_t, const void*, const void*, int, float*, size_t);
template <int Rows>
inline void set_packed_kquant_form(KernelTable& t, DType type, const char* name, PackedGemmFn gemm,
                                   void (*prepare_act)(const float*, int64_t, void*)) {
  size_t (*group_bytes)(int64_t) = nullptr;
  decltype(PackedFormat::pack) pack = nullptr;
  switch (type) {
    case DType::Q2_K: group_bytes = group_bytes_q2_K_packed<Rows>; pack = pack_q2_K_packed<Rows>; break;
    case DType::Q3_K: group_bytes = group_bytes_q3_K_packed<Rows>; pack = pack_q3_K_packed<Rows>; break;
    case DType::Q4_K: group_bytes = group_bytes_q4_K_packed<Rows>; pack = pack_q4_K_packed<Rows>; break;
    case DType::Q5_K: group_bytes = group_bytes_q5_K_packed<Rows>; pack = pack_q5_K_packed<Rows>; break;
    case DType::Q6_K: group_bytes = group_bytes_q6_K_packed<Rows>; pack = pack_q6_K_packed<Rows>; break;
    default: throw_error("set_packed_kquant_form: ", dtype_name(type), " has no packed K-quant layout");
  }
  t.packed_of(type) = PackedFormat{Rows, name, group_bytes, pack, packed_act_q8_K_bytes, prepare_act, gemm};
}

// ---- reference GEMMs: out[t * out_stride + r] = dot(row r, activation t), t < ntok, r < Rows ----
// Integer sums per super-block are exact (as vec_dot_*_q8_K_ref); only the float order differs.

template <int Rows>
void gemm_q2_K_packed_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_k::gemm_groups<Rows>(packed_k::q2_K_bytes(Rows), n_in, group, act, ntok, out, out_stride,
                              [](const uint8_t* sb, const PackedActQ8K& a, int r) {
                                int32_t isum = 0, msum = 0;
                                for (int g = 0; g < 16; ++g) {
                                  int32_t gsum = 0;
                                  for (int k = 0; k < 4; ++k)
                                    gsum += packed_k::quad_dot(sb + 20 * Rows + g * 4 * Rows, r, a.q.qs + 16 * g + 4 * k,
                                                               [k](uint8_t v) { return (v >> (2 * k)) & 3; });
                                  const uint8_t s = sb[4 * Rows + (g / 2) * Rows * 2 + r * 2 + g % 2];
                                  isum += gsum * (s & 15);
                                  msum += a.q.bsums[g] * (s >> 4);
                                }
                                return packed_k::scale_d_dmin(/*factored=*/false, sb, Rows, a, r, isum, msum);
                              });
}

// q3_K / q6_K: signed scale pairs at 2 * Rows, quants from 18 * Rows decoded by q(quants, g, k, e)
// (quad k of sub-block g, byte e, row r's quads already selected), stored value = quant + offset.
template <int Rows, class Q>
float sb_dot_offset_ref(const uint8_t* sb, const PackedActQ8K& a, int r, int offset, Q&& q) {
  int32_t isum = 0, csum = 0;  // csum: the offset's share, sum of scale * bsum
  for (int g = 0; g < 16; ++g) {
    int32_t gsum = 0;
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 4; ++e) gsum += q(sb + 18 * Rows + r * 4, g, k, e) * a.q.qs[16 * g + 4 * k + e];
    const int scale = int8_t(sb[2 * Rows + (g / 2) * Rows * 2 + r * 2 + g % 2]);
    isum += gsum * scale;
    csum += a.q.bsums[g] * scale;
  }
  return a.q.d * packed_k::fp16_at(sb, r) * float(isum - offset * csum);
}

template <int Rows>
void gemm_q3_K_packed_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_k::gemm_groups<Rows>(packed_k::q3_K_bytes(Rows), n_in, group, act, ntok, out, out_stride,
                              [](const uint8_t* sb, const PackedActQ8K& a, int r) {
                                return sb_dot_offset_ref<Rows>(sb, a, r, 4, [](const uint8_t* qs, int g, int k, int e) {
                                  const uint8_t* pair = qs + (g / 2) * 12 * Rows + e;
                                  const int A = pair[0], B = pair[4 * Rows], C = pair[8 * Rows];
                                  switch ((g % 2) * 4 + k) {  // v0 .. v7 of the pair
                                    case 0: return A & 7;
                                    case 1: return (A >> 3) & 7;
                                    case 2: return B & 7;
                                    case 3: return (B >> 3) & 7;
                                    case 4: return C & 7;
                                    case 5: return (C >> 3) & 7;
                                    case 6: return (A >> 6) | (C >> 7) << 2;
                                    default: return (B >> 6) | ((C >> 6) & 1) << 2;
                                  }
                                });
                              });
}

// q4_K / q5_K: sub_bytes = 16 * Rows (q4_K) or 20 * Rows (q5_K, with its bit plane).
template <int Rows>
float sb_dot_q45_K_ref(const uint8_t* sb, const PackedActQ8K& a, int r, int sub_bytes) {
  int32_t isum = 0, msum = 0;
  for (int s = 0; s < 8; ++s) {
    const uint8_t* qs = sb + 20 * Rows + s * sub_bytes;
    int32_t ssum = 0;
    for (int j = 0; j < 4; ++j) {
      const uint8_t* hb = sub_bytes > 16 * Rows ? qs + 16 * Rows + r * 4 : nullptr;
      for (int e = 0; e < 4; ++e) {
        const uint8_t v = qs[j * 4 * Rows + r * 4 + e];
        const int h0 = hb ? ((hb[e] >> j) & 1) << 4 : 0, h1 = hb ? ((hb[e] >> (4 + j)) & 1) << 4 : 0;
        ssum += ((v & 15) | h0) * a.q.qs[32 * s + 4 * j + e] + ((v >> 4) | h1) * a.q.qs[32 * s + 16 + 4 * j + e];
      }
    }
    isum += ssum * sb[4 * Rows + s * Rows + r];
    msum += a.bsums32[s] * sb[12 * Rows + (s / 2) * Rows * 2 + r * 2 + s % 2];
  }
  return packed_k::scale_d_dmin(/*factored=*/true, sb, Rows, a, r, isum, msum);
}

template <int Rows>
void gemm_q4_K_packed_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_k::gemm_groups<Rows>(packed_k::q4_K_bytes(Rows), n_in, group, act, ntok, out, out_stride,
                              [](const uint8_t* sb, const PackedActQ8K& a, int r) { return sb_dot_q45_K_ref<Rows>(sb, a, r, 16 * Rows); });
}

template <int Rows>
void gemm_q5_K_packed_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_k::gemm_groups<Rows>(packed_k::q5_K_bytes(Rows), n_in, group, act, ntok, out, out_stride,
                              [](const uint8_t* sb, const PackedActQ8K& a, int r) { return sb_dot_q45_K_ref<Rows>(sb, a, r, 20 * Rows); });
}

template <int Rows>
void gemm_q6_K_packed_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_k::gemm_groups<Rows>(packed_k::q6_K_bytes(Rows), n_in, group, act, ntok, out, out_stride,
                              [](const uint8_t* sb, const PackedActQ8K& a, int r) {
                                return sb_dot_offset_ref<Rows>(sb, a, r, 32, [](const uint8_t* qs, int g, int k, int e) {
                                  const uint8_t* v = qs + g * 12 * Rows + e;
                                  if (k < 3) return v[k * 4 * Rows] & 63;
                                  return (v[0] >> 6) | (v[4 * Rows] >> 6) << 2 | (v[8 * Rows] >> 6) << 4;
                                });
                              });
}

}  // namespace edgellm
