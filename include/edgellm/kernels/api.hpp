// KernelTable: the function pointers the model calls, one entry per weight type plus the float
// helpers, filled once by select_kernels() (kernels/select.hpp). This header declares types only;
// it must not include any ISA-specific header.
#pragma once
#include <cstddef>
#include <cstdint>

#include "edgellm/config.hpp"
#include "edgellm/core/dtype.hpp"

namespace edgellm {

namespace unpack {
struct KScales;  // kernels/layouts/unpack_u8.hpp
}

// Dot product of one weight row w (n elements, stored in the weight type's blocks) with one
// activation row a (n elements, stored in the type's vec_dot_type). n is a multiple of the
// weight type's block size (and of the activation type's).
using VecDotFn = float (*)(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a);

// nrows consecutive weight rows (w, w + w_stride, ...) against one activation row:
// out[r] = dot(row r, a). Lets a kernel reuse each activation load for several rows.
using VecDotRowsFn = void (*)(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                              size_t w_stride, const void* EDGELLM_RESTRICT a);

// Converts n floats into a row of blocks of some type (activations, KV cache, quantizer).
using FromFloatFn = void (*)(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT y, int64_t n);
// Converts a row of n elements of some type back to floats.
using ToFloatFn = void (*)(const void* EDGELLM_RESTRICT x, float* EDGELLM_RESTRICT y, int64_t n);

// The activation format of weight type t's dot kernels on every ISA (ggml's vec_dot_type): F32
// for the float types, Q8_1 for the legacy types with a min (q4_1, q5_1: the activation's sum
// carries the min term), Q8_0 for the other 32-weight types, Q8_K for the 256-weight ones.
constexpr DType dot_activation_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return DType::F32;
    case DType::Q4_1:
    case DType::Q5_1: return DType::Q8_1;
    default: return dtype_block_size(t) == 32 ? DType::Q8_0 : DType::Q8_K;
  }
}

struct TypeKernels {
  VecDotFn vec_dot = nullptr;          // null: the type cannot be multiplied
  VecDotRowsFn vec_dot_rows = nullptr; // optional multi-row form of vec_dot
  int rows_per_call = 1;               // the row count vec_dot_rows is fastest at
  DType vec_dot_type = DType::F32;     // the activation format vec_dot expects
  FromFloatFn from_float = nullptr;    // to this type (fast variant; used for activations)
  ToFloatFn to_float = nullptr;        // from this type (dequantize a row)
  const char* variant = "";            // "ref", "avx2" (the x86 level), "neon", "dotprod"
};

