// x86 (AVX2 / VNNI) dot products of the 32-weight legacy types against Q8_0 activations (q4_1 / q5_1:
// Q8_1, as ggml), single-row and multi-row. Block layouts: quant/blocks.hpp; semantics: kernels/scalar/dot.hpp.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

inline __m256 scale_of(ggml_half dx, ggml_half dy) { return _mm256_set1_ps(fp16_to_fp32(dx) * fp16_to_fp32(dy)); }

// Unsigned quants q with an offset: sum((q - off) * y) = dot(q, y) - dot(off, y).
inline __m256i dot_offset(__m256i q, __m256i y, int8_t off) {
  return _mm256_sub_epi32(dot_u8s8(q, y), dot_u8s8(_mm256_set1_epi8(off), y));
}

struct FmtQ4_0 : BlockFmt<block_q4_0, block_q8_0, QK4_0> {
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

struct FmtQ4_1 : BlockFmt<block_q4_1, block_q8_1, QK4_1> {
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return min_block(dot_u8s8(nibbles_to_bytes32(x.qs), load256(y.qs)), x.d, x.m, y, acc);
  }
};

struct FmtQ5_0 : BlockFmt<block_q5_0, block_q8_0, QK5_0> {
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i q = _mm256_or_si256(nibbles_to_bytes32(x.qs), bits_to_0x10(x.qh));
    const __m256i s = dot_offset(q, load256(y.qs), 16);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale_of(x.d, y.d), acc);
  }
};

struct FmtQ5_1 : BlockFmt<block_q5_1, block_q8_1, QK5_1> {
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i q = _mm256_or_si256(nibbles_to_bytes32(x.qs), bits_to_0x10(x.qh));
    return min_block(dot_u8s8(q, load256(y.qs)), x.d, x.m, y, acc);
  }
};

// s8 x s8 through the u8 x s8 instruction: |x| * (y with x's sign). |-128| = 128 is still right
// read as unsigned.
struct FmtQ8_0 : BlockFmt<block_q8_0, block_q8_0, QK8_0> {
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i xv = load256(x.qs);
    const __m256i s = dot_u8s8(_mm256_abs_epi8(xv), _mm256_sign_epi8(load256(y.qs), xv));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale_of(x.d, y.d), acc);
  }
};


// vec_dot_rows of the legacy types: 4 rows share each activation load (register_level-inl.hpp).
inline constexpr int kRowsLegacy = 4;
