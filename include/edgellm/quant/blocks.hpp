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

}  // namespace edgellm
