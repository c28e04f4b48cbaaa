// x86 (AVX2) dot products of the K-quants against Q8_K activations, single-row and multi-row.
// Sub-block scales are folded into the int16 madd; minimums and constant offsets (q3_K: -4,
// q6_K: -32) go through the activation's bsums. Semantics: kernels/scalar/dot.hpp.

namespace xs {

// The fixed loops over a block's sub-blocks carry `#pragma GCC unroll`: g++ 12 unrolls them or not
// depending on the target and the translation unit (a plain build's target attributes: not; 1.3x
// slower multi-row q6_K), and unrolled is the faster form.

// sum_g bsums[g] * v16[g] over the 16 groups of a block, as 8 int32 lanes.
inline __m256i bsums_dot(const block_q8_K& y, __m256i v16) { return _mm256_madd_epi16(load256(y.bsums), v16); }

// 8 per-sub-block (32 weights) u8 values -> 16 int16 lanes, each value twice (one per group of 16).
inline __m256i per_group16_from_8(const uint8_t v[8]) {
  const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(v)));
  return _mm256_set_m128i(_mm_unpackhi_epi16(w, w), _mm_unpacklo_epi16(w, w));
}

// unpack_scales_mins_k4 (quant/scales.hpp) with 32-bit word operations instead of a loop of
// byte picks: the 6-bit fields of bytes 0..3 / 4..7 are masked in place, the 4 + 2-bit fields of
// sub-blocks 4..7 are assembled four at a time. Same result (checked by test_gemm_u8).
inline void scales_mins_k4_words(const uint8_t* q, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, q, 4);
  std::memcpy(&w1, q + 4, 4);
  std::memcpy(&w2, q + 8, 4);
  const uint32_t s_lo = w0 & 0x3F3F3F3Fu, m_lo = w1 & 0x3F3F3F3Fu;
  const uint32_t s_hi = (w2 & 0x0F0F0F0Fu) | ((w0 >> 2) & 0x30303030u);
  const uint32_t m_hi = ((w2 >> 4) & 0x0F0F0F0Fu) | ((w1 >> 2) & 0x30303030u);
  std::memcpy(sc, &s_lo, 4);
  std::memcpy(sc + 4, &s_hi, 4);
  std::memcpy(mn, &m_lo, 4);
  std::memcpy(mn + 4, &m_hi, 4);
}

struct FmtQ2_K {
  using Block = block_q2_K;
  using ActBlock = block_q8_K;
  static constexpr int kBlock = QK_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m128i packed = load128(x.scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0x0F)));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F)));
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 2; ++c) {
      const __m256i qv = load256(x.qs + 32 * c);
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
        const __m256i yv = load256(y.qs + 128 * c + 32 * j);
        isum = _mm256_add_epi32(isum, dot_u8s8_scaled(q, yv, scale_pair16(sc16, 4 * c + j)));
      }
    }
    const __m256i msum = bsums_dot(y, mn16);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-y.d * fp16_to_fp32(x.dmin)), acc);
  }
};

// q = lo2 | hi << 2 in [0, 7]; the -4 offset is -4 * sum_g scale[g] * bsums[g].
struct FmtQ3_K {
  using Block = block_q3_K;
  using ActBlock = block_q8_K;
  static constexpr int kBlock = QK_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    int8_t sc[16];
    unpack_scales_q3_K(x.scales, sc);
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(sc));
    const __m256i hm = load256(x.hmask);
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 2; ++c) {
      const __m256i qv = load256(x.qs + 32 * c);
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qv, 2 * j), m3);
        const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * c + j)), one);
        const __m256i q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
        const __m256i yv = load256(y.qs + 128 * c + 32 * j);
        isum = _mm256_add_epi32(isum, dot_u8s8_scaled(q, yv, scale_pair16(sc16, 4 * c + j)));
      }
    }
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(bsums_dot(y, sc16), 2));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
  }
};

struct FmtQ4_K {
  using Block = block_q4_K;
  using ActBlock = block_q8_K;
  static constexpr int kBlock = QK_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    uint8_t sc[8], mn[8];
    scales_mins_k4_words(x.scales, sc, mn);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i qv = load256(x.qs + 32 * j);
      const __m256i lo = _mm256_and_si256(qv, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
      isum = _mm256_add_epi32(isum, dot_u8s8_scaled(lo, load256(y.qs + 64 * j), _mm256_set1_epi16(sc[2 * j])));
      isum = _mm256_add_epi32(isum,
                              dot_u8s8_scaled(hi, load256(y.qs + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const __m256i msum = bsums_dot(y, per_group16_from_8(mn));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-y.d * fp16_to_fp32(x.dmin)), acc);
  }
};

struct FmtQ5_K {
  using Block = block_q5_K;
  using ActBlock = block_q8_K;
  static constexpr int kBlock = QK_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    uint8_t sc[8], mn[8];
    scales_mins_k4_words(x.scales, sc, mn);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i qh = load256(x.qh);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i qv = load256(x.qs + 32 * j);
      const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one);
      const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(qv, m4), _mm256_slli_epi16(h0, 4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qv, 4), m4), _mm256_slli_epi16(h1, 4));
      isum = _mm256_add_epi32(isum, dot_u8s8_scaled(lo, load256(y.qs + 64 * j), _mm256_set1_epi16(sc[2 * j])));
      isum = _mm256_add_epi32(isum,
                              dot_u8s8_scaled(hi, load256(y.qs + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const __m256i msum = bsums_dot(y, per_group16_from_8(mn));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-y.d * fp16_to_fp32(x.dmin)), acc);
  }
};

// q = lo4 | hi2 << 4 in [0, 63]; the -32 offset is -32 * sum_g scale[g] * bsums[g].
struct FmtQ6_K {
  using Block = block_q6_K;
  using ActBlock = block_q8_K;
  static constexpr int kBlock = QK_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(x.scales));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 2; ++c) {
      const __m256i ql0 = load256(x.ql + 64 * c), ql1 = load256(x.ql + 64 * c + 32);
      const __m256i qh = load256(x.qh + 32 * c);
      const __m256i lo[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
      #pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3);
        const __m256i q = _mm256_or_si256(lo[k], _mm256_slli_epi16(hi, 4));
        const __m256i yv = load256(y.qs + 128 * c + 32 * k);
        isum = _mm256_add_epi32(isum, dot_u8s8_scaled(q, yv, scale_pair16(sc16, 4 * c + k)));
      }
    }
    isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(bsums_dot(y, sc16), 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
  }
};

}  // namespace xs

inline float vec_dot_q2_K_q8_K_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ2_K>(n / QK_K, w, a);
}
inline float vec_dot_q3_K_q8_K_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ3_K>(n / QK_K, w, a);
}
inline float vec_dot_q4_K_q8_K_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ4_K>(n / QK_K, w, a);
}
inline float vec_dot_q5_K_q8_K_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ5_K>(n / QK_K, w, a);
}
inline float vec_dot_q6_K_q8_K_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ6_K>(n / QK_K, w, a);
}

// Multi-row forms (VecDotRowsFn): rows share each activation load.
inline constexpr int kRowsKQuantX86 = 4;
inline void vec_dot_rows_q2_K_q8_K_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ2_K, kRowsKQuantX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q3_K_q8_K_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ3_K, kRowsKQuantX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q4_K_q8_K_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ4_K, kRowsKQuantX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q5_K_q8_K_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ5_K, kRowsKQuantX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q6_K_q8_K_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ6_K, kRowsKQuantX86>(n, out, nrows, w, w_stride, a);
}
