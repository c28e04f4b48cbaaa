// GGUF quantization blocks, byte-identical to ggml's (ggml-common.h), with ggml's names so they can
// be searched against the spec. Plain structs only: no code beyond static_asserts.
#pragma once
#include <cstdint>

#include "edgellm/quant/fp16.hpp"

namespace edgellm {

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_K 256
#define K_SCALE_SIZE 12

// 4-bit quantization, 32 weights per block: x = d * (q - 8), q in [0, 15].
// qs[j] holds weight j in its low nibble and weight j + 16 in its high nibble.
// Effectively 4.5 bits per weight.
struct block_q4_0 {
  ggml_half d;            // delta
  uint8_t qs[QK4_0 / 2];  // nibbles / quants
};
static_assert(sizeof(block_q4_0) == sizeof(ggml_half) + QK4_0 / 2, "wrong q4_0 block size/padding");

// 4-bit quantization with minimum: x = d * q + m, q in [0, 15]; same nibble order as q4_0.
// Effectively 5 bits per weight.
struct block_q4_1 {
  ggml_half d;            // delta
  ggml_half m;            // min
  uint8_t qs[QK4_1 / 2];  // nibbles / quants
};
static_assert(sizeof(block_q4_1) == 2 * sizeof(ggml_half) + QK4_1 / 2, "wrong q4_1 block size/padding");

// 5-bit quantization: x = d * (q - 16); low 4 bits as in q4_0, bit 4 of weight j in bit j of qh
// (little-endian uint32). Effectively 5.5 bits per weight.
struct block_q5_0 {
  ggml_half d;            // delta
  uint8_t qh[4];          // 5-th bit of quants
  uint8_t qs[QK5_0 / 2];  // nibbles / quants
};
static_assert(sizeof(block_q5_0) == sizeof(ggml_half) + sizeof(uint32_t) + QK5_0 / 2,
              "wrong q5_0 block size/padding");

// 5-bit quantization with minimum: x = d * q + m, layout as q5_0. Effectively 6 bits per weight.
struct block_q5_1 {
  ggml_half d;            // delta
  ggml_half m;            // min
  uint8_t qh[4];          // 5-th bit of quants
  uint8_t qs[QK5_1 / 2];  // nibbles / quants
};
static_assert(sizeof(block_q5_1) == 2 * sizeof(ggml_half) + sizeof(uint32_t) + QK5_1 / 2,
              "wrong q5_1 block size/padding");

// 8-bit quantization: x = d * q, q in [-127, 127]. Weights and activations of legacy types.
// Effectively 8.5 bits per weight.
struct block_q8_0 {
  ggml_half d;       // delta
  int8_t qs[QK8_0];  // quants
};
static_assert(sizeof(block_q8_0) == sizeof(ggml_half) + QK8_0, "wrong q8_0 block size/padding");

// 8-bit quantization with the block sum: x = d * q, s = d * sum(q). Activation type of q4_1/q5_1
// in ggml; kept for layout compatibility.
struct block_q8_1 {
  ggml_half d;       // delta
  ggml_half s;       // d * sum(qs[i])
  int8_t qs[QK8_1];  // quants
};
static_assert(sizeof(block_q8_1) == 2 * sizeof(ggml_half) + QK8_1, "wrong q8_1 block size/padding");

// 2-bit quantization
// 16 blocks of 16 elements each
// weight is represented as x = a * q + b: a = d * (scales[i] & 0xF), b = dmin * (scales[i] >> 4)
// Effectively 2.625 bits per weight
struct block_q2_K {
  uint8_t scales[QK_K / 16];  // scales and mins, quantized with 4 bits
  uint8_t qs[QK_K / 4];       // quants
  ggml_half d;                // super-block scale for quantized scales
  ggml_half dmin;             // super-block scale for quantized mins
};
static_assert(sizeof(block_q2_K) == 2 * sizeof(ggml_half) + QK_K / 16 + QK_K / 4,
              "wrong q2_K block size/padding");

// 3-bit quantization
// 16 blocks of 16 elements each
// weight is represented as x = a * q: a = d * (scale - 32), 6-bit scales packed in 12 bytes
// Effectively 3.4375 bits per weight
struct block_q3_K {
  uint8_t hmask[QK_K / 8];  // quants - high bit
  uint8_t qs[QK_K / 4];     // quants - low 2 bits
  uint8_t scales[12];       // scales, quantized with 6 bits
  ggml_half d;              // super-block scale
};
static_assert(sizeof(block_q3_K) == sizeof(ggml_half) + QK_K / 4 + QK_K / 8 + 12,
              "wrong q3_K block size/padding");

// 4-bit quantization
// 8 blocks of 32 elements each
// weight is represented as x = a * q + b (a = d * sc, b = -dmin * m; 6-bit sc/m packed in scales)
// Effectively 4.5 bits per weight
struct block_q4_K {
  ggml_half d;                   // super-block scale for quantized scales
  ggml_half dmin;                // super-block scale for quantized mins
  uint8_t scales[K_SCALE_SIZE];  // scales and mins, quantized with 6 bits
  uint8_t qs[QK_K / 2];          // 4-bit quants
};
static_assert(sizeof(block_q4_K) == 2 * sizeof(ggml_half) + K_SCALE_SIZE + QK_K / 2,
              "wrong q4_K block size/padding");

// 5-bit quantization
// 8 blocks of 32 elements each
// weight is represented as x = a * q + b (as q4_K, plus a high bit per weight in qh)
// Effectively 5.5 bits per weight
struct block_q5_K {
  ggml_half d;                   // super-block scale for quantized scales
  ggml_half dmin;                // super-block scale for quantized mins
  uint8_t scales[K_SCALE_SIZE];  // scales and mins, quantized with 6 bits
  uint8_t qh[QK_K / 8];          // quants, high bit
  uint8_t qs[QK_K / 2];          // quants, low 4 bits
};
static_assert(sizeof(block_q5_K) == 2 * sizeof(ggml_half) + K_SCALE_SIZE + QK_K / 2 + QK_K / 8,
              "wrong q5_K block size/padding");

// 6-bit quantization
// 16 blocks of 16 elements each
// weight is represented as x = a * q: a = d * scales[i], q = (ql | qh << 4) - 32
// Effectively 6.5625 bits per weight
struct block_q6_K {
  uint8_t ql[QK_K / 2];      // quants, lower 4 bits
  uint8_t qh[QK_K / 4];      // quants, upper 2 bits
  int8_t scales[QK_K / 16];  // scales, quantized with 8 bits
  ggml_half d;               // super-block scale
};
static_assert(sizeof(block_q6_K) == sizeof(ggml_half) + QK_K / 16 + 3 * QK_K / 4,
              "wrong q6_K block size/padding");

// Activation type of the K-quant dot products: x = d * q, with the sum of each group of 16
// quants precomputed (K-quant minimums are applied through these).
struct block_q8_K {
  float d;                   // delta
  int8_t qs[QK_K];           // quants
  int16_t bsums[QK_K / 16];  // sum of quants in groups of 16
};
static_assert(sizeof(block_q8_K) == sizeof(float) + QK_K + QK_K / 16 * sizeof(int16_t),
              "wrong q8_K block size/padding");

// ---- i-quants and ternary types: 256-weight super-blocks (IQ4_NL: 32) whose weights are points of
// fixed codebooks (quant/iq_tables.hpp). Byte-identical to ggml's blocks.

// IQ2_XXS, 2.0625 bits per weight: per 32 weights two uint16 words (q2[0], q2[1] as 4 bytes of 8-bit
// grid indexes, then q2[2..3] as a 32-bit word: 4 x 7 sign bits, 4-bit scale in the top nibble).
struct block_iq2_xxs {
  ggml_half d;
  uint16_t qs[QK_K / 8];
};
static_assert(sizeof(block_iq2_xxs) == sizeof(ggml_half) + QK_K / 8 * sizeof(uint16_t),
              "wrong iq2_xxs block size/padding");

// IQ2_XS, 2.3125 bits per weight: per 8 weights one uint16 (9-bit grid index, 7 sign bits); per 32
// weights two 4-bit scales (one per 16).
struct block_iq2_xs {
  ggml_half d;
  uint16_t qs[QK_K / 8];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_xs) == sizeof(ggml_half) + QK_K / 8 * sizeof(uint16_t) + QK_K / 32,
              "wrong iq2_xs block size/padding");

