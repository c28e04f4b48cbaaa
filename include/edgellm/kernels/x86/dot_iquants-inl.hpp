// x86 dot products of the i-quants and ternary types against Q8_K activations (IQ4_NL: Q8_0),
// single-row and multi-row: AVX2, the VNNI and AVX-512 levels compiling the same code except where
// a struct says otherwise (IQ2_XS, IQ2_S and IQ1_M take 64 weights a step at the AVX-512 levels,
// the IQ2s with their signs as a mask; TQ1_0 differs with VNNI, IQ4_XS at avx512-vnni). The integer
// sums are the scalar reference's (kernels/scalar/dot_iquants.hpp, ggml's operation order): exact,
// only the order of the float additions of block results differs.
//
// A block is 8 vectors of 32 weights. Grid types look up each vector's points (8-weight uint64 or
// 4-weight uint32 magnitudes), apply the signs to the activation (vpsignb: q8_K never holds -128)
// and take the u8 x s8 dot with the sub-block scales folded into the int16 madd (dot_u8s8_scaled).
// IQ1_S / IQ1_M fold the +-1/8 shift into the weight: 8 * (grid + delta / 8) is an integer in
// [-9, 9], so the block's sum is (8 * sumi + sumi_delta) / 8, exactly the reference's
// sumi + IQ1*_DELTA * sumi_delta in float (IQ1_M: that weight + 9, unsigned, see FmtIQ1_M).
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// Vectors K... of a block summed: Fmt::vec<k>(x, y, ctx) is vector k's int32 partial sums. Two
// chains, so consecutive vectors do not wait on each other's add.
template <class Fmt, size_t... K>
inline __m256i iq_block_sum(const typename Fmt::Block& x, const block_q8_K& y, const typename Fmt::Ctx& c,
                            std::index_sequence<K...>) {
  __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  ((s[K & 1] = _mm256_add_epi32(s[K & 1], Fmt::template vec<int(K)>(x, y, c))), ...);
  return _mm256_add_epi32(s[0], s[1]);
}
template <class Fmt>
inline __m256i iq_block_sum(const typename Fmt::Block& x, const block_q8_K& y, const typename Fmt::Ctx& c) {
  return iq_block_sum<Fmt>(x, y, c, std::make_index_sequence<QK_K / 32>{});
}

// The IQ2 / IQ3_XXS sign patterns (ksigns_iq2xs) as 8 bytes of +1 / -1, by the 7 stored bits.
inline constexpr IqGrid<uint64_t, 128> kSignsPm1 = [] {
  IqGrid<uint64_t, 128> g{};
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 8; ++j) g.v[i] |= uint64_t((ksigns_iq2xs[size_t(i)] >> j) & 1 ? 0xFF : 0x01) << (8 * j);
  return g;
}();

inline __m256i set_u64x4(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3) {
  return _mm256_set_epi64x(int64_t(a3), int64_t(a2), int64_t(a1), int64_t(a0));
}
// Four sign bytes (bit j of byte k: weight 8k + j is negative) -> 32 bytes of +1 / -1.
inline __m256i signs_pm1(const uint8_t* s) {
  uint32_t bits;
  std::memcpy(&bits, s, 4);
  return _mm256_or_si256(bits_to_bytes_mask(bits), _mm256_set1_epi8(1));
}
// sum magnitudes * (y with the signs pm1), pairs scaled by scale16's int16 lanes.
inline __m256i signed_grid_dot(__m256i mag, const int8_t* y, __m256i pm1, __m256i scale16) {
  return dot_u8s8_scaled(mag, _mm256_sign_epi8(load256(y), pm1), scale16);
}
// s8 x s8 pairs scaled: |w| * (y with w's sign).
inline __m256i signed_dot_scaled(__m256i w, const int8_t* y, __m256i scale16) {
  return dot_u8s8_scaled(_mm256_abs_epi8(w), _mm256_sign_epi8(load256(y), w), scale16);
}
inline __m256 iq_finish(__m256i isum, float d, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
}

