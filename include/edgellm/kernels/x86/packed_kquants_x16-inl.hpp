// The AVX-512 VNNI super-block kernels of the packed K-quant GEMMs, Q2_K .. Q6_K at 16 rows
// (layouts and oracle in kernels/layouts/packed_kquants.hpp; the driver they plug into, shared with
// the 8 rows of packed_kquants_x8-inl.hpp: packed_kquants-inl.hpp): one int32 lane per row, vpdpbusd of 16
// rows x 4 weights against 4 broadcast activation bytes, one scale multiply per sub-block for all
// 16 rows, mins via the Q8_K bsums. AVX-512F+BW+VNNI only: the other levels take the 8-row forms.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

namespace packed_kq {  // the 16-row forms

constexpr int kRows = 16;
// Tokens per register tile: 4 keeps accumulators + loaded vectors within the 32 zmm registers.
constexpr int kToks = 4;

inline __m512i bcast4(const void* p) {  // 4 activation bytes (or 2 int16) in every int32 lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i mask8(int v) { return _mm512_set1_epi8(char(v)); }
// The same byte-wise shift for callers that mask the result to bits that stay inside the byte:
// with AVX512-VBMI one vpmultishiftqb (port 5) picks each byte's 8 bits from bit 8j - S of its
// qword, leaving port 0 (the only port of vpdpbusd and of vector shifts) to the dot products.
template <int S>
inline __m512i shift_bits_p5(__m512i v) {
  if constexpr (kAvx512Vbmi && S != 0) {
    constexpr uint64_t ctrl = [] {
      uint64_t c = 0;
      for (int k = 0; k < 8; ++k) c |= uint64_t((8 * k - S) & 63) << (8 * k);
      return c;
    }();
    return _mm512_multishift_epi64_epi8(_mm512_set1_epi64(int64_t(ctrl)), v);
  } else if constexpr (kAvx512Vbmi) {
    return v;
  } else {
    return shift16<S>(v);
  }
}

// Bits S .. S+k of every byte moved down to the bits set in M, the rest zero: (v >> S) & M, S >= 0.
// With GFNI one vgf2p8affineqb does the shift and the mask (output bit j = input bit j + S for
// the bits j of M: row 7 - j of the 8x8 bit matrix holds 1 << (j + S)), instead of a shift and
// an AND (faster: docs/PERF.md, "Kernel constants").
template <int S, int M>
inline __m512i byte_field(__m512i v) {
  static_assert(S >= 0 && S < 8 && M > 0 && M < 256, "byte_field: a shift right within the byte");
  if constexpr (kGfni) {
    constexpr int64_t matrix = [] {
      uint64_t a = 0;
      for (int j = 0; j < 8; ++j)
        if ((M >> j & 1) && j + S < 8) a |= uint64_t(1) << (j + S) << (8 * (7 - j));
      return int64_t(a);
    }();
    return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(matrix), 0);
  } else {
    return _mm512_and_si512(shift_bits_p5<-S>(v), mask8(M));
  }
}

// Bitwise select: bits of a where m is 1, of b where m is 0 (one vpternlogd).
inline __m512i select_bits(__m512i m, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(m, a, b, 0xCA); }

// Two sub-blocks' int32 dot sums (each |sum| < 2^15) as int16 pairs per lane, lo = first, hi =
// second: one byte shuffle (port 5) merged into the first.
inline __m512i pair16(__m512i first, __m512i second) {
  // per dword of a 16-byte lane: bytes {-, -, 0, 1} + 4i (bytes 0, 1 keep `first` by the mask)
  const __m512i ctrl = _mm512_set4_epi32(0x0D0C0000, 0x09080000, 0x05040000, 0x01000000);
  return _mm512_mask_shuffle_epi8(first, 0xCCCCCCCCCCCCCCCCull, second, ctrl);
}

// Sum of a sub-block of 16 weights x 16 rows for one token: the four quad vectors against
// activation bytes a[0..16), one vpdpbusd chain.
inline __m512i dot16(const __m512i (&q)[4], const int8_t* a) {
  __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], bcast4(a));
  acc = _mm512_dpbusd_epi32(acc, q[1], bcast4(a + 4));
  acc = _mm512_dpbusd_epi32(acc, q[2], bcast4(a + 8));
  return _mm512_dpbusd_epi32(acc, q[3], bcast4(a + 12));
}

// The same sum times each row's scale (Q6_K: its 16-weight sums exceed int16, so no vpdpwssd).
inline __m512i dot16_scaled(const __m512i (&q)[4], const int8_t* a, __m512i scale) {
  return _mm512_mullo_epi32(dot16(q, a), scale);
}