// A weight type's row-interleaved form, made once at load (model/llama_weights.hpp) where the ISA
// has one: groups of `rows` consecutive weight rows stored so that one SIMD lane carries one row.
// The integer dot of a whole quant block then accumulates in that lane and takes one scale multiply
// per block for all rows at once, and a group is read as one sequential stream (decode is
// DRAM-bound). rows == 0: the type has no packed form on this table.
struct PackedFormat {
  int rows = 0;           // rows per group (the SIMD width in lanes)
  const char* name = "";  // for -v output, e.g. "q4_0x16"
  // Bytes of one group of `rows` rows of n_in elements.
  size_t (*group_bytes)(int64_t n_in) = nullptr;
  // Packs rows [0, count) of src (row r at src + r * row_bytes, n_in elements, count <= rows)
  // into one group at dst; rows count .. rows-1 of the group are zero (their outputs are unused).
  void (*pack)(const void* src, size_t row_bytes, int count, int64_t n_in, void* dst) = nullptr;
  // The activation form the kernel reads: act_bytes(n_in) bytes per activation row, made by
  // prepare_act from n_in floats. It quantizes exactly as the type's vec_dot_type does, so the
  // packed products equal vec_dot's up to float summation order.
  size_t (*act_bytes)(int64_t n_in) = nullptr;
  void (*prepare_act)(const float* x, int64_t n_in, void* dst) = nullptr;
  // out[t * out_stride + r] = dot(row r of the group, activation t) for t < ntok, r < rows;
  // activation t at act + t * act_bytes(n_in). ntok == 1 is the decode GEMV.
  void (*gemm)(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) = nullptr;
  // A form larger than the file's (the transcoded i-quants, kernels/layouts/transcoded_iquants.hpp)
  // for resident matrices only: streamed ones keep the file's bytes (model/residency.hpp stream_format).
  bool resident_only = false;
  // Optional, one-row forms only: the group's row in the u8 GEMM's form, exactly as the stored
  // type's unpack_row_u8 (kernels/layouts/unpack_u8.hpp) gives it from the file's row. Prefill of
  // gemm_min_tokens tokens or more then runs the table's u8 GEMM (kernels/matmul.hpp), as for the
  // matrix in place: the same bits whether the matrix is transcoded, read in place or streamed.
  void (*unpack_u8)(const void* group, int64_t n_in, uint8_t* u, float* s, float* m, const unpack::KScales& ks) = nullptr;
  // Optional, where the u8 GEMM takes the file's bytes (x86 AVX2 without VNNI: the IQ4_XS groups,
  // IQ4_XS's signed K form): row `row` of the group in the file's bytes; prefill of
  // gemm_min_tokens tokens or more then runs the u8 GEMM over them, as for the matrix in place.
  void (*to_file_row)(const void* group, int64_t n_in, int row, void* file_row) = nullptr;
  // Optional: the GEMM prefill runs instead of gemm, which then serves decode only (IQ4_NL: gemm
  // takes vec_dot's float steps, prefill_gemm a faster order). The matrix in place (not repacked,
  // or streamed) then prefills through it too, each group packed from the file's rows as it is
  // needed (kernels/matmul.hpp), so both forms give the same bits in prefill as in decode.
  void (*prefill_gemm)(int64_t n_in, const void* group, const void* act, int ntok, float* out,
                       size_t out_stride) = nullptr;
};

struct U8GemmRow;  // kernels/layouts/unpack_u8.hpp

// Prefill GEMM over rows in the common u8 form of kernels/layouts/unpack_u8.hpp (weights unpacked
// once per row tile, activations quantized as the weight type's vec_dot_type), one register tile
// of `rows` weight rows x `toks` tokens per call: out[c * out_stride + r] = dot(w[r], a[c]);
// n % 128 == 0. Null where the ISA has none; kernels/matmul.hpp drives it. max_u: the largest
// weight byte u the tile multiplies exactly (255 with VNNI; 127 for AVX2's vpmaddubsw, whose int16
// pair sums saturate beyond), so types whose form reaches higher (u8_form_max) take another path.
struct U8GemmKernel {
  int rows = 0, toks = 0;
  int max_u = 255;
  void (*tile)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  // Optional tiles of the grouped forms (kernels/layouts/unpack_u8.hpp), register tiles of
  // group_rows (a multiple of kGroupRows) rows x toks tokens that read group_rows / kGroupRows
  // interleaved groups of rows from w[0].u, w[kGroupRows].u, ... (the other w[r] are not read). tile_k: K-quant weights against Q8_K activations, the
  // integer group scales folded into the integer sums (n % 256 == 0); tile_s8: the signed form's
  // weights (q8_0, iq4_nl, iq4_xs, whose shifted bytes exceed max_u) against Q8_0 / Q8_K.
  void (*tile_k)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  void (*tile_s8)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  // tile_sk: the signed K form's (iq4_xs against Q8_K where its shifted bytes exceed max_u), the
  // integer block scales folded into the integer sums as tile_k's (n % 256 == 0).
  void (*tile_sk)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  // tile_k_narrow: tile_k for the K form's types whose bytes are at most narrow_max_u (u8_form_max),
  // where the tile may sum more products in int16 before scaling them.
  void (*tile_k_narrow)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  int narrow_max_u = 0;
  // tile_ks / tile_ks_narrow: the signed-offset K form's (the K form's types without mins,
  // u8_form_offset, whose values |u - off| (u8_form_max_abs) are at most ks_max_w /
  // ks_narrow_max_w): int8 weights against the activations' bytes + 128, so no per-16 offsets. Their
  // activation rows come biased (u8_gemm_bias_act: bytes a ^ 0x80), the other tiles' as packed.
  void (*tile_ks)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  void (*tile_ks_narrow)(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) = nullptr;
  int ks_max_w = 0, ks_narrow_max_w = 0;
  int group_rows = 0;
  // Optional: u8_gemm_interleave_ref (unpack_u8.hpp) by vector shuffles, for packing the groups.
  void (*interleave)(const uint8_t* src, size_t stride, int64_t n, uint8_t* out) = nullptr;
  const char* name = "";  // for -v
};