inline uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// 16 4-bit scales (byte k: low nibble 2k, high nibble 2k + 1) as 2 * s + 1 in GroupScales16, whose
// pair<k> puts scale 2k under weights 0..15 of vector k and 2k + 1 under 16..31.
// The bytes 2 * s + 1 of 16 4-bit scales s (byte k: low nibble 2k, high nibble 2k + 1).
inline __m128i odd_scale_bytes(uint64_t nibbles) {
  const __m128i b = _mm_cvtsi64_si128(int64_t(nibbles));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i s = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
  return _mm_add_epi8(_mm_add_epi8(s, s), _mm_set1_epi8(1));
}
inline GroupScales16 odd_scales16_of(uint64_t nibbles) { return GroupScales16(odd_scale_bytes(nibbles)); }
inline GroupScales16 odd_scales16(const uint8_t* sc) { return odd_scales16_of(load_u64(sc)); }
#if EDGELLM_X86_AVX512
// The AVX-512 block sums of 64 weights a step (IQ2_XS, IQ2_S, IQ1_M): a block's 16 scale bytes
// (odd_scale_bytes) as int16 in the low 256 bits.
inline __m512i scales16_512(__m128i sc8) { return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sc8)); }
// 64-weight step s of a block (weights 64s .. 64s + 63) with a scale per 16: the 16 scales
// (sc16: scales16_512) each over the 8 int16 pair lanes of its weights.
inline __m512i step_scales16(__m512i sc16, int s) {
  const __m512i quarter = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002,
                                           0x0002000200020002, 0x0001000100010001, 0x0001000100010001, 0, 0);
  return _mm512_permutexvar_epi16(_mm512_add_epi16(quarter, _mm512_set1_epi16(short(4 * s))), sc16);
}
inline __m256i sum512_to_256(__m512i t) {
  return _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
}
// A block's 4 steps Fmt::step<s>(x, y, sc16) summed into 8 int32 lanes.
template <class Fmt>
inline __m256i sum_steps(const typename Fmt::Block& x, const typename Fmt::ActBlock& y, __m512i sc16) {
  return sum512_to_256(
      _mm512_add_epi32(_mm512_add_epi32(Fmt::template step<0>(x, y, sc16), Fmt::template step<1>(x, y, sc16)),
                       _mm512_add_epi32(Fmt::template step<2>(x, y, sc16), Fmt::template step<3>(x, y, sc16))));
}
#endif


// The IQ2_XXS / IQ3_XXS vector of magnitudes mag whose sign word s holds 4 x 7 sign bits (kSignsPm1)
// and the vector's 4-bit scale s (top 4 bits), as 2s + 1.
inline __m256i sign_word_dot(__m256i mag, const int8_t* y, uint32_t s) {
  const __m256i pm1 = set_u64x4(kSignsPm1[s & 127], kSignsPm1[(s >> 7) & 127], kSignsPm1[(s >> 14) & 127],
                                kSignsPm1[(s >> 21) & 127]);
  return signed_grid_dot(mag, y, pm1, _mm256_set1_epi16(short(2 * (s >> 28) + 1)));
}