// isum += scale_a * dot(a) + scale_b * dot(b) with the scales as int16 pairs (vpdpwssd): for
// Q2_K / Q3_K, whose 16-weight sums stay below 2^15 (16 * 7 * 128).
inline __m512i add_scaled_pair(__m512i isum, __m512i dot_a, __m512i dot_b, __m512i scale_pairs) {
  return _mm512_dpwssd_epi32(isum, pair16(dot_a, dot_b), scale_pairs);
}

// 32 bytes of [row][2] int8 scales -> int16 pairs per lane (for madd with a bsums pair) and the
// two scales as int32.
inline __m512i signed_pairs(const uint8_t* p, __m512i (&scale)[2]) {
  const __m512i pair = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  scale[0] = _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
  scale[1] = _mm512_srai_epi32(pair, 16);
  return pair;
}

// Q2_K: per sub-block 1 load of 2-bit quads, 4 ops to unpack them (7 without GFNI).
struct Q2K {
  static constexpr size_t kBytes = packed_k::q2_K_bytes(kRows);
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m512 (&sum)[T]) {
    const __m512i m2 = mask8(3), m4x16 = _mm512_set1_epi16(0x0F);
    __m512i isum[T], msum[T];
    for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      // Scale bytes of sub-blocks 2p, 2p + 1 as int16 pairs: low nibble scale, high nibble min.
      const __m512i pair = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 4 * kRows + p * 2 * kRows)));
      const __m512i scales = _mm512_and_si512(pair, m4x16);
      const __m512i mins = _mm512_srli_epi16(pair, 4);
      for (int t = 0; t < T; ++t) msum[t] = _mm512_add_epi32(msum[t], _mm512_madd_epi16(mins, bcast4(x[t]->q.bsums + 2 * p)));
      __m512i dots[2][T];
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * p + h;
        const __m512i v = load(sb + 20 * kRows + g * 4 * kRows);
        const __m512i q[4] = {_mm512_and_si512(v, m2), byte_field<2, 3>(v), byte_field<4, 3>(v), byte_field<6, 3>(v)};
        for (int t = 0; t < T; ++t) dots[h][t] = dot16(q, x[t]->q.qs + 16 * g);
      }
      for (int t = 0; t < T; ++t) isum[t] = add_scaled_pair(isum[t], dots[0][t], dots[1][t], scales);
    }
    add_d_dmin<false>(sb, x, isum, msum, sum);
  }
};

// Q3_K: per pair of sub-blocks 3 loads, 17 logic ops (8 on port 5; 12 ops with GFNI), 8 vpdpbusd.
struct Q3K {
  static constexpr size_t kBytes = packed_k::q3_K_bytes(kRows);
  // The eight quad vectors v0..v7 of a pair of sub-blocks from its vectors a, b, c (layout in
  // layouts/packed_kquants.hpp): six are a shift and an AND (byte_field), v6 / v7 gather 2 bits of
  // a / b and one of c by a bit-select and an AND. Shifts by vpmultishiftqb (port 5), junk bits
  // masked off; with GFNI every field is one vgf2p8affineqb.
  static void quads(const uint8_t* pair, __m512i (&q)[2][4]) {
    const __m512i m7 = mask8(7);
    const __m512i a = load(pair), b = load(pair + 4 * kRows), c = load(pair + 8 * kRows);
    q[0][0] = _mm512_and_si512(a, m7);
    q[0][1] = byte_field<3, 7>(a);
    q[0][2] = _mm512_and_si512(b, m7);
    q[0][3] = byte_field<3, 7>(b);
    q[1][0] = _mm512_and_si512(c, m7);
    q[1][1] = byte_field<3, 7>(c);
    if constexpr (kGfni) {  // two fields and an OR (faster than the 3-bit mask: docs/PERF.md, "Kernel constants")
      q[1][2] = _mm512_or_si512(byte_field<6, 3>(a), byte_field<5, 4>(c));
      q[1][3] = _mm512_or_si512(byte_field<6, 3>(b), byte_field<4, 4>(c));
    } else {
      const __m512i m3 = mask8(3);
      q[1][2] = _mm512_and_si512(select_bits(m3, shift_bits_p5<-6>(a), shift_bits_p5<-5>(c)), m7);
      q[1][3] = _mm512_and_si512(select_bits(m3, shift_bits_p5<-6>(b), shift_bits_p5<-4>(c)), m7);
    }
  }
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m512 (&sum)[T]) {
    __m512i isum[T], csum[T];
    for (int t = 0; t < T; ++t) isum[t] = csum[t] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      // the signed scales of sub-blocks 2p, 2p + 1 as int16 pairs
      const __m512i pairs = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2 * kRows + p * 2 * kRows)));
      for (int t = 0; t < T; ++t) csum[t] = _mm512_add_epi32(csum[t], _mm512_madd_epi16(pairs, bcast4(x[t]->q.bsums + 2 * p)));
      __m512i q[2][4];
      quads(sb + 18 * kRows + p * 12 * kRows, q);
      for (int t = 0; t < T; ++t)
        isum[t] = add_scaled_pair(isum[t], dot16(q[0], x[t]->q.qs + 32 * p), dot16(q[1], x[t]->q.qs + 32 * p + 16), pairs);
    }
    add_d_offset<2>(sb, x, isum, csum, sum);
  }
};