// IQ2_S, 2.5625 bits per weight: 10-bit grid indexes (8 low bits in qs, 2 high in qh), explicit
// sign bytes (the second half of qs), two 4-bit scales per 32 weights.
struct block_iq2_s {
  ggml_half d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(block_iq2_s) == sizeof(ggml_half) + QK_K / 4 + QK_K / 16, "wrong iq2_s block size/padding");

// IQ3_XXS, 3.0625 bits per weight: 8-bit indexes of 4-weight grid points, then per 32 weights a
// 32-bit word of 4 x 7 sign bits and a 4-bit scale.
struct block_iq3_xxs {
  ggml_half d;
  uint8_t qs[3 * QK_K / 8];
};
static_assert(sizeof(block_iq3_xxs) == sizeof(ggml_half) + 3 * (QK_K / 8), "wrong iq3_xxs block size/padding");

// IQ3_S, 3.4375 bits per weight: 9-bit indexes of 4-weight grid points (high bits in qh), explicit
// signs, a 4-bit scale per 32 weights.
#define IQ3S_N_SCALE (QK_K / 64)
struct block_iq3_s {
  ggml_half d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t signs[QK_K / 8];
  uint8_t scales[IQ3S_N_SCALE];
};
static_assert(sizeof(block_iq3_s) == sizeof(ggml_half) + 13 * (QK_K / 32) + IQ3S_N_SCALE,
              "wrong iq3_s block size/padding");

