// The AVX2 super-block kernels of the packed K-quant GEMMs, Q2_K .. Q6_K at 8 rows (layouts and
// oracle in kernels/layouts/packed_kquants.hpp; the driver they plug into, shared with the 16 rows
// of packed_kquants_x16-inl.hpp: packed_kquants-inl.hpp), for every level without AVX-512 VNNI. One 32-bit
// lane per row as there, but no VNNI: vpmaddubsw
// (u8 quants x 4 broadcast s8 activation bytes, products summed in pairs into int16) and the int16
// sums of a sub-block added in int16 as far as they cannot overflow, then one vpmaddwd by the rows'
// scale (held in both int16 halves of the row's lane) per sub-block: no vpmaddwd by ones per quad
// vector. Mins and offsets through the Q8_K bsums. Every int16 bound below takes |activation| <= 127 (quantize_row_q8_K) and names how many
// products one int16 lane holds.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

namespace packed_kq {  // the 8-row forms

constexpr int kRows = 8;
// Tokens per register tile: 3 tokens' int16 and int32 sums, the unpacked quad vectors and the
// float sums fit the 16 ymm registers. 4 was slower for Q2_K .. Q5_K (ns per 32 weights and pair,
// 2048 x 2048, 128 tokens, best of 8 on the AVX2 EPYC: q3_K 0.53 against 0.84, q2_K 0.53 / 0.64,
// q4_K 0.59 / 0.65) and level for Q6_K (0.61 / 0.60).
constexpr int kToks = 3;

// The AVX2 steps of packed-inl.hpp's PackedVec: V::splat(p) broadcasts 4 activation bytes to every
// 32-bit lane, V::pairs16 is vpmaddubsw, V::add16 / V::add add int16 / int32 lanes.
using V = PackedVec;
static_assert(V::kRows == kRows, "the 8-row forms use PackedVec's 32-byte vectors");
inline __m256i mask8(int v) { return _mm256_set1_epi8(char(v)); }
// (v >> S) & M in every byte (a 16-bit shift: M keeps only bits that stayed inside the byte).
template <int S, int M>
inline __m256i byte_field(__m256i v) {
  if constexpr (S == 0) return _mm256_and_si256(v, mask8(M));
  else return _mm256_and_si256(_mm256_srli_epi16(v, S), mask8(M));
}
// Row r's quad (u8, lane r) times the 4 activation bytes at a, products summed in pairs: int16.
inline __m256i mul(__m256i quads, const int8_t* a) { return V::pairs16(quads, V::splat(a)); }

// Per-row scale bytes -> each row's value in both int16 halves of its lane (the vpmaddwd operand
// that multiplies a lane's two int16 sums by the row's scale and adds them).
// 8 unsigned bytes, one per row:
inline __m256i scale16_u8(const uint8_t* p) {
  const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}
// From int16 pairs per lane (first, second): the first (kSecond = false) or the second in both halves.
template <bool kSecond>
inline __m256i dup16(__m256i pairs) {
  // per 128-bit half (lanes k = 0..3): bytes 4k, 4k + 1 (first) or 4k + 2, 4k + 3 (second), twice
  const int64_t lo = kSecond ? 0x0706070603020302 : 0x0504050401000100;
  const int64_t hi = kSecond ? 0x0F0E0F0E0B0A0B0A : 0x0D0C0D0C09080908;
  return _mm256_shuffle_epi8(pairs, _mm256_set_epi64x(hi, lo, hi, lo));
}
// The 16 bytes of [row][2] scales of sub-blocks 2p, 2p + 1 as int16 pairs per lane.
inline __m256i pairs_u8(const uint8_t* p) { return _mm256_cvtepu8_epi16(load128(p)); }
inline __m256i pairs_s8(const uint8_t* p) { return _mm256_cvtepi8_epi16(load128(p)); }

// isum[t] += scale * (the 16-weight sum of sub-block g from its four quad vectors), a[t] = the
// sub-block's 16 activation bytes. int16: 8 products of at most 7 x 127 (Q2_K, Q3_K).
template <int T>
inline void sub16(const __m256i (&q)[4], const int8_t* const (&a)[T], __m256i scale, __m256i (&isum)[T]) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const __m256i s = V::add16(V::add16(mul(q[0], a[t]), mul(q[1], a[t] + 4)),
                               V::add16(mul(q[2], a[t] + 8), mul(q[3], a[t] + 12)));
    isum[t] = V::add(isum[t], _mm256_madd_epi16(s, scale));
  }
}

