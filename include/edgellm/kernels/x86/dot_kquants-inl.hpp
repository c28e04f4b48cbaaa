// x86 (AVX2) dot products of the K-quants against Q8_K activations, single-row and multi-row.
// Sub-block scales are folded into the int16 madd; minimums and constant offsets (q3_K: -4,
// q6_K: -32) go through the activation's bsums. Semantics: kernels/scalar/dot.hpp.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// The fixed loops over a block's sub-blocks carry `#pragma GCC unroll`: g++ 12 unrolls them or not
// depending on the target and the translation unit (a plain build's target attributes: not; 1.3x
// slower multi-row q6_K), and unrolled is the faster form. q2_K, q3_K and q6_K spell their vectors
// out as templates over the vector index instead, so that every shift count and scale pick is a
// constant in every build (a variable-count shift per vector and a store-then-load of unpacked
// q3_K scales made q3_K 3.5x slower than q2_K per block).

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

// The 16 int16 sub-block scales of a block as two vectors whose 128-bit halves both hold 8 of them
// (scales 0..7, scales 8..15): one in-lane byte shuffle per 32-weight vector then picks its pair.
struct GroupScales16 {
  __m256i half[2];
  explicit GroupScales16(__m128i sc8_signed) {
    const __m256i s16 = _mm256_cvtepi8_epi16(sc8_signed);
    half[0] = _mm256_permute2x128_si256(s16, s16, 0x00);
    half[1] = _mm256_permute2x128_si256(s16, s16, 0x11);
  }
  // Vector k (0..7) of the block: scale 2k in the low 128 bits, 2k + 1 in the high ones.
  template <int k>
  __m256i pair() const {
    constexpr int l = 4 * (k & 3), h = l + 2;  // byte offsets of int16 scales 2k, 2k + 1 in a half
    // one 256-bit constant (g++ 12 builds a _mm256_set_m128i of two set1s in 4 instructions)
    constexpr short lo = short(l | (l + 1) << 8), hi = short(h | (h + 1) << 8);
    const __m256i pick = _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
    return _mm256_shuffle_epi8(half[k >> 2], pick);
  }
};

// Bits 2j..2j+1 of every byte of qv (the 2-bit quants of q2_K / q3_K vector j of a half block).
template <int j>
inline __m256i crumbs(__m256i qv) { return _mm256_and_si256(shift16<-2 * j>(qv), _mm256_set1_epi8(3)); }

struct FmtQ2_K : BlockFmt<block_q2_K, block_q8_K, QK_K> {
  template <int c>
  static void half(const Block& x, const ActBlock& y, const GroupScales16& sc, __m256i& isum0, __m256i& isum1) {
    const __m256i qv = load256(x.qs + 32 * c);
    const int8_t* yq = y.qs + 128 * c;
    isum0 = _mm256_add_epi32(isum0, dot_u8s8_scaled(crumbs<0>(qv), load256(yq), sc.pair<4 * c>()));
    isum1 = _mm256_add_epi32(isum1, dot_u8s8_scaled(crumbs<1>(qv), load256(yq + 32), sc.pair<4 * c + 1>()));
    isum0 = _mm256_add_epi32(isum0, dot_u8s8_scaled(crumbs<2>(qv), load256(yq + 64), sc.pair<4 * c + 2>()));
    isum1 = _mm256_add_epi32(isum1, dot_u8s8_scaled(crumbs<3>(qv), load256(yq + 96), sc.pair<4 * c + 3>()));
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m128i packed = load128(x.scales);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const GroupScales16 sc(_mm_and_si128(packed, m4));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), m4));
    __m256i isum0 = _mm256_setzero_si256(), isum1 = _mm256_setzero_si256();
    half<0>(x, y, sc, isum0, isum1);
    half<1>(x, y, sc, isum0, isum1);
    const __m256i msum = bsums_dot(y, mn16);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum0, isum1)),
                          _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-y.d * fp16_to_fp32(x.dmin)), acc);
  }
};

// unpack_scales_q3_K (quant/scales.hpp) as vector operations: the 16 signed 6-bit scales in bytes.
// Low 4 bits: scales 0..7 in the low nibbles of bytes 0..7, 8..15 in their high nibbles; high 2
// bits: scale 4i + k in bits 2i..2i+1 of byte 8 + k.
inline __m128i scales_q3_K(const uint8_t* q) {
  uint32_t hi;
  std::memcpy(&hi, q + 8, 4);
  const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
  const __m128i h = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(int(hi)), _mm_set_epi32(6, 4, 2, 0)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(h, 4)), _mm_set1_epi8(32));
}