// Q4_K (kHigh = false) and Q5_K (kHigh = true: a vector of fifth bits after each sub-block's 4 quad
// vectors). Per sub-block of 32 weights: 4 loads of nibble quads, 8 vpdpbusd.
template <bool kHigh>
struct Q45K {
  static constexpr size_t kBytes = kHigh ? packed_k::q5_K_bytes(kRows) : packed_k::q4_K_bytes(kRows);
  static constexpr int kSubBytes = kHigh ? 20 * kRows : 16 * kRows;
  // Q5_K's quad vector J of a sub-block: nibbles plus bit 4 of quad J (low nibbles, bit J of hb)
  // or of quad 4 + J (high nibbles, bit 4 + J).
  template <int J, int T>
  static void quads_q5(const uint8_t* qs, __m512i hb, const int8_t* const (&a)[T], __m512i (&lo_acc)[T], __m512i (&hi_acc)[T]) {
    const __m512i v = load(qs + J * 4 * kRows);
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, mask8(0x0F)), _mm512_and_si512(shift_bits_p5<4 - J>(hb), mask8(0x10)));
    const __m512i hi =
        _mm512_or_si512(_mm512_and_si512(shift_bits_p5<-4>(v), mask8(0x0F)), _mm512_and_si512(shift_bits_p5<-J>(hb), mask8(0x10)));
    for (int t = 0; t < T; ++t) {
      lo_acc[t] = _mm512_dpbusd_epi32(lo_acc[t], lo, bcast4(a[t] + 4 * J));
      hi_acc[t] = _mm512_dpbusd_epi32(hi_acc[t], hi, bcast4(a[t] + 16 + 4 * J));
    }
  }
  // Q5_K's sub-block: its 32-weight sums exceed int16, so the scale goes through vpmulld.
  template <int T>
  static void sub_block_q5(const uint8_t* qs, const uint8_t* scales, const int8_t* const (&a)[T], __m512i (&isum)[T]) {
    const __m512i hb = load(qs + 16 * kRows);
    __m512i lo_acc[T], hi_acc[T];
    for (int t = 0; t < T; ++t) lo_acc[t] = hi_acc[t] = _mm512_setzero_si512();
    quads_q5<0>(qs, hb, a, lo_acc, hi_acc);
    quads_q5<1>(qs, hb, a, lo_acc, hi_acc);
    quads_q5<2>(qs, hb, a, lo_acc, hi_acc);
    quads_q5<3>(qs, hb, a, lo_acc, hi_acc);
    const __m512i scale = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    for (int t = 0; t < T; ++t)
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(_mm512_add_epi32(lo_acc[t], hi_acc[t]), scale));
  }
  // Q4_K's sub-block: v & 0xF0 is 16 x the high nibble, so the high half needs no shift; its dot
  // (16 x the true one, exact) is brought back by the shift that moves it into the upper int16 of
  // the lane. Both halves' dots fit int16 (16 weights x 15 x 128 < 2^15), so one vpdpwssd against
  // the scale held in both halves adds scale * (lo + hi) to isum: 3 ops per token instead of
  // add + vpmulld (2 uops) + add, and no vpmultishiftqb per quad vector.
  template <int T>
  static void sub_block_q4(const uint8_t* qs, const uint8_t* scales, const int8_t* const (&a)[T], __m512i (&isum)[T]) {
    const __m512i m0f = mask8(0x0F), mf0 = mask8(char(0xF0));
    __m512i lo_acc[T], hi_acc[T];
    for (int t = 0; t < T; ++t) lo_acc[t] = hi_acc[t] = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
      const __m512i v = load(qs + j * 4 * kRows), lo = _mm512_and_si512(v, m0f), hi16 = _mm512_and_si512(v, mf0);
      for (int t = 0; t < T; ++t) {
        lo_acc[t] = _mm512_dpbusd_epi32(lo_acc[t], lo, bcast4(a[t] + 4 * j));
        hi_acc[t] = _mm512_dpbusd_epi32(hi_acc[t], hi16, bcast4(a[t] + 16 + 4 * j));
      }
    }
    // each row's scale byte (lane i of 128 bits holds rows 4i..4i+3) zero-extended into both int16
    // halves of its dword
    const __m512i ctrl = _mm512_set_epi32(0x800F800F, 0x800E800E, 0x800D800D, 0x800C800C, 0x800B800B, 0x800A800A,
                                          0x80098009, 0x80088008, 0x80078007, 0x80068006, 0x80058005, 0x80048004,
                                          0x80038003, 0x80028002, 0x80018001, 0x80008000);
    const __m512i scale = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales))), ctrl);
    for (int t = 0; t < T; ++t)
      isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_mask_blend_epi16(0xAAAAAAAAu, lo_acc[t], _mm512_slli_epi32(hi_acc[t], 12)), scale);
  }
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m512 (&sum)[T]) {
    __m512i isum[T], msum[T];
    for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const uint8_t *qs = sb + 20 * kRows + s * kSubBytes, *scales = sb + 4 * kRows + s * kRows;
      const int8_t* a[T];
      for (int t = 0; t < T; ++t) a[t] = x[t]->q.qs + 32 * s;
      if constexpr (kHigh) sub_block_q5(qs, scales, a, isum);
      else sub_block_q4(qs, scales, a, isum);
    }
    for (int p = 0; p < 4; ++p) {  // mins of sub-blocks 2p, 2p + 1 against the sums per 32
      const __m512i m = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 12 * kRows + p * 2 * kRows)));
      for (int t = 0; t < T; ++t) msum[t] = _mm512_add_epi32(msum[t], _mm512_madd_epi16(m, bcast4(x[t]->bsums32 + 2 * p)));
    }
    add_d_dmin<true>(sb, x, isum, msum, sum);
  }
};