// Q2_K: per sub-block one load of 2-bit quads, 7 ops to unpack them.
struct Q2K {
  static constexpr size_t kBytes = packed_k::q2_K_bytes(kRows);
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m256 (&sum)[T]) {
    __m256i isum[T], msum[T];
    for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      // scale bytes of sub-blocks 2p, 2p + 1: low nibble scale, high nibble min
      const __m256i pair = pairs_u8(sb + 4 * kRows + p * 2 * kRows);
      const __m256i scales = _mm256_and_si256(pair, _mm256_set1_epi16(0x0F)), mins = _mm256_srli_epi16(pair, 4);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) msum[t] = V::add(msum[t], _mm256_madd_epi16(mins, V::splat(x[t]->q.bsums + 2 * p)));
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * p + h;
        const __m256i v = V::load(sb + 20 * kRows + g * 4 * kRows);
        const __m256i q[4] = {byte_field<0, 3>(v), byte_field<2, 3>(v), byte_field<4, 3>(v), byte_field<6, 3>(v)};
        const int8_t* a[T];
        for (int t = 0; t < T; ++t) a[t] = x[t]->q.qs + 16 * g;
        sub16(q, a, h ? dup16<true>(scales) : dup16<false>(scales), isum);
      }
    }
    add_d_dmin<false>(sb, x, isum, msum, sum);
  }
};

// Q3_K: per pair of sub-blocks 3 loads and 19 ops to unpack its eight quad vectors.
struct Q3K {
  static constexpr size_t kBytes = packed_k::q3_K_bytes(kRows);
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m256 (&sum)[T]) {
    __m256i isum[T], csum[T];
    for (int t = 0; t < T; ++t) isum[t] = csum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      const __m256i pairs = pairs_s8(sb + 2 * kRows + p * 2 * kRows);  // signed scales of 2p, 2p + 1
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) csum[t] = V::add(csum[t], _mm256_madd_epi16(pairs, V::splat(x[t]->q.bsums + 2 * p)));
      const uint8_t* pr = sb + 18 * kRows + p * 12 * kRows;
      const __m256i va = V::load(pr), vb = V::load(pr + 4 * kRows), vc = V::load(pr + 8 * kRows);
      const int8_t* a[T];
      for (int t = 0; t < T; ++t) a[t] = x[t]->q.qs + 32 * p;
      const __m256i q0[4] = {byte_field<0, 7>(va), byte_field<3, 7>(va), byte_field<0, 7>(vb), byte_field<3, 7>(vb)};
      sub16(q0, a, dup16<false>(pairs), isum);
      // v6 = a's top bit pair | c's bit 7 as bit 2; v7 = b's top pair | c's bit 6 as bit 2
      const __m256i q1[4] = {byte_field<0, 7>(vc), byte_field<3, 7>(vc),
                             _mm256_or_si256(byte_field<6, 3>(va), byte_field<5, 4>(vc)),
                             _mm256_or_si256(byte_field<6, 3>(vb), byte_field<4, 4>(vc))};
      for (int t = 0; t < T; ++t) a[t] += 16;
      sub16(q1, a, dup16<true>(pairs), isum);
    }
    add_d_offset<2>(sb, x, isum, csum, sum);
  }
};