// IQ2_XXS: per vector a uint64: 4 grid indexes (bytes), 4 x 7 sign bits, a 4-bit scale. / 8.
struct FmtIQ2_XXS : BlockFmt<block_iq2_xxs, block_q8_K, QK_K> {
  struct Ctx {};
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx&) {
    const uint64_t a = load_u64(x.qs + 4 * k);
    const uint32_t g = uint32_t(a), s = uint32_t(a >> 32);
    const __m256i mag = set_u64x4(iq2xxs_grid[g & 255], iq2xxs_grid[(g >> 8) & 255], iq2xxs_grid[(g >> 16) & 255],
                                  iq2xxs_grid[g >> 24]);
    return sign_word_dot(mag, y.qs + 32 * k, s);
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(iq_block_sum<FmtIQ2_XXS>(x, y, Ctx{}), 0.125f * fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ2_XS: per 8 weights a uint16 (9-bit index, 7 sign bits); a 4-bit scale per 16. / 8.
// The 8 sign bits of a word (the 8th the parity of the 7 stored) are computed 16 words at once;
// the grid points are scalar loads (vpgatherdq was slower on Zen 5).
struct FmtIQ2_XS : BlockFmt<block_iq2_xs, block_q8_K, QK_K> {
  // Words w .. w + 15 -> their 8 sign bits in the low byte of each 16-bit lane: the parity of the
  // 7-bit pattern is that of its low nibble xor its top 3 bits, looked up by a byte shuffle.
  static __m256i sign_bytes(const uint16_t* w) {
    const __m256i odd = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                                         -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    const __m256i q = load256(w);
    const __m256i s7 = _mm256_srli_epi16(q, 9);
    return _mm256_or_si256(s7, _mm256_shuffle_epi8(odd, _mm256_xor_si256(s7, _mm256_srli_epi16(q, 13))));
  }
  struct Ctx {
    GroupScales16 sc;
    __m256i sgn[4];  // sign bytes (low byte of each 16-bit lane) of words 8i .. 8i + 7, in both halves
    explicit Ctx(const Block& x) : sc(odd_scales16(x.scales)) {
      for (int h = 0; h < 2; ++h) {
        const __m256i s8 = sign_bytes(x.qs + 16 * h);
        sgn[2 * h] = _mm256_permute4x64_epi64(s8, 0x44);
        sgn[2 * h + 1] = _mm256_permute4x64_epi64(s8, 0xEE);
      }
    }
  };
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx& c) {
    const uint16_t* w = x.qs + 4 * k;
    const __m256i mag =
        set_u64x4(iq2xs_grid[w[0] & 511], iq2xs_grid[w[1] & 511], iq2xs_grid[w[2] & 511], iq2xs_grid[w[3] & 511]);
    // each word's sign byte over its 8 bytes (the vector's words start at byte o of its sgn half)
    constexpr char o = 8 * (k & 1);
    const __m256i spread = _mm256_shuffle_epi8(
        c.sgn[k >> 1], _mm256_setr_epi8(o, o, o, o, o, o, o, o, o + 2, o + 2, o + 2, o + 2, o + 2, o + 2, o + 2, o + 2,
                                        o + 4, o + 4, o + 4, o + 4, o + 4, o + 4, o + 4, o + 4, o + 6, o + 6, o + 6,
                                        o + 6, o + 6, o + 6, o + 6, o + 6));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
    const __m256i pm1 = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(1));
    return signed_grid_dot(mag, y.qs + 32 * k, pm1, c.sc.template pair<k>());
  }
#if EDGELLM_X86_AVX512
  // AVX-512: 64 weights a step. The sign bytes narrowed to bytes: bit j of byte w is weight
  // 8w + j's sign, so 8 bytes are the mask of a step's 64 weights, which negates those activations
  // (q8_K never holds -128).
  static __m256i block_sum(const Block& x, const ActBlock& y) {
    const __m512i sc16 = scales16_512(odd_scale_bytes(load_u64(x.scales)));
    __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int h = 0; h < 2; ++h) {
      const __m128i signs = _mm256_cvtepi16_epi8(sign_bytes(x.qs + 16 * h));
      const __mmask64 neg[2] = {__mmask64(_mm_cvtsi128_si64(signs)), __mmask64(_mm_extract_epi64(signs, 1))};
      for (int p = 0; p < 2; ++p) {
        const uint16_t* w = x.qs + 16 * h + 8 * p;
        const __m512i mag = _mm512_set_epi64(
            int64_t(iq2xs_grid[w[7] & 511]), int64_t(iq2xs_grid[w[6] & 511]), int64_t(iq2xs_grid[w[5] & 511]),
            int64_t(iq2xs_grid[w[4] & 511]), int64_t(iq2xs_grid[w[3] & 511]), int64_t(iq2xs_grid[w[2] & 511]),
            int64_t(iq2xs_grid[w[1] & 511]), int64_t(iq2xs_grid[w[0] & 511]));
        const __m512i yv = _mm512_loadu_si512(y.qs + 128 * h + 64 * p);
        const __m512i ys = _mm512_mask_sub_epi8(yv, neg[p], _mm512_setzero_si512(), yv);
        sum[p] = _mm512_add_epi32(sum[p], _mm512_madd_epi16(_mm512_maddubs_epi16(mag, ys), step_scales16(sc16, 2 * h + p)));
      }
    }
    return sum512_to_256(_mm512_add_epi32(sum[0], sum[1]));
  }
#else
  static __m256i block_sum(const Block& x, const ActBlock& y) { return iq_block_sum<FmtIQ2_XS>(x, y, Ctx(x)); }
#endif
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(block_sum(x, y), 0.125f * fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ2_S: 10-bit indexes (low 8 in qs, 2 high bits each in qh), explicit signs, scales as IQ2_XS. / 8.
// At the AVX-512 levels 64 weights a step, the step's 8 sign bytes its negation mask.
struct FmtIQ2_S : BlockFmt<block_iq2_s, block_q8_K, QK_K> {
  struct Ctx {
    GroupScales16 sc;
    explicit Ctx(const uint8_t* scales) : sc(odd_scales16(scales)) {}
  };
  template <int j>  // point j of 4 sharing qh byte h
  static uint64_t point(const uint8_t* qs, uint32_t h) { return iq2s_grid[qs[j] | ((h << (8 - 2 * j)) & 0x300)]; }
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx& c) {
    const uint8_t* qs = x.qs + 4 * k;
    const uint32_t h = x.qh[k];
    const __m256i mag = set_u64x4(point<0>(qs, h), point<1>(qs, h), point<2>(qs, h), point<3>(qs, h));
    return signed_grid_dot(mag, y.qs + 32 * k, signs_pm1(x.qs + QK_K / 8 + 4 * k), c.sc.template pair<k>());
  }
#if EDGELLM_X86_AVX512
  template <int s>  // weights 64s .. 64s + 63
  static __m512i step(const Block& x, const ActBlock& y, __m512i sc16) {
    const uint8_t* qs = x.qs + 8 * s;
    const uint32_t h0 = x.qh[2 * s], h1 = x.qh[2 * s + 1];
    const __m512i mag = _mm512_set_epi64(
        int64_t(point<3>(qs + 4, h1)), int64_t(point<2>(qs + 4, h1)), int64_t(point<1>(qs + 4, h1)),
        int64_t(point<0>(qs + 4, h1)), int64_t(point<3>(qs, h0)), int64_t(point<2>(qs, h0)),
        int64_t(point<1>(qs, h0)), int64_t(point<0>(qs, h0)));
    const __mmask64 neg = load_u64(x.qs + QK_K / 8 + 8 * s);
    const __m512i yv = _mm512_loadu_si512(y.qs + 64 * s);
    const __m512i ys = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(mag, ys), step_scales16(sc16, s));
  }
  static __m256i block_sum(const Block& x, const ActBlock& y) {
    return sum_steps<FmtIQ2_S>(x, y, scales16_512(odd_scale_bytes(load_u64(x.scales))));
  }