// Q3_K and Q6_K: unsigned quants q with an offset (q - 2^kShift), a signed 6/8-bit scale per 16.
// Fmt::half<c>(x) loads half c (weights 128c .. 128c + 127), Fmt::quants<c, k>(h) is its vector k's
// 32 quants; the vectors go into two int32 chains, the offset is -2^kShift * sum_g scale[g] * bsums[g].
template <class Fmt, int c, int... K>
__attribute__((always_inline)) inline void offset_kquant_half(const typename Fmt::Block& x, const block_q8_K& y, const GroupScales16& sc,
                               __m256i (&isum)[2], std::integer_sequence<int, K...>) {
  const typename Fmt::Half h = Fmt::template half<c>(x);
  ((isum[K & 1] = _mm256_add_epi32(isum[K & 1], dot_u8s8_scaled(Fmt::template quants<c, K>(h),
                                                                load256(y.qs + 128 * c + 32 * K),
                                                                sc.template pair<4 * c + K>()))),
   ...);
}
template <class Fmt, int kShift>
__attribute__((always_inline)) inline __m256 offset_kquant_block(const typename Fmt::Block& x, const block_q8_K& y,
                                                                 __m128i sc8, __m256 acc) {
  const GroupScales16 sc(sc8);
  __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  offset_kquant_half<Fmt, 0>(x, y, sc, isum, std::make_integer_sequence<int, 4>{});
  offset_kquant_half<Fmt, 1>(x, y, sc, isum, std::make_integer_sequence<int, 4>{});
  const __m256i off = _mm256_slli_epi32(bsums_dot(y, _mm256_cvtepi8_epi16(sc8)), kShift);
  const __m256i total = _mm256_sub_epi32(_mm256_add_epi32(isum[0], isum[1]), off);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
}

// q = lo2 | hi << 2 in [0, 7]; the -4 offset.
struct FmtQ3_K : BlockFmt<block_q3_K, block_q8_K, QK_K> {
  struct Half {
    __m256i qv, hm;
  };
  template <int c>
  static Half half(const Block& x) {
    return {load256(x.qs + 32 * c), load256(x.hmask)};
  }
  // Vector j of half c: its crumbs, and hmask bit 4c + j moved to bit 2.
  template <int c, int j>
  static __m256i quants(const Half& h) {
    return _mm256_or_si256(crumbs<j>(h.qv), _mm256_and_si256(shift16<2 - 4 * c - j>(h.hm), _mm256_set1_epi8(4)));
  }
  // always_inline (and the skeleton's): in the dispatch build g++'s unit growth budget otherwise
  // leaves the block out of vec_dot's loop.
  __attribute__((always_inline)) static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return offset_kquant_block<FmtQ3_K, 2>(x, y, scales_q3_K(x.scales), acc);
  }
};

// Q4_K (kHigh = false) and Q5_K (kHigh = true: bit 4 of each quant in qh, bits 2j and 2j + 1 for
// the low and high nibbles of vector j).
template <bool kHigh>
struct FmtQ45_K : BlockFmt<std::conditional_t<kHigh, block_q5_K, block_q4_K>, block_q8_K, QK_K> {
  using Block = std::conditional_t<kHigh, block_q5_K, block_q4_K>;
  using ActBlock = block_q8_K;
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    uint8_t sc[8], mn[8];
    scales_mins_k4_words(x.scales, sc, mn);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    [[maybe_unused]] __m256i qh = _mm256_setzero_si256();
    if constexpr (kHigh) qh = load256(x.qh);
    __m256i isum = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i qv = load256(x.qs + 32 * j);
      __m256i lo = _mm256_and_si256(qv, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
      if constexpr (kHigh) {
        const __m256i one = _mm256_set1_epi8(1);
        const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j)), one);
        const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * j + 1)), one);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(h0, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(h1, 4));
      }
      isum = _mm256_add_epi32(isum, dot_u8s8_scaled(lo, load256(y.qs + 64 * j), _mm256_set1_epi16(sc[2 * j])));
      isum = _mm256_add_epi32(isum,
                              dot_u8s8_scaled(hi, load256(y.qs + 64 * j + 32), _mm256_set1_epi16(sc[2 * j + 1])));
    }
    const __m256i msum = bsums_dot(y, per_group16_from_8(mn));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(y.d * fp16_to_fp32(x.d)), acc);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(-y.d * fp16_to_fp32(x.dmin)), acc);
  }
};
using FmtQ4_K = FmtQ45_K<false>;
using FmtQ5_K = FmtQ45_K<true>;

// q = lo4 | hi2 << 4 in [0, 63]; the -32 offset.
struct FmtQ6_K : BlockFmt<block_q6_K, block_q8_K, QK_K> {
  struct Half {
    __m256i lo[4], qh;
  };
  template <int c>
  static Half half(const Block& x) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ql0 = load256(x.ql + 64 * c), ql1 = load256(x.ql + 64 * c + 32);
    return {{_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)},
            load256(x.qh + 32 * c)};
  }
  // Vector k of half c: lo4 from ql, bits 2k..2k+1 of qh moved to bits 4..5.
  template <int c, int k>
  static __m256i quants(const Half& h) {
    return _mm256_or_si256(h.lo[k], _mm256_and_si256(shift16<4 - 2 * k>(h.qh), _mm256_set1_epi8(0x30)));
  }
  __attribute__((always_inline)) static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return offset_kquant_block<FmtQ6_K, 5>(x, y, load128(x.scales), acc);
  }
};

// vec_dot_rows of the K-quants: rows share each activation load (register_level-inl.hpp).
inline constexpr int kRowsKQuant = 4;