// Q6_K: per sub-block 3 loads, 9 logic ops (3 of them vpmultishiftqb on port 5), 4 vpdpbusd.
struct Q6K {
  static constexpr size_t kBytes = packed_k::q6_K_bytes(kRows);
  // Quad 3 of a sub-block from the top bit pairs of v0, v1, v2 (quads 0..2 are v & 0x3F): each
  // pair moved to its place by a byte shift (junk from the shifts is cut by the bit-selects and
  // the final AND).
  static inline __m512i quad3(__m512i v0, __m512i v1, __m512i v2, __m512i m03, __m512i m0f, __m512i m6) {
    const __m512i t = select_bits(m03, shift_bits_p5<-6>(v0), shift_bits_p5<-4>(v1));
    return _mm512_and_si512(select_bits(m0f, t, shift_bits_p5<-2>(v2)), m6);
  }
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m512 (&sum)[T]) {
    const __m512i m6 = mask8(0x3F), m03 = mask8(0x03), m0f = mask8(0x0F);
    __m512i isum[T], csum[T];
    for (int t = 0; t < T; ++t) isum[t] = csum[t] = _mm512_setzero_si512();
    for (int p = 0; p < 8; ++p) {
      __m512i scale[2];
      const __m512i pairs = signed_pairs(sb + 2 * kRows + p * 2 * kRows, scale);
      for (int t = 0; t < T; ++t) csum[t] = _mm512_add_epi32(csum[t], _mm512_madd_epi16(pairs, bcast4(x[t]->q.bsums + 2 * p)));
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * p + h;
        const uint8_t* base = sb + 18 * kRows + g * 12 * kRows;
        const __m512i v0 = load(base), v1 = load(base + 4 * kRows), v2 = load(base + 8 * kRows);
        const __m512i q[4] = {_mm512_and_si512(v0, m6), _mm512_and_si512(v1, m6), _mm512_and_si512(v2, m6),
                              quad3(v0, v1, v2, m03, m0f, m6)};
        for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], dot16_scaled(q, x[t]->q.qs + 16 * g, scale[h]));
      }
    }
    add_d_offset<5>(sb, x, isum, csum, sum);
  }
};

}  // namespace packed_kq

// Sets t.packed_of(Q2_K .. Q6_K) to the 16-row forms.
inline void register_packed_kquants(KernelTable& t) {
  using namespace packed_kq;
  set_packed_kquant_forms<kToks, Q2K, Q3K, Q45K<false>, Q45K<true>, Q6K>(t);
}