#else
  static __m256i block_sum(const Block& x, const ActBlock& y) { return iq_block_sum<FmtIQ2_S>(x, y, Ctx(x.scales)); }
#endif
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(block_sum(x, y), 0.125f * fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ3_XXS: 8-bit indexes of 4-weight points; per vector a uint32 of 4 x 7 sign bits and a 4-bit
// scale. / 4.
struct FmtIQ3_XXS : BlockFmt<block_iq3_xxs, block_q8_K, QK_K> {
  struct Ctx {};
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx&) {
    const uint8_t* q = x.qs + 8 * k;
    uint32_t s;
    std::memcpy(&s, x.qs + QK_K / 4 + 4 * k, 4);
    const __m256i mag = _mm256_set_epi32(int(iq3xxs_grid[q[7]]), int(iq3xxs_grid[q[6]]), int(iq3xxs_grid[q[5]]),
                                         int(iq3xxs_grid[q[4]]), int(iq3xxs_grid[q[3]]), int(iq3xxs_grid[q[2]]),
                                         int(iq3xxs_grid[q[1]]), int(iq3xxs_grid[q[0]]));
    return sign_word_dot(mag, y.qs + 32 * k, s);
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(iq_block_sum<FmtIQ3_XXS>(x, y, Ctx{}), 0.25f * fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ3_S: 9-bit indexes of 4-weight points (bit j of qh[k]: index j of vector k), explicit signs,
// a 4-bit scale per vector.
struct FmtIQ3_S : BlockFmt<block_iq3_s, block_q8_K, QK_K> {
  struct Ctx {};
  template <int j>  // point j of a vector: index byte j, bit j of its qh byte (moved to bit 8 + j in h)
  static int point(const uint8_t* q, uint32_t h) { return int(iq3s_grid[q[j] | ((h >> j) & 256)]); }
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx&) {
    const uint8_t* q = x.qs + 8 * k;
    const uint32_t h = uint32_t(x.qh[k]) << 8;
    const __m256i mag = _mm256_set_epi32(point<7>(q, h), point<6>(q, h), point<5>(q, h), point<4>(q, h),
                                         point<3>(q, h), point<2>(q, h), point<1>(q, h), point<0>(q, h));
    const int ls = 2 * ((x.scales[k / 2] >> (4 * (k & 1))) & 15) + 1;
    return signed_grid_dot(mag, y.qs + 32 * k, signs_pm1(x.signs + 4 * k), _mm256_set1_epi16(short(ls)));
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(iq_block_sum<FmtIQ3_S>(x, y, Ctx{}), fp16_to_fp32(x.d) * y.d, acc);
  }
};

// 8 * grid point (int8 -1 / 0 / +1 bytes) + delta bytes: the shift by 3 in 16-bit lanes carries a
// low byte's top bits into its neighbour's bits 0..2, which the 0xF8 mask clears.
inline __m256i iq1_weights(__m256i grid, __m256i delta) {
  return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(grid, 3), _mm256_set1_epi8(int8_t(0xF8))), delta);
}

