// Row-interleaved ("packed") Q4_0 / Q8_0 weights (kernels/api.hpp PackedFormat): the layout, its
// packer and activation form, and a plain C++ GEMM over it — the oracle the SIMD kernels
// (kernels/x86/packed-inl.hpp) are tested against. Standard library only; no ISA headers.
//
// A group holds R rows (R = the SIMD lanes of 32 bits: 16 on AVX-512, 8 on AVX2) so one lane
// accumulates one row: a u8 x s8 4-way dot (vpdpbusd) of "word" j of a block — lane r = weights
// 4j .. 4j+3 of row r — against a broadcast of the activation's quants 4j .. 4j+3 adds each row's
// partial block dot into its own lane. Per 32-weight block b of the group:
//   Q8_0 qs: 8 words of 4R bytes; byte 4r + i of word j = u8(q[r][4j + i] + 128), or in the
//            signed form (x86 without VNNI, whose vpmaddubsw saturates on bytes above 127) the
//            int8 quant itself, multiplied as |w| x (y with w's sign), offset 0.
//   Q4_0 qs: 4 chunks of 4R bytes; byte 4r + i of chunk c = u[r][8c + i] | u[r][8c + 4 + i] << 4
//            (u = the 0..15 nibble value; low nibbles are word 2c, high nibbles word 2c + 1).
//   scales: the R row scales as consecutive fp16 (one vcvtph2ps).
// Blocks go in pairs, [qs(2p) qs(2p+1) scales(2p) scales(2p+1)]: one sequential stream per group
// whose vector loads stay aligned (a pair is 576 B = 9 lines for Q4_0 x16); an odd last block
// leaves its partner zero. Same bytes as the rows' blocks (18 or 34 B per 32 weights) but for that.
//
// Unsigned weights need the offset back: dot(u - o, y) = dot(u, y) - o * sum(y), o = 8 (Q4_0) or
// 128 (Q8_0). The activation carries it per block so the kernels start the integer sum from it:
//   [nb * 32 int8 quants][nb float d][nb int32 -o * sum(quants)]   (nb = n_in / 32)
// with the quants and d exactly those of the Q8_0 quantizer (vec_dot's activation type).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "edgellm/core/error.hpp"
#include "edgellm/kernels/api.hpp"
#include "edgellm/quant/blocks.hpp"
#include "edgellm/quant/fp16.hpp"
#include "edgellm/quant/dequantize.hpp"

namespace edgellm {
namespace packed {

constexpr int kBlock = 32;      // weights per block (QK4_0 == QK8_0)
constexpr int kWords = 8;       // 4-byte words per block and row
constexpr int kQ4Offset = 8;    // Q4_0 nibble u stands for u - 8
constexpr int kQ8Offset = 128;  // stored Q8_0 byte u stands for u - 128

// Byte offsets inside a group of R rows whose blocks hold kQsPerRow quant bytes per row.
template <int kQsPerRow, int R>
struct Geometry {
  static constexpr size_t kBlockQs = size_t(R) * kQsPerRow;
  static constexpr size_t kBlockScales = size_t(R) * sizeof(ggml_half);
  static constexpr size_t kPair = 2 * (kBlockQs + kBlockScales);
  static size_t qs_at(int64_t b) { return size_t(b / 2) * kPair + size_t(b % 2) * kBlockQs; }
  static size_t scales_at(int64_t b) { return size_t(b / 2) * kPair + 2 * kBlockQs + size_t(b % 2) * kBlockScales; }
  static size_t group_bytes(int64_t n_in) { return size_t((n_in / kBlock + 1) / 2) * kPair; }
};
template <int R>
using GeometryQ4_0 = Geometry<QK4_0 / 2, R>;
template <int R>
using GeometryQ8_0 = Geometry<QK8_0, R>;

// ---- packing (load time; plain C++ is fast enough) ----

inline void check_packable(int count, int rows, int64_t n_in, int64_t block = kBlock) {
  EDGELLM_CHECK(count >= 0 && count <= rows, "packed: ", count, " rows do not fit a group of ", rows);
  EDGELLM_CHECK(n_in > 0 && n_in % block == 0, "packed: n_in ", n_in, " is not a positive multiple of ", block);
}

// The packing loop both types share: the group zeroed, then for each row r < count and block b
// put(block, r, the group's quant bytes of block b) and the block's scale stored.
template <class Block, class G, int R, class Put>
inline void pack_rows(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst, Put put) {
  check_packable(count, R, n_in);
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, G::group_bytes(n_in));
  for (int r = 0; r < count; ++r) {
    const auto* x = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(src) + size_t(r) * row_bytes);
    for (int64_t b = 0; b < n_in / kBlock; ++b) {
      put(x[b], r, out + G::qs_at(b));
      std::memcpy(out + G::scales_at(b) + size_t(r) * sizeof(ggml_half), &x[b].d, sizeof(ggml_half));
    }
  }
}