// Q4_K (kHigh = false) and Q5_K (kHigh = true: a vector of fifth bits after each sub-block's 4 quad
// vectors). Per sub-block of 32 weights: 4 loads of nibble quads, 8 vpmaddubsw per token.
template <bool kHigh>
struct Q45K {
  static constexpr size_t kBytes = kHigh ? packed_k::q5_K_bytes(kRows) : packed_k::q4_K_bytes(kRows);
  static constexpr int kSubBytes = kHigh ? 20 * kRows : 16 * kRows;
  // Quad vector J's low (weights 4J..) and high (16 + 4J..) nibbles, with Q5_K's fifth bits (bit J
  // and bit 4 + J of hb).
  template <int J>
  static void quads(const uint8_t* qs, __m256i hb, __m256i& lo, __m256i& hi) {
    const __m256i v = V::load(qs + J * 4 * kRows);
    lo = byte_field<0, 0x0F>(v);
    hi = byte_field<4, 0x0F>(v);
    if constexpr (kHigh) {
      const __m256i b4 = mask8(0x10);
      lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(hb, 4 - J), b4));
      hi = _mm256_or_si256(hi, byte_field<J, 0x10>(hb));
    }
  }
  template <int J, int T>
  static void step(const uint8_t* qs, __m256i hb, const int8_t* const (&a)[T], __m256i (&lo_acc)[T], __m256i (&hi_acc)[T]) {
    __m256i lo, hi;
    quads<J>(qs, hb, lo, hi);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      if constexpr (J == 0) {
        lo_acc[t] = mul(lo, a[t]);
        hi_acc[t] = mul(hi, a[t] + 16);
      } else {
        lo_acc[t] = V::add16(lo_acc[t], mul(lo, a[t] + 4 * J));
        hi_acc[t] = V::add16(hi_acc[t], mul(hi, a[t] + 16 + 4 * J));
      }
    }
  }
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m256 (&sum)[T]) {
    __m256i isum[T], msum[T];
    for (int t = 0; t < T; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const uint8_t* qs = sb + 20 * kRows + s * kSubBytes;
      const __m256i hb = kHigh ? V::load(qs + 16 * kRows) : _mm256_setzero_si256();
      const int8_t* a[T];
      for (int t = 0; t < T; ++t) a[t] = x[t]->q.qs + 32 * s;
      // int16 sums of 8 products each for the low and the high nibbles: at most 8 x 31 x 127
      __m256i lo_acc[T], hi_acc[T];
      step<0>(qs, hb, a, lo_acc, hi_acc);
      step<1>(qs, hb, a, lo_acc, hi_acc);
      step<2>(qs, hb, a, lo_acc, hi_acc);
      step<3>(qs, hb, a, lo_acc, hi_acc);
      const __m256i scale = scale16_u8(sb + 4 * kRows + s * kRows);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        if constexpr (kHigh) {  // both halves together would reach 16 x 31 x 127: two vpmaddwd
          isum[t] = V::add(isum[t], V::add(_mm256_madd_epi16(lo_acc[t], scale), _mm256_madd_epi16(hi_acc[t], scale)));
        } else {  // 16 products of at most 15 x 127 = 30480 fit one int16
          isum[t] = V::add(isum[t], _mm256_madd_epi16(V::add16(lo_acc[t], hi_acc[t]), scale));
        }
      }
    }
    for (int p = 0; p < 4; ++p) {  // mins of sub-blocks 2p, 2p + 1 against the sums per 32
      const __m256i m = pairs_u8(sb + 12 * kRows + p * 2 * kRows);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) msum[t] = V::add(msum[t], _mm256_madd_epi16(m, V::splat(x[t]->bsums32 + 2 * p)));
    }
    add_d_dmin<true>(sb, x, isum, msum, sum);
  }
};

// Q6_K: per sub-block 3 loads, 11 ops to unpack; its quads reach 63, so an int16 lane holds the
// sum of two vpmaddubsw (4 products, at most 4 x 63 x 127 = 32004) and the scale is applied twice.
struct Q6K {
  static constexpr size_t kBytes = packed_k::q6_K_bytes(kRows);
  template <int T>
  static void superblock(const uint8_t* sb, const PackedActQ8K* const (&x)[T], __m256 (&sum)[T]) {
    __m256i isum[T], csum[T];
    for (int t = 0; t < T; ++t) isum[t] = csum[t] = _mm256_setzero_si256();
    for (int p = 0; p < 8; ++p) {
      const __m256i pairs = pairs_s8(sb + 2 * kRows + p * 2 * kRows);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) csum[t] = V::add(csum[t], _mm256_madd_epi16(pairs, V::splat(x[t]->q.bsums + 2 * p)));
      for (int h = 0; h < 2; ++h) {
        const int g = 2 * p + h;
        const uint8_t* base = sb + 18 * kRows + g * 12 * kRows;
        const __m256i v0 = V::load(base), v1 = V::load(base + 4 * kRows), v2 = V::load(base + 8 * kRows);
        // quad 3: bits 6-7 of v0, v1, v2 as its bits 0-1, 2-3, 4-5
        const __m256i q3 = _mm256_or_si256(_mm256_or_si256(byte_field<6, 0x03>(v0), byte_field<4, 0x0C>(v1)),
                                           byte_field<2, 0x30>(v2));
        const __m256i q0 = byte_field<0, 0x3F>(v0), q1 = byte_field<0, 0x3F>(v1), q2 = byte_field<0, 0x3F>(v2);
        const __m256i scale = h ? dup16<true>(pairs) : dup16<false>(pairs);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* a = x[t]->q.qs + 16 * g;
          const __m256i s01 = V::add16(mul(q0, a), mul(q1, a + 4)), s23 = V::add16(mul(q2, a + 8), mul(q3, a + 12));
          isum[t] = V::add(isum[t], V::add(_mm256_madd_epi16(s01, scale), _mm256_madd_epi16(s23, scale)));
        }
      }
    }
    add_d_offset<5>(sb, x, isum, csum, sum);
  }
};

}  // namespace packed_kq

// Sets t.packed_of(Q2_K .. Q6_K) to the 8-row forms.
inline void register_packed_kquants(KernelTable& t) {
  using namespace packed_kq;
  set_packed_kquant_forms<kToks, Q2K, Q3K, Q45K<false>, Q45K<true>, Q6K>(t);
}