// IQ1_S: 11-bit indexes (8 low bits in qs, 3 high in qh[k] bits 3l..3l+2), qh[k] bits 12..14 the
// scale, bit 15 the delta's sign, one per vector.
struct FmtIQ1_S : BlockFmt<block_iq1_s, block_q8_K, QK_K> {
  struct Ctx {};
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx&) {
    const uint8_t* q = x.qs + 4 * k;
    const uint32_t h = load_u16(reinterpret_cast<const uint8_t*>(x.qh) + 2 * k);
    const __m256i grid = set_u64x4(iq1s_grid[q[0] | ((h << 8) & 0x700)], iq1s_grid[q[1] | ((h << 5) & 0x700)],
                                   iq1s_grid[q[2] | ((h << 2) & 0x700)], iq1s_grid[q[3] | ((h >> 1) & 0x700)]);
    const __m256i w = iq1_weights(grid, _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
    return signed_dot_scaled(w, y.qs + 32 * k, _mm256_set1_epi16(short(2 * ((h >> 12) & 7) + 1)));
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(iq_block_sum<FmtIQ1_S>(x, y, Ctx{}), 0.125f * fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ1_M's unsigned weights u = 8 * grid + delta + 9 (0..18) of 8 weights by a 12-bit index: the
// IQ1 grid index and, in bit 11, the delta's sign (set: -1): 8 * (grid + 1) + 2 or + 0.
inline constexpr IqGrid<uint64_t, 2 * NGRID_IQ1S> kIq1MGrid = [] {
  IqGrid<uint64_t, 2 * NGRID_IQ1S> g{};
  for (size_t i = 0; i < 2 * NGRID_IQ1S; ++i)
    for (int j = 0; j < 8; ++j) {
      const int grid = int8_t(iq1s_grid[i % NGRID_IQ1S] >> (8 * j));
      g.v[i] |= uint64_t(8 * (grid + 1) + (i < NGRID_IQ1S ? 2 : 0)) << (8 * j);
    }
  return g;
}();

// IQ1_M: indexes as IQ1_S with their 3 high bits and a delta sign per 8 weights in qh (a nibble
// each), 3-bit scales per 16 weights and the block's F16 scale in the scale words' top nibbles.
// The weights go unsigned (kIq1MGrid, indexed by the qs byte and the whole nibble), so the u8 x s8
// dot needs no sign steps, and the 9 comes off once a block as 9 * the scaled sums of y's groups of
// 16 (q8_K's bsums).
struct FmtIQ1_M : BlockFmt<block_iq1_m, block_q8_K, QK_K> {
  // The 16 3-bit scales (word w: scales 4w .. 4w + 3 in bits 0..11) repacked one a nibble, as
  // odd_scale_bytes reads them.
  static uint64_t scale_nibbles(uint64_t sc) {
    uint64_t r = 0;
    for (int w = 0; w < 4; ++w) {
      const uint64_t v = (sc >> (16 * w)) & 0xFFF;
      r |= ((v & 7) | ((v & 0x38) << 1) | ((v & 0x1C0) << 2) | ((v & 0xE00) << 3)) << (16 * w);
    }
    return r;
  }
  // 9 * the sums of y's groups of 16 times their scales (sc8: 2 * scale + 1 bytes), to subtract.
  static __m256i offset(const ActBlock& y, __m128i sc8) {
    const __m256i t = _mm256_madd_epi16(load256(y.bsums), _mm256_cvtepu8_epi16(sc8));
    return _mm256_add_epi32(_mm256_slli_epi32(t, 3), t);
  }
  // the weights of group 4v + j: qs byte 4v + j, nibble j of the qh word h (the 4 groups' nibbles)
  template <int j>
  static uint64_t point(const uint8_t* q, uint32_t h) {
    return kIq1MGrid[q[j] | (((h >> (4 * j)) & 15) << 8)];
  }
  struct Ctx {
    GroupScales16 ls;
    explicit Ctx(__m128i sc8) : ls(sc8) {}
  };
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx& c) {
    const uint8_t* q = x.qs + 4 * k;
    const uint32_t h = load_u16(x.qh + 2 * k);
    const __m256i u = set_u64x4(point<0>(q, h), point<1>(q, h), point<2>(q, h), point<3>(q, h));
    return dot_u8s8_scaled(u, load256(y.qs + 32 * k), c.ls.template pair<k>());
  }
  static float scale(uint64_t sc) {
    const uint64_t top = sc & 0xF000F000F000F000ull;  // the F16 scale's nibbles, low first
    const uint16_t h = uint16_t((top >> 12) | (top >> 24) | (top >> 36) | (top >> 48));
    return fp16_to_fp32(h);
  }
#if EDGELLM_X86_AVX512
  // AVX-512: 64 weights a step.
  template <int s>
  static __m512i step(const Block& x, const ActBlock& y, __m512i sc16) {
    const uint8_t* q = x.qs + 8 * s;
    const uint32_t h0 = load_u16(x.qh + 4 * s), h1 = load_u16(x.qh + 4 * s + 2);
    const __m512i u = _mm512_set_epi64(int64_t(point<3>(q + 4, h1)), int64_t(point<2>(q + 4, h1)),
                                       int64_t(point<1>(q + 4, h1)), int64_t(point<0>(q + 4, h1)),
                                       int64_t(point<3>(q, h0)), int64_t(point<2>(q, h0)),
                                       int64_t(point<1>(q, h0)), int64_t(point<0>(q, h0)));
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, _mm512_loadu_si512(y.qs + 64 * s)), step_scales16(sc16, s));
  }
  static __m256i block_sum(const Block& x, const ActBlock& y, __m128i sc8) {
    return sum_steps<FmtIQ1_M>(x, y, scales16_512(sc8));
  }
#else
  static __m256i block_sum(const Block& x, const ActBlock& y, __m128i sc8) {
    return iq_block_sum<FmtIQ1_M>(x, y, Ctx(sc8));
  }
#endif
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const uint64_t words = load_u64(x.scales);
    const __m128i sc8 = odd_scale_bytes(scale_nibbles(words));
    const __m256i isum = _mm256_sub_epi32(block_sum(x, y, sc8), offset(y, sc8));
    return iq_finish(isum, 0.125f * scale(words) * y.d, acc);
  }
};