// IQ1_S, 1.5625 bits per weight: 11-bit indexes of 8-weight ternary grid points; per 32 weights a
// uint16 with the 4 x 3 high index bits, a 3-bit scale and the sign of the shift (IQ1S_DELTA).
struct block_iq1_s {
  ggml_half d;
  uint8_t qs[QK_K / 8];
  uint16_t qh[QK_K / 32];
};
static_assert(sizeof(block_iq1_s) == sizeof(ggml_half) + QK_K / 8 + QK_K / 16, "wrong iq1_s block size/padding");

// IQ1_M, 1.75 bits per weight: as IQ1_S with a shift sign per 8 weights and a 3-bit scale per 16;
// the block's fp16 scale is spread over the top nibbles of the four scale words.
struct block_iq1_m {
  uint8_t qs[QK_K / 8];
  uint8_t qh[QK_K / 16];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(block_iq1_m) == QK_K / 8 + QK_K / 16 + QK_K / 32, "wrong iq1_m block size/padding");

// IQ4_NL, 4.5 bits per weight: 32 weights, 4-bit indexes into the non-linear kvalues_iq4nl, in
// q4_0's nibble order.
#define QK4_NL 32
struct block_iq4_nl {
  ggml_half d;
  uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(block_iq4_nl) == sizeof(ggml_half) + QK4_NL / 2, "wrong iq4_nl block size/padding");

// IQ4_XS, 4.25 bits per weight: IQ4_NL's values in 256-weight super-blocks, a 6-bit scale per 32
// (low 4 bits in scales_l, high 2 in scales_h).
struct block_iq4_xs {
  ggml_half d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs) == sizeof(ggml_half) + sizeof(uint16_t) + QK_K / 64 + QK_K / 2,
              "wrong iq4_xs block size/padding");

// TQ1_0, 1.6875 bits per weight: ternary weights, 5 per byte in base 3 (qs) and 4 per byte (qh).
struct block_tq1_0 {
  uint8_t qs[(QK_K - 4 * QK_K / 64) / 5];
  uint8_t qh[QK_K / 64];
  ggml_half d;
};
static_assert(sizeof(block_tq1_0) == sizeof(ggml_half) + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5,
              "wrong tq1_0 block size/padding");

// TQ2_0, 2.0625 bits per weight: ternary weights as 2-bit values q - 1.
struct block_tq2_0 {
  uint8_t qs[QK_K / 4];
  ggml_half d;
};
static_assert(sizeof(block_tq2_0) == sizeof(ggml_half) + QK_K / 4, "wrong tq2_0 block size/padding");

}  // namespace edgellm
