// The one place that unpacks the 6-bit scales and mins of q4_K / q5_K (12 bytes for 8 sub-blocks)
// and the 6-bit scales of q3_K (12 bytes for 16 sub-blocks). Kernels call these; no copied masks.
#pragma once
#include <cstdint>
#include <cstring>

namespace edgellm {

// q4_K / q5_K: sub-block j (0..7) scale and min, 6 bits each. Bytes 0..3 hold the low 6 bits of
// scales 0..3, bytes 4..7 the low 6 bits of mins 0..3; for j >= 4 the low 4 bits come from
// bytes 8..11 (scale: low nibble, min: high nibble) and the top 2 bits from the spare top bits
// of bytes 0..7.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

// All 8 scales and 8 mins of a q4_K / q5_K block at once.
inline void unpack_scales_mins_k4(const uint8_t* q, uint8_t scales[8], uint8_t mins[8]) {
  for (int j = 0; j < 8; ++j) get_scale_min_k4(j, q, &scales[j], &mins[j]);
}

// q3_K: the 16 signed 6-bit scales (value - 32), each in [-32, 31]. Bytes 0..7 hold the low
// 4 bits (scales 0..7 in low nibbles, 8..15 in high nibbles), bytes 8..11 the high 2 bits.
inline void unpack_scales_q3_K(const uint8_t* q, int8_t scales[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (q[j] & 0xF) : (q[j - 8] >> 4);
    const int hi = (q[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    scales[j] = int8_t((lo | (hi << 4)) - 32);
  }
}

}  // namespace edgellm