// A word at a time (prefill packs IQ4_NL's file rows per group: kernels/matmul.hpp): the file's byte
// j holds weights j and j + 16; chunk c's word of row r weights 8c .. 8c + 3 in its low nibbles and
// 8c + 4 .. 8c + 7 in its high ones (q4_0_group_row below undoes it).
inline constexpr uint32_t kLoNibbles = 0x0F0F0F0Fu;
// The 16 file bytes of 32 weights (Q4_0's order) as row r's words of the 4 chunks at qs.
template <int R>
inline void put_q4_0_chunks(const uint8_t* file16, int r, uint8_t* qs) {
  constexpr uint32_t kLo = kLoNibbles;
  uint32_t f[kWords / 2];
  std::memcpy(f, file16, sizeof f);
  const uint32_t c[kWords / 2] = {(f[0] & kLo) | (f[1] & kLo) << 4, (f[2] & kLo) | (f[3] & kLo) << 4,
                                  (f[0] >> 4 & kLo) | (f[1] & ~kLo), (f[2] >> 4 & kLo) | (f[3] & ~kLo)};
  for (int k = 0; k < kWords / 2; ++k) std::memcpy(qs + size_t(k) * 4 * R + 4 * size_t(r), &c[k], 4);
}
// Its inverse: row r's 4 chunk words at qs back as the 16 file bytes.
template <int R>
inline void get_q4_0_chunks(const uint8_t* qs, int r, uint8_t* file16) {
  constexpr uint32_t kLo = kLoNibbles;
  uint32_t w[kWords / 2], f[kWords / 2];
  for (int c = 0; c < kWords / 2; ++c) std::memcpy(&w[c], qs + size_t(c) * 4 * R + 4 * size_t(r), 4);
  for (int h = 0; h < 2; ++h) {  // file bytes 8h .. 8h + 7 from chunks h (weights 8h ..) and h + 2 (8h + 16 ..)
    f[2 * h] = (w[h] & kLo) | (w[h + 2] & kLo) << 4;
    f[2 * h + 1] = (w[h] >> 4 & kLo) | (w[h + 2] & ~kLo);
  }
  std::memcpy(file16, f, sizeof f);
}
template <int R>
inline void pack_q4_0(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  pack_rows<block_q4_0, GeometryQ4_0<R>, R>(src, row_bytes, count, n_in, dst,
                                            [](const block_q4_0& x, int r, uint8_t* qs) { put_q4_0_chunks<R>(x.qs, r, qs); });
}

template <int R, int kOffset = kQ8Offset>
inline void pack_q8_0(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  static_assert(kOffset == kQ8Offset || kOffset == 0, "Q8_0 packs unsigned (+128) or signed");
  pack_rows<block_q8_0, GeometryQ8_0<R>, R>(src, row_bytes, count, n_in, dst, [](const block_q8_0& x, int r, uint8_t* qs) {
    for (int j = 0; j < kWords; ++j)
      for (int i = 0; i < 4; ++i) qs[j * 4 * R + 4 * r + i] = uint8_t(x.qs[4 * j + i] + kOffset);
  });
}

// ---- activations ----

inline size_t act_bytes(int64_t n_in) { return size_t(n_in / kBlock) * (kBlock + sizeof(float) + sizeof(int32_t)); }
// The three sections of one activation row of n_in elements.
struct ActView {
  const int8_t* qs;    // [nb * 32]
  const float* d;      // [nb]
  const int32_t* corr;  // [nb] -offset * sum of the block's quants
};
inline ActView act_view(const void* act, int64_t n_in) {
  const auto* p = static_cast<const uint8_t*>(act);
  const size_t nb = size_t(n_in / kBlock);
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const float*>(p + nb * kBlock),
          reinterpret_cast<const int32_t*>(p + nb * (kBlock + sizeof(float)))};
}

// x: [n_in] floats -> the activation form above, quantized block by block with `quantize` (a Q8_0
// row quantizer: the ref one here, the SIMD one in the SIMD tables, bit-exact with each other).
template <FromFloatFn quantize, int kOffset>
inline void prepare_act(const float* x, int64_t n_in, void* dst) {
  auto* p = static_cast<uint8_t*>(dst);
  const size_t nb = size_t(n_in / kBlock);
  auto* d = reinterpret_cast<float*>(p + nb * kBlock);
  auto* corr = reinterpret_cast<int32_t*>(p + nb * (kBlock + sizeof(float)));
  for (size_t b = 0; b < nb; ++b) {
    block_q8_0 blk;
    quantize(x + b * kBlock, &blk, kBlock);
    std::memcpy(p + b * kBlock, blk.qs, kBlock);
    int32_t sum = 0;
    for (int j = 0; j < kBlock; ++j) sum += blk.qs[j];
    const float db = fp16_to_fp32(blk.d);
    std::memcpy(d + b, &db, sizeof(float));  // act may be unaligned for the scalar path
    const int32_t c = -kOffset * sum;
    std::memcpy(corr + b, &c, sizeof(int32_t));
  }
}

