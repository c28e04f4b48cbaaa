// x86 (AVX2 / VNNI) dot products of the 32-weight legacy types against Q8_0 activations (q4_1 / q5_1:
// Q8_1, as ggml), single-row and multi-row. Block layouts: quant/blocks.hpp; semantics: kernels/scalar/dot.hpp.

namespace xs {

inline __m256 scale_of(ggml_half dx, ggml_half dy) { return _mm256_set1_ps(fp16_to_fp32(dx) * fp16_to_fp32(dy)); }

// Unsigned quants q with an offset: sum((q - off) * y) = dot(q, y) - dot(off, y).
inline __m256i dot_offset(__m256i q, __m256i y, int8_t off) {
  return _mm256_sub_epi32(dot_u8s8(q, y), dot_u8s8(_mm256_set1_epi8(off), y));
}

struct FmtQ4_0 {
  using Block = block_q4_0;
  using ActBlock = block_q8_0;
  static constexpr int kBlock = QK4_0;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i s = dot_offset(nibbles_to_bytes32(x.qs), load256(y.qs), 8);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale_of(x.d, y.d), acc);
  }
};

// Min formats against Q8_1: d_w * d_a * isum into the vector, m_w * s_a (the activation block's
// scaled sum) into lane 0, so the final horizontal sum adds it once.
inline __m256 min_block(__m256i isum, ggml_half dx, ggml_half mx, const block_q8_1& y, __m256 acc) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale_of(dx, y.d), acc);
  return _mm256_add_ps(acc, _mm256_setr_ps(fp16_to_fp32(mx) * fp16_to_fp32(y.s), 0, 0, 0, 0, 0, 0, 0));
}

struct FmtQ4_1 {
  using Block = block_q4_1;
  using ActBlock = block_q8_1;
  static constexpr int kBlock = QK4_1;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return min_block(dot_u8s8(nibbles_to_bytes32(x.qs), load256(y.qs)), x.d, x.m, y, acc);
  }
};

struct FmtQ5_0 {
  using Block = block_q5_0;
  using ActBlock = block_q8_0;
  static constexpr int kBlock = QK5_0;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i q = _mm256_or_si256(nibbles_to_bytes32(x.qs), bits_to_0x10(x.qh));
    const __m256i s = dot_offset(q, load256(y.qs), 16);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale_of(x.d, y.d), acc);
  }
};

struct FmtQ5_1 {
  using Block = block_q5_1;
  using ActBlock = block_q8_1;
  static constexpr int kBlock = QK5_1;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i q = _mm256_or_si256(nibbles_to_bytes32(x.qs), bits_to_0x10(x.qh));
    return min_block(dot_u8s8(q, load256(y.qs)), x.d, x.m, y, acc);
  }
};

// s8 x s8 through the u8 x s8 instruction: |x| * (y with x's sign). |-128| = 128 is still right
// read as unsigned.
struct FmtQ8_0 {
  using Block = block_q8_0;
  using ActBlock = block_q8_0;
  static constexpr int kBlock = QK8_0;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i xv = load256(x.qs);
    const __m256i s = dot_u8s8(_mm256_abs_epi8(xv), _mm256_sign_epi8(load256(y.qs), xv));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale_of(x.d, y.d), acc);
  }
};

}  // namespace xs

inline float vec_dot_q4_0_q8_0_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ4_0>(n / QK4_0, w, a);
}
inline float vec_dot_q4_1_q8_1_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ4_1>(n / QK4_1, w, a);
}
inline float vec_dot_q5_0_q8_0_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ5_0>(n / QK5_0, w, a);
}
inline float vec_dot_q5_1_q8_1_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ5_1>(n / QK5_1, w, a);
}
inline float vec_dot_q8_0_q8_0_x86(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return xs::dot_row_x86<xs::FmtQ8_0>(n / QK8_0, w, a);
}

// Multi-row forms (VecDotRowsFn): 4 rows share each activation load.
inline constexpr int kRowsLegacyX86 = 4;
inline void vec_dot_rows_q4_0_q8_0_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ4_0, kRowsLegacyX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q4_1_q8_1_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ4_1, kRowsLegacyX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q5_0_q8_0_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ5_0, kRowsLegacyX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q5_1_q8_1_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ5_1, kRowsLegacyX86>(n, out, nrows, w, w_stride, a);
}
inline void vec_dot_rows_q8_0_q8_0_x86(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w,
                                         size_t w_stride, const void* EDGELLM_RESTRICT a) {
  xs::dot_rows_grouped_x86<xs::FmtQ8_0, kRowsLegacyX86>(n, out, nrows, w, w_stride, a);
}