// IQ4_NL / IQ4_XS: 4-bit indexes into kvalues_iq4nl, looked up by an in-lane byte shuffle.
inline __m256i iq4nl_values(const uint8_t* qs16) {
  const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_iq4nl));
  return _mm256_shuffle_epi8(table, nibbles_to_bytes32(qs16));
}

// IQ4_XS: a 6-bit scale per vector (low 4 bits in scales_l, high 2 in scales_h), minus 32.
struct FmtIQ4_XS : BlockFmt<block_iq4_xs, block_q8_K, QK_K> {
  struct Ctx {
    uint32_t lo, hi;
    explicit Ctx(const Block& x) : hi(x.scales_h) { std::memcpy(&lo, x.scales_l, 4); }
  };
  template <int k>
  static __m256i vec(const Block& x, const ActBlock& y, const Ctx& c) {
    const int ls = int(((c.lo >> (4 * k)) & 15) | (((c.hi >> (2 * k)) & 3) << 4)) - 32;
    return signed_dot_scaled(iq4nl_values(x.qs + 16 * k), y.qs + 32 * k, _mm256_set1_epi16(short(ls)));
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    return iq_finish(iq_block_sum<FmtIQ4_XS>(x, y, Ctx(x)), fp16_to_fp32(x.d) * y.d, acc);
  }
};

// IQ4_NL against Q8_0: q4_0's nibble order; the products' pairs stay below 2^15 (127 * 127 * 2).
// A row goes through lanes8_row (below), whose float steps the row-interleaved form
// (kernels/x86/packed-inl.hpp, iq4_nlx16 / iq4_nlx8) repeats, so the two give the same bits.
struct FmtIQ4_NL : BlockFmt<block_iq4_nl, block_q8_0, QK4_NL> {};
// A block's exact integer sum spread over 8 lanes.
inline __m256i iq4_nl_block_sum(const block_iq4_nl& x, const block_q8_0& y) {
  const __m256i w = iq4nl_values(x.qs);
  return dot_u8s8(_mm256_abs_epi8(w), _mm256_sign_epi8(load256(y.qs), w));
}

// Sum of a Q8_K block's 256 quants as 8 int32 lanes (from its 16 group sums).
inline __m256i q8_K_sum(const block_q8_K& y) { return _mm256_madd_epi16(load256(y.bsums), _mm256_set1_epi16(1)); }

// IQ4_XS's 8 vector scales ls - 32 as int32 lanes.
inline __m256i iq4_xs_scales8(const block_iq4_xs& x) {
  uint32_t lo;
  std::memcpy(&lo, x.scales_l, 4);
  const __m256i sl = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(lo)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                      _mm256_set1_epi32(15));
  const __m256i sh = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(x.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                      _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(sl, _mm256_slli_epi32(sh, 4)), _mm256_set1_epi32(32));
}
// Lane k of the result: the sum of v[k]'s 8 lanes (exact int32).
inline __m256i hsum8_i32(const __m256i (&v)[8]) {
  const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}