// ---- the reference GEMM ----

// Unsigned weight k of row r in block b (qs = the block's quant bytes).
template <int R>
inline int weight_q4_0(const uint8_t* qs, int r, int k) {
  const uint8_t byte = qs[(k / 8) * 4 * R + 4 * r + k % 4];
  return k % 8 < 4 ? byte & 0x0F : byte >> 4;
}
template <int R, bool kSigned = false>
inline int weight_q8_0(const uint8_t* qs, int r, int k) {
  const uint8_t byte = qs[(k / 4) * 4 * R + 4 * r + k % 4];
  return kSigned ? int(int8_t(byte)) : int(byte);
}

// out[t * out_stride + r] for t < ntok, r < R: integer block dots, then one float scale per block.
template <class G, int R, int (*weight)(const uint8_t*, int, int)>
inline void gemm_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  const auto* g = static_cast<const uint8_t*>(group);
  const int64_t nb = n_in / kBlock;
  for (int t = 0; t < ntok; ++t) {
    const ActView a = act_view(static_cast<const uint8_t*>(act) + size_t(t) * act_bytes(n_in), n_in);
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t corr, isum;
        float dy;
        std::memcpy(&corr, a.corr + b, sizeof corr);
        std::memcpy(&dy, a.d + b, sizeof dy);
        isum = corr;
        for (int k = 0; k < kBlock; ++k) isum += weight(g + G::qs_at(b), r, k) * a.qs[b * kBlock + k];
        ggml_half dw;
        std::memcpy(&dw, g + G::scales_at(b) + size_t(r) * sizeof(ggml_half), sizeof dw);
        sum += float(isum) * fp16_to_fp32(dw) * dy;
      }
      out[size_t(t) * out_stride + size_t(r)] = sum;
    }
  }
}

// ---- IQ4_NL in Q4_0's layout ----
// block_iq4_nl has block_q4_0's shape (an F16 scale, then 16 bytes of nibbles in the same order), so
// pack_q4_0 packs it; its nibbles index kvalues_iq4nl, looked up by the kernels after the load
// (kernels/x86/packed-inl.hpp, iq4_nlx16 / iq4_nlx8).
static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0) && offsetof(block_iq4_nl, qs) == offsetof(block_q4_0, qs),
              "IQ4_NL packs as Q4_0");
// Row r of a Q4_0-layout group in the file's blocks, the inverse of pack_q4_0 (for tests).
template <int R>
inline void q4_0_group_row(const void* group, int64_t n_in, int r, void* file_row) {
  using G = GeometryQ4_0<R>;
  const auto* g = static_cast<const uint8_t*>(group);
  auto* x = static_cast<block_q4_0*>(file_row);
  for (int64_t b = 0; b < n_in / kBlock; ++b) {
    std::memcpy(&x[b].d, g + G::scales_at(b) + size_t(r) * sizeof(ggml_half), sizeof(ggml_half));
    get_q4_0_chunks<R>(g + G::qs_at(b), r, x[b].qs);
  }
}