// Float helpers used by the transformer. Unless stated, out may alias the first input.
struct FloatKernels {
  // out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]
  void (*rmsnorm)(float* out, const float* x, const float* w, int n, float eps) = nullptr;
  // in place: x = exp(x - max) / sum; returns nothing, x of length n >= 1
  void (*softmax)(float* x, int n) = nullptr;
  // gate[i] = silu(gate[i]) * up[i]  (silu(v) = v / (1 + exp(-v)))
  void (*silu_mul)(float* gate, const float* up, int n) = nullptr;
  // Rotates pairs (x[2i], x[2i+1]) of each of n_heads heads (head_dim apart) by the angle whose
  // cos/sin are cs[2i] / cs[2i+1], for i < n_rot / 2 (ggml's "normal" rope, used by llama).
  void (*rope)(float* x, int n_heads, int head_dim, int n_rot, const float* cs) = nullptr;
  // The same rotations of the halves: pair i is (x[i], x[i + n_rot/2]) (ggml's NEOX rope: qwen2, qwen3).
  void (*rope_neox)(float* x, int n_heads, int head_dim, int n_rot, const float* cs) = nullptr;
  // Small f32 GEMM for attention: C[m * ldc + j] = sum_k A[m * lda + k] * B[k * ldb + j] for m < M,
  // j < N, k < K, added to C when accumulate is true (else C is overwritten). C must not alias A or B.
  void (*gemm_f32)(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                   bool accumulate) = nullptr;
  // dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols (attention's K block -> K^T). dst
  // must not overlap src.
  void (*transpose_f32)(const float* src, int rows, int cols, int lds, float* dst, int ldd) = nullptr;
  const char* variant = "";
};

// The kernel sets: the scalar reference, the x86 levels (kernels/x86/register.hpp: each adds to
// the one before it, but avx2-vnni and avx512-vnni are not ordered: an AVX-512 VNNI Xeon has no
// AVX-VNNI), arm64 NEON and NEON + dotprod.
enum class Isa { Ref, Avx2, Avx2Vnni, Avx512, Avx512Vnni, Neon, Dotprod };

inline const char* isa_name(Isa isa) {
  static constexpr const char* kNames[] = {"ref", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "neon", "dotprod"};
  const auto i = static_cast<size_t>(isa);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

struct KernelTable {
  TypeKernels types[kDTypeCount];
  PackedFormat packed[kDTypeCount];  // indexed by the stored weight type
  FloatKernels f;
  U8GemmKernel u8_gemm;  // prefill of unpacked quantized matrices (tile null: none)
  Isa isa = Isa::Ref;  // the best instruction set this table uses
  // Decode GEMV of unpacked weights: one row per vec_dot call in memory order with software
  // prefetch (kernels/matmul.hpp gemv_stream) instead of vec_dot_rows' interleaved rows.
  bool stream_decode = false;

  const TypeKernels& of(DType t) const { return types[static_cast<uint32_t>(t)]; }
  TypeKernels& of(DType t) { return types[static_cast<uint32_t>(t)]; }
  const PackedFormat& packed_of(DType t) const { return packed[static_cast<uint32_t>(t)]; }
  PackedFormat& packed_of(DType t) { return packed[static_cast<uint32_t>(t)]; }
};

}  // namespace edgellm