// A row of blocks with one F16 scale each (IQ4_XS, IQ4_NL): Sum(x, y) gives a block's exact integer
// sum spread over 8 lanes; 8 blocks' totals at once (hsum8_i32) are converted and times d * y.d
// added to lane b % 8 of one float accumulator, summed at the end by hsum. Their row-interleaved
// forms (kernels/x86/packed-inl.hpp) decode with these float steps, so the logits are equal bit for bit.
inline float act_scale(const block_q8_K& y) { return y.d; }
inline float act_scale(const block_q8_0& y) { return fp16_to_fp32(y.d); }
template <class Block, class Act, __m256i (*Sum)(const Block&, const Act&)>
inline float lanes8_row(int nb, const Block* x, const Act* y) {
  __m256 acc = _mm256_setzero_ps();
  for (int b0 = 0; b0 < nb; b0 += 8) {
    const int cnt = nb - b0 < 8 ? nb - b0 : 8;
    __m256i s[8];
    alignas(32) float dyd[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 8; ++k) {
      if (k < cnt) {
        s[k] = Sum(x[b0 + k], y[b0 + k]);
        dyd[k] = fp16_to_fp32(x[b0 + k].d) * act_scale(y[b0 + k]);
      } else {
        s[k] = _mm256_setzero_si256();
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum8_i32(s)), _mm256_load_ps(dyd), acc);
  }
  return hsum(acc);
}
template <>
inline float dot_row<FmtIQ4_NL>(int nb, const void* w, const void* a) {
  return lanes8_row<block_iq4_nl, block_q8_0, iq4_nl_block_sum>(nb, static_cast<const block_iq4_nl*>(w),
                                                                 static_cast<const block_q8_0*>(a));
}
#if EDGELLM_X86_AVX512VNNI
// A file block at avx512-vnni: two vectors (64 weights) a step, laid out as IQ4_NL's pair: the 32
// bytes of vectors 2p, 2p + 1 spread to [2p low, 2p high, 2p+1 low, 2p+1 high] (the activations'
// order), kvalues_iq4nl + 128 (u8) in one vpdpbusd, each int32 lane times its vector's scale; the
// +128's share, 128 * sum_v scale_v * sum y_v, once a block from the activation's group sums.
inline __m256i iq4_xs_block_sum(const block_iq4_xs& x, const block_q8_K& y) {
  const __m512i table = _mm512_broadcast_i32x4(_mm_xor_si128(load128(kvalues_iq4nl), _mm_set1_epi8(char(0x80))));
  const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                          0x0004000400040004, 0, 0);
  const __m256i sc = iq4_xs_scales8(x);
  const __m512i sc512 = _mm512_zextsi256_si512(sc);
  __m512i isum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int p = 0; p < 4; ++p) {
    const __m512i q = _mm512_castsi256_si512(load256(x.qs + 32 * p));
    const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(_mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0)), shifts),
                                         _mm512_set1_epi8(0x0F));
    const __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(table, nib),
                                           _mm512_loadu_si512(y.qs + 64 * p));
    const __m512i pick = _mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                          2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p);
    isum[p & 1] = _mm512_add_epi32(isum[p & 1], _mm512_mullo_epi32(dp, _mm512_permutexvar_epi32(pick, sc512)));
  }
  const __m512i s = _mm512_add_epi32(isum[0], isum[1]);
  const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm256_sub_epi32(s8, _mm256_slli_epi32(_mm256_mullo_epi32(sc, q8_K_sum(y)), 7));
}
#else
inline __m256i iq4_xs_block_sum(const block_iq4_xs& x, const block_q8_K& y) {
  return iq_block_sum<FmtIQ4_XS>(x, y, FmtIQ4_XS::Ctx(x));
}
#endif
template <>
inline float dot_row<FmtIQ4_XS>(int nb, const void* w, const void* a) {
  return lanes8_row<block_iq4_xs, block_q8_K, iq4_xs_block_sum>(nb, static_cast<const block_iq4_xs*>(w),
                                                                 static_cast<const block_q8_K*>(a));
}

// TQ2_0: 2-bit values q (weight q - 1), vector 4j + l in bits 2l..2l+1 of qs[32j ..]; the -1 is the
// activation's sum.
struct FmtTQ2_0 : BlockFmt<block_tq2_0, block_q8_K, QK_K> {
  template <int j>
  static __m256i half(const Block& x, const ActBlock& y) {
    const __m256i qv = load256(x.qs + 32 * j);
    const int8_t* yq = y.qs + 128 * j;
    __m256i s = dot_u8s8(crumbs<0>(qv), load256(yq));
    s = dot_u8s8_acc(s, crumbs<1>(qv), load256(yq + 32));
    s = dot_u8s8_acc(s, crumbs<2>(qv), load256(yq + 64));
    return dot_u8s8_acc(s, crumbs<3>(qv), load256(yq + 96));
  }
  static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i isum = _mm256_sub_epi32(_mm256_add_epi32(half<0>(x, y), half<1>(x, y)), q8_K_sum(y));
    return iq_finish(isum, fp16_to_fp32(x.d) * y.d, acc);
  }
};