// ---- IQ4_XS: Q4_0's layout per 32 weights ----
// A group of R rows holds, per 256-weight block b: [qs: its 8 vectors of 32 weights, each as a
// Q4_0 block's 4 chunks of 4R bytes] [ls: 8 x R int8, vector v of row r at v R + r: the 6-bit
// scale minus 32] [d: R fp16]: 138 bytes per row and block (the file: 136). Activations: the
// type's Q8_K blocks (their group sums give the u8 path's -128 * sum y per vector).
template <int R>
struct GeometryIQ4_XS {
  static constexpr size_t kVecQs = 16 * size_t(R);
  static constexpr size_t kBlockBytes = 8 * kVecQs + 8 * size_t(R) + 2 * size_t(R);
  static size_t qs_at(int64_t b, int v) { return size_t(b) * kBlockBytes + size_t(v) * kVecQs; }
  static size_t ls_at(int64_t b) { return size_t(b) * kBlockBytes + 8 * kVecQs; }
  static size_t d_at(int64_t b) { return ls_at(b) + 8 * size_t(R); }
  static size_t group_bytes(int64_t n_in) { return size_t(n_in / QK_K) * kBlockBytes; }
};
template <int R>
inline void pack_iq4_xs(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) {
  using G = GeometryIQ4_XS<R>;
  check_packable(count, R, n_in, QK_K);
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, G::group_bytes(n_in));
  for (int r = 0; r < count; ++r) {
    const auto* x = reinterpret_cast<const block_iq4_xs*>(static_cast<const uint8_t*>(src) + size_t(r) * row_bytes);
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
      for (int v = 0; v < QK_K / 32; ++v) {
        put_q4_0_chunks<R>(x[b].qs + 16 * v, r, out + G::qs_at(b, v));
        out[G::ls_at(b) + size_t(v) * R + size_t(r)] = uint8_t(int8_t(iq4_xs_scale(x[b], v) - 32));
      }
      std::memcpy(out + G::d_at(b) + size_t(r) * sizeof(ggml_half), &x[b].d, sizeof(ggml_half));
    }
  }
}
// Row r of a group in the file's blocks, the inverse of pack_iq4_xs (the AVX2 form's to_file_row).
template <int R>
inline void iq4_xs_group_row(const void* group, int64_t n_in, int r, void* file_row) {
  using G = GeometryIQ4_XS<R>;
  const auto* g = static_cast<const uint8_t*>(group);
  auto* x = static_cast<block_iq4_xs*>(file_row);
  for (int64_t b = 0; b < n_in / QK_K; ++b) {
    std::memcpy(&x[b].d, g + G::d_at(b) + size_t(r) * sizeof(ggml_half), sizeof(ggml_half));
    x[b].scales_h = 0;
    std::memset(x[b].scales_l, 0, sizeof x[b].scales_l);
    for (int v = 0; v < QK_K / 32; ++v) {
      get_q4_0_chunks<R>(g + G::qs_at(b, v), r, x[b].qs + 16 * v);
      const int s = int(int8_t(g[G::ls_at(b) + size_t(v) * R + size_t(r)])) + 32;
      x[b].scales_l[v / 2] = uint8_t(x[b].scales_l[v / 2] | (s & 15) << 4 * (v % 2));
      x[b].scales_h = uint16_t(x[b].scales_h | (s >> 4) << 2 * v);
    }
  }
}
inline size_t act_bytes_q8_K(int64_t n_in) { return size_t(n_in / QK_K) * sizeof(block_q8_K); }
template <FromFloatFn quantize>
inline void prepare_act_q8_K(const float* x, int64_t n_in, void* dst) { quantize(x, dst, n_in); }

template <int R>
inline void gemm_q4_0_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t stride) {
  gemm_ref<GeometryQ4_0<R>, R, weight_q4_0<R>>(n_in, group, act, ntok, out, stride);
}
template <int R, bool kSigned = false>
inline void gemm_q8_0_ref(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t stride) {
  gemm_ref<GeometryQ8_0<R>, R, weight_q8_0<R, kSigned>>(n_in, group, act, ntok, out, stride);
}

inline PackedFormat make_format(int rows, const char* name, size_t (*group_bytes)(int64_t),
                                decltype(PackedFormat::pack) pack, decltype(PackedFormat::prepare_act) prepare,
                                decltype(PackedFormat::gemm) gemm) {
  return PackedFormat{rows, name, group_bytes, pack, act_bytes, prepare, gemm};
}

// The reference formats (R rows per group); the SIMD tables reuse pack and group_bytes.
using QuantizeQ8_0Ref = void (*)(const float*, void*, int64_t);
inline constexpr QuantizeQ8_0Ref kQuantizeQ8_0Ref = detail::quantize_erased<block_q8_0, quantize_row_q8_0_ref>;
template <int R>
inline PackedFormat format_q4_0_ref() {
  return make_format(R, "q4_0-ref", GeometryQ4_0<R>::group_bytes, pack_q4_0<R>,
                     prepare_act<kQuantizeQ8_0Ref, kQ4Offset>, gemm_q4_0_ref<R>);
}
template <int R>
inline PackedFormat format_q8_0_ref() {
  return make_format(R, "q8_0-ref", GeometryQ8_0<R>::group_bytes, pack_q8_0<R>,
                     prepare_act<kQuantizeQ8_0Ref, kQ8Offset>, gemm_q8_0_ref<R>);
}
template <int R>
inline PackedFormat format_q8_0s_ref() {  // the signed form
  return make_format(R, "q8_0s-ref", GeometryQ8_0<R>::group_bytes, pack_q8_0<R, 0>,
                     prepare_act<kQuantizeQ8_0Ref, 0>, gemm_q8_0_ref<R, true>);
}

}  // namespace packed
}  // namespace edgellm