// TQ1_0: 5 base-3 digits per byte, read as ggml does: q = byte * 3^l (mod 256), digit = q * 3 >> 8,
// i.e. (q >= 86) + (q >= 171). Bytes 0..31 hold digits l of weights 32l + m, bytes 32..47 digits l
// of weights 160 + 16l + m, qh bytes j digits l of weights 240 + 4l + j (4 digits each).
// With VNNI no digit is decoded: q' = 3q (mod 256) = 3q - 256 * digit, so 256 * digit = 3q - q', and
// a vector's digit sum is (3 * dot(q, y) - dot(q', y)) / 256, two u8 x s8 dots (each lane's sum
// divisible: every byte's is), q' already the next digit's q. Without VNNI the bytes q' would
// saturate maddubs' pairs (255 * 127 * 2): the digits are decoded by two signed compares of
// q ^ 0x80 (which times 3 is q' ^ 0x80), and the products summed in int16 (8 * 2 * 2 * 127 < 2^15),
// widened once a block.
struct FmtTQ1_0 : BlockFmt<block_tq1_0, block_q8_K, QK_K> {
  static constexpr char kBias = kVnni ? 0 : char(0x80);
  static __m256i times3(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
  static __m128i times3(__m128i q) { return _mm_add_epi8(q, _mm_add_epi8(q, q)); }
  // Vector k's products: VNNI: s[k & 1] += q . y, s[2 + (k & 1)] += 3q . y (four int32 chains); else
  // s[k & 1] += digits . y in int16. Returns the next digit's q (^ kBias).
  template <int k>
  static __m256i step(__m256i q, const int8_t* y, __m256i* s) {
    const __m256i yv = load256(y + 32 * k), next = times3(q);
    if constexpr (kVnni) {
      s[k & 1] = dot_u8s8_acc(s[k & 1], q, yv);
      s[2 + (k & 1)] = dot_u8s8_acc(s[2 + (k & 1)], next, yv);
    } else {
      // -digit: (q >= 86) + (q >= 171) as 0 / -1 masks, compared signed on q ^ 0x80. The first
      // constant hidden from g++ 12, which otherwise compares x > -43 as min(x, -42) == -42 (one
      // instruction more: 150 against 139 us, 2048 x 2048 on the EPYC at the avx2 level).
      __m256i c85 = _mm256_set1_epi8(85 - 128);
      __asm__("" : "+x"(c85));
      const __m256i nd = _mm256_add_epi8(_mm256_cmpgt_epi8(q, c85), _mm256_cmpgt_epi8(q, _mm256_set1_epi8(170 - 128)));
      s[k & 1] = _mm256_add_epi16(s[k & 1], _mm256_maddubs_epi16(_mm256_abs_epi8(nd), yv));
    }
    return next;
  }
  // Always inlined: g++ 12 otherwise calls it once per block (171 against 150 us at the avx2 level).
  __attribute__((always_inline)) static __m256 block(const Block& x, const ActBlock& y, __m256 acc) {
    const __m256i bias = _mm256_set1_epi8(kBias);
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i q = _mm256_xor_si256(load256(x.qs), bias);
    q = step<0>(q, y.qs, s);
    q = step<1>(q, y.qs, s);
    q = step<2>(q, y.qs, s);
    q = step<3>(q, y.qs, s);
    step<4>(q, y.qs, s);
    // bytes 32..47: digits (0, 1) and (2, 3) as one vector each; digit 4 shares a vector with qh.
    const __m128i b = _mm_xor_si128(load128(x.qs + 32), _mm256_castsi256_si128(bias));
    __m256i p = _mm256_set_m128i(times3(b), b);
    p = times3(step<5>(p, y.qs, s));
    p = times3(step<6>(p, y.qs, s));  // low half: digit 4
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    // qh's bytes times 1, 3, 9, 27 (mod 256) in its 32-bit lanes: even bytes from a 16-bit
    // multiply of the word (the low byte's product is exact mod 256), odd bytes from one of the
    // word's high byte alone.
    const __m128i h = _mm_set1_epi32(int(qh ^ (0x01010101u * uint8_t(kBias))));
    const __m128i pow3 = _mm_setr_epi16(1, 1, 3, 3, 9, 9, 27, 27), hi = _mm_set1_epi16(short(0xFF00));
    const __m128i hq = _mm_or_si128(_mm_andnot_si128(hi, _mm_mullo_epi16(h, pow3)),
                                    _mm_mullo_epi16(_mm_and_si128(h, hi), pow3));
    step<7>(_mm256_inserti128_si256(p, hq, 1), y.qs, s);
    __m256i dsum;
    if constexpr (kVnni) {
      const __m256i q1 = _mm256_add_epi32(s[0], s[1]), q3 = _mm256_add_epi32(s[2], s[3]);
      dsum = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_add_epi32(q1, _mm256_add_epi32(q1, q1)), q3), 8);
    } else {
      dsum = _mm256_madd_epi16(_mm256_add_epi16(s[0], s[1]), _mm256_set1_epi16(1));
    }
    return iq_finish(_mm256_sub_epi32(dsum, q8_K_sum(y)), fp16_to_fp32(x.d) * y.d, acc);
  }
};


// vec_dot_rows of each type (register_level-inl.hpp): the grid types take a row at a time (two blocks
// in flight): their cost is the table lookups, and with more rows in flight g++ 12 spills (kernel
// timings on the EPYC, 2048 x 2048: IQ3_S 376 us a row at a time against 465 in groups of 4, IQ4_XS
// 149 against 179); TQ2_0, all arithmetic, takes 4 rows (55 against 70 us).
inline constexpr int kRowsIQ = 1;
inline constexpr int kRowsTQ2_0 = 4;
