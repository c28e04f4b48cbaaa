// x86 kernels over the row-interleaved Q4_0 / Q8_0 layout of kernels/layouts/packed_legacy.hpp: one 32-bit
// lane per weight row, so a block costs 8 u8 x s8 4-way dots per token for all rows of the group,
// then one int->float convert and one FMA — no horizontal sums, one sequential stream per group.
// 16 rows (64-byte vectors) with AVX-512 VNNI, else 8 rows with AVX2 (VNNI or maddubs). A register
// tile of up to kPackedTileToks tokens shares each unpacked weight vector (prefill).
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

#if EDGELLM_X86_AVX512VNNI
struct PackedVec {
  static constexpr int kRows = 16;
  static constexpr bool kExactU8 = true;  // vpdpbusd: no int16 saturation, u8 up to 255 is fine
  using I = __m512i;
  using F = __m512;
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I lo_nibbles(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static I hi_nibbles(I v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
  static I hi_nibbles_x16(I v) { return _mm512_and_si512(v, _mm512_set1_epi8(char(0xF0))); }
  static I div16(I a) { return _mm512_srai_epi32(a, 4); }
  static I splat(const void* p) { return _mm512_set1_epi32(load_i32(p)); }
  static I zero_i() { return _mm512_setzero_si512(); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static I table(__m128i t) { return _mm512_broadcast_i32x4(t); }
  static I lookup(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static I set1(int v) { return _mm512_set1_epi32(v); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I widen_i8(const uint8_t* p) { return _mm512_cvtepi8_epi32(load128(p)); }  // 16 int8 -> int32
  static F scales(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F zero() { return _mm512_setzero_ps(); }
  static F splat(float v) { return _mm512_set1_ps(v); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm512_fmsub_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int S>
  static I shl(I a) { return _mm512_slli_epi32(a, S); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
};
#else
struct PackedVec {
  static constexpr int kRows = 8;
  static constexpr bool kExactU8 = kVnni;  // else maddubs: u8 x s8 pair sums saturate at 2^15
  using I = __m256i;
  using F = __m256;
  static I load(const uint8_t* p) { return load256(p); }
  static I lo_nibbles(I v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
  static I hi_nibbles(I v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
  static I hi_nibbles_x16(I v) { return _mm256_and_si256(v, _mm256_set1_epi8(char(0xF0))); }
  static I div16(I a) { return _mm256_srai_epi32(a, 4); }
  static I splat(const void* p) { return _mm256_set1_epi32(load_i32(p)); }
  static I zero_i() { return _mm256_setzero_si256(); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I dot(I acc, I u, I s) { return dot_u8s8_acc(acc, u, s); }
  static I table(__m128i t) { return _mm256_broadcastsi128_si256(t); }
  static I lookup(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I set1(int v) { return _mm256_set1_epi32(v); }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I widen_i8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  // Signed weights w (the dot step's u8 would saturate): |w| x (y with w's sign).
  static I dot_signed(I acc, I w, I y) { return dot_u8s8_acc(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(y, w)); }
  // Without VNNI: u8 x s8 products summed in pairs into int16 lanes, int16 adds, and the int16
  // pairs of each 32-bit lane summed into it.
  static I pairs16(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I widen16(I a) { return _mm256_madd_epi16(a, _mm256_set1_epi16(1)); }
  static F scales(const uint8_t* p) { return _mm256_cvtph_ps(load128(p)); }
  static F zero() { return _mm256_setzero_ps(); }
  static F splat(float v) { return _mm256_set1_ps(v); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fmsub(F a, F b, F c) { return _mm256_fmsub_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int S>
  static I shl(I a) { return _mm256_slli_epi32(a, S); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
};
#endif

// Tokens per register tile: T float accumulators + 8 weight vectors + one token's two int sums fit
// the 32 AVX-512 registers with T = 8 (faster than 4: docs/PERF.md, "Kernel constants"); AVX2
// (16 registers) takes 2.
inline constexpr int kPackedTileToks = PackedVec::kRows == 16 ? 8 : 2;
// IQ4_NL without VNNI (the signed dot, |w| x y with w's sign) takes 8: each weight vector's table
// lookup and vpabsb then serve 8 tokens' products, not 2, though 8 float accumulators and the 8
// weight vectors no longer all stay in registers (TinyLlama IQ4_NL pp512, Zen 3, 2 threads: 73 t/s
// with 2, 76 with 3, 82 with 4, 88 with 6, 92 with 8, 87-90 with 12 or 16).
inline constexpr int kPackedTileToksSignedNL = 8;

// Software prefetch distance in the group stream of every packed form (Q4_0 / Q8_0 here, the
// K-quants in packed_kquants-inl.hpp): every line of the block this far ahead into L1, and for the
// 16-row (AVX-512 VNNI) forms a second, farther prefetch into L2 that keeps more DRAM reads in
// flight than the L1 fill buffers allow (distances chosen by measurement on a Xeon, the best on
// the DRAM-fed GEMV for the K-quants too: docs/PERF.md, "Kernel constants"). The 8-row forms of
// the other levels prefetch into L1 only, 3 KiB ahead: on the AVX2 EPYC the L2 prefetch made
// decode slower (docs/PERF.md, "Packed K-quants on AVX2"). Prefetching past the group's end is
// harmless.
inline constexpr size_t kPrefetchBytes = PackedVec::kRows == 16 ? 4096 : 3072;
inline constexpr size_t kPrefetchL2Bytes = PackedVec::kRows == 16 ? 16384 : 0;

// The prefetches for the `bytes` of the stream that start at p.
inline void prefetch_ahead(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + kPrefetchBytes + o, _MM_HINT_T0);
  if constexpr (kPrefetchL2Bytes > 0)
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + kPrefetchL2Bytes + o, _MM_HINT_T1);
}

// The packed forms of this file: Q8_0's bytes, Q4_0's nibbles, IQ4_NL's nibbles (Q4_0's layout)
// looked up in a 16-byte table.
enum class Packed { Q8_0, Q4_0, IQ4_NL };

// The 8 words of block b as vectors (lane r = weights 4j .. 4j+3 of row r). kX16: the odd (high
// nibble) words as v & 0xF0, 16 x their value: one op instead of a shift and a mask; their dots
// come out 16 x too and exact, and the caller divides the sum of those dots by 16 (an exact shift).
// IQ4_NL: the nibbles' table values (`table`).
template <class V, Packed K, bool kX16>
inline void load_words(const uint8_t* qs, typename V::I (&w)[packed::kWords], typename V::I table) {
  constexpr int kWordBytes = 4 * V::kRows;
  if constexpr (K != Packed::Q8_0) {
#pragma GCC unroll 4  // w stays in registers (see packed_tile)
    for (int c = 0; c < packed::kWords / 2; ++c) {
      const typename V::I v = V::load(qs + c * kWordBytes);
      w[2 * c] = V::lo_nibbles(v);
      w[2 * c + 1] = kX16 ? V::hi_nibbles_x16(v) : V::hi_nibbles(v);
      if constexpr (K == Packed::IQ4_NL) {
        w[2 * c] = V::lookup(table, w[2 * c]);
        w[2 * c + 1] = V::lookup(table, w[2 * c + 1]);
      }
    }
  } else {
#pragma GCC unroll 8
    for (int j = 0; j < packed::kWords; ++j) w[j] = V::load(qs + j * kWordBytes);
  }
}

// IQ4_NL's lookup table: kvalues_iq4nl, + 128 (u8) where the dot step is exact for u8 (the
// activation's correction is then -128 * sum y), else signed (dot_step's |w| x (y with w's sign)).
template <class V>
inline typename V::I iq4_nl_table() {
  const __m128i kv = load128(kvalues_iq4nl);
  return V::table(V::kExactU8 ? _mm_xor_si128(kv, _mm_set1_epi8(char(0x80))) : kv);
}
template <class V, Packed K>
inline typename V::I dot_step(typename V::I acc, typename V::I w, typename V::I y) {
  if constexpr (K == Packed::IQ4_NL && !V::kExactU8) return V::dot_signed(acc, w, y);
  else return V::dot(acc, w, y);
}

// T tokens x one group: out[t * out_stride + r]. Each token's block sum starts from the
// activation's offset correction; two int chains per token keep a lone token (decode) from
// waiting on one 8-deep vpdpbusd chain.
template <class V, Packed K, int T>
inline void packed_tile(int64_t n_in, const uint8_t* group, const uint8_t* act, size_t act_stride, float* out,
                        size_t out_stride) {
  constexpr bool kQ4 = K == Packed::Q4_0;
  using G = packed::Geometry<K != Packed::Q8_0 ? QK4_0 / 2 : QK8_0, V::kRows>;
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = n_in / packed::kBlock;
  // High nibbles x 16 where the dot step is exact for bytes up to 240 (not maddubs' int16 pair
  // sums) and the tile is small enough that the per-token shift costs less than the 4 per block
  // it saves (decode: T = 1).
  constexpr bool kX16 = kQ4 && V::kExactU8 && T <= 4;
  const I table = K == Packed::IQ4_NL ? iq4_nl_table<V>() : V::zero_i();
  packed::ActView a[T];
  F acc[T];
  for (int t = 0; t < T; ++t) {
    a[t] = packed::act_view(act + size_t(t) * act_stride, n_in);
    acc[t] = V::zero();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qs = group + G::qs_at(b);
    prefetch_ahead(group + G::kPair / 2 * size_t(b), G::kPair / 2);  // the lines of the block, ahead
    I w[packed::kWords];
    load_words<V, K, kX16>(qs, w, table);
    const F dw = V::scales(group + G::scales_at(b));
    // Unrolled whatever the tuning: g++ 12 unrolls these only for some -march targets (znver3 yes,
    // haswell or the plain build's target attributes no: 1.4x slower prefill).
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* y = a[t].qs + b * packed::kBlock;
      if constexpr (kQ4 && !V::kExactU8) {
        // vpmaddubsw without VNNI: the block's 8 words summed in int16 (16 products of at most 15 x
        // 127 per lane, no overflow), two chains, then one vpmaddwd by ones instead of one per word.
        I h0 = V::pairs16(w[0], V::splat(y)), h1 = V::pairs16(w[1], V::splat(y + 4));
#pragma GCC unroll 4
        for (int j = 2; j < packed::kWords; j += 2) {
          h0 = V::add16(h0, V::pairs16(w[j], V::splat(y + 4 * j)));
          h1 = V::add16(h1, V::pairs16(w[j + 1], V::splat(y + 4 * j + 4)));
        }
        const I isum = V::add(V::splat(a[t].corr + b), V::widen16(V::add16(h0, h1)));
        acc[t] = V::fma(V::cvt(isum), V::mul(dw, V::splat(a[t].d[b])), acc[t]);
      } else {
        I s0 = V::splat(a[t].corr + b), s1 = V::zero_i();
#pragma GCC unroll 4
        for (int j = 0; j < packed::kWords; j += 2) {
          s0 = dot_step<V, K>(s0, w[j], V::splat(y + 4 * j));
          s1 = dot_step<V, K>(s1, w[j + 1], V::splat(y + 4 * j + 4));
        }
        // s1 holds only odd words' dots (with kX16: 16 x the high nibbles', a multiple of 16)
        acc[t] = V::fma(V::cvt(V::add(s0, kX16 ? V::div16(s1) : s1)), V::mul(dw, V::splat(a[t].d[b])), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) V::store(out + size_t(t) * out_stride, acc[t]);
}

// Tile::run<T>: a register tile of T tokens; TileOf<V, K> runs packed_tile.
template <class V, Packed K>
struct TileOf {
  static size_t act_bytes(int64_t n_in) { return packed::act_bytes(n_in); }
  template <int T>
  static void run(int64_t n_in, const uint8_t* g, const uint8_t* a, size_t ab, float* out, size_t out_stride) {
    packed_tile<V, K, T>(n_in, g, a, ab, out, out_stride);
  }
};

// The remainder tile of 1 .. T tokens, dispatched to a compile-time size.
template <class Tile, int T>
inline void packed_tail(int n, int64_t n_in, const uint8_t* g, const uint8_t* a, size_t ab, float* out,
                        size_t out_stride) {
  if constexpr (T > 0) {
    if (n == T) Tile::template run<T>(n_in, g, a, ab, out, out_stride);
    else packed_tail<Tile, T - 1>(n, n_in, g, a, ab, out, out_stride);
  }
}

// PackedFormat::gemm: full register tiles of kT tokens, then the remainder in one smaller tile.
template <class Tile, int kT>
inline void packed_tiles(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  const auto* g = static_cast<const uint8_t*>(group);
  const auto* a = static_cast<const uint8_t*>(act);
  const size_t ab = Tile::act_bytes(n_in);
  int t = 0;
  for (; t + kT <= ntok; t += kT)
    Tile::template run<kT>(n_in, g, a + size_t(t) * ab, ab, out + size_t(t) * out_stride, out_stride);
  packed_tail<Tile, kT - 1>(ntok - t, n_in, g, a + size_t(t) * ab, ab, out + size_t(t) * out_stride, out_stride);
}
template <class V, Packed K>
inline void packed_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  constexpr int kT = K == Packed::IQ4_NL && !V::kExactU8 ? kPackedTileToksSignedNL : kPackedTileToks;
  packed_tiles<TileOf<V, K>, kT>(n_in, group, act, ntok, out, out_stride);
}

// The signed Q8_0 form (packed_legacy.hpp) for AVX2 without VNNI, whose vpmaddubsw would saturate
// on the unsigned form's bytes: per word and token |w| x (y with w's sign) by vpmaddubsw (pairs
// of at most 2 * 128 * 127 < 2^15), vpmaddwd by ones and an add, the words in the outer loop so 4
// tokens share each loaded word and its |w|; then one convert and fma per block for 8 rows.
template <int T>
inline void packed_s8_tile(int64_t n_in, const uint8_t* group, const uint8_t* act, size_t act_stride, float* out,
                           size_t out_stride) {
  using G = packed::GeometryQ8_0<8>;
  const int64_t nb = n_in / packed::kBlock;
  packed::ActView a[T];
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    a[t] = packed::act_view(act + size_t(t) * act_stride, n_in);
    acc[t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_ahead(group + G::kPair / 2 * size_t(b), G::kPair / 2);  // as packed_tile
    const uint8_t* qs = group + G::qs_at(b);
    __m256i isum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 2  // unrolled fully, g++ sums a tree of the products and spills (gemm_u8-inl.hpp)
    for (int j = 0; j < packed::kWords; ++j) {
      const __m256i w = load256(qs + 32 * j), wa = _mm256_abs_epi8(w);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i y = _mm256_sign_epi8(_mm256_set1_epi32(load_i32(a[t].qs + b * packed::kBlock + 4 * j)), w);
        isum[t] = dot_u8s8_acc(isum[t], wa, y);
      }
    }
    const __m256 dw = _mm256_cvtph_ps(load128(group + G::scales_at(b)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dw, _mm256_set1_ps(a[t].d[b])), acc[t]);
  }
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + size_t(t) * out_stride, acc[t]);
}

// PackedFormat::gemm of the signed form: tiles of 4 tokens, then one of the 1-3 left.
struct S8Tile {
  static size_t act_bytes(int64_t n_in) { return packed::act_bytes(n_in); }
  template <int T>
  static void run(int64_t n_in, const uint8_t* g, const uint8_t* a, size_t ab, float* out, size_t out_stride) {
    packed_s8_tile<T>(n_in, g, a, ab, out, out_stride);
  }
};
inline void packed_s8_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  packed_tiles<S8Tile, 4>(n_in, group, act, ntok, out, out_stride);
}

// A decode row driver: block(b, acc) adds block b to accumulator b % 8; each row's 8 accumulators
// are then summed in hsum's order (common-inl.hpp), ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)), to out.
template <class V, class Block>
inline void lanes8_blocks(int64_t nb, const Block& block, float* out) {
  typename V::F acc[8];
  for (auto& f : acc) f = V::zero();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) block(b + k, acc[k]);
  }
  for (int k = 0; b + k < nb; ++k) block(b + k, acc[k]);
  V::store(out, V::add(V::add(V::add(acc[0], acc[4]), V::add(acc[1], acc[5])),
                       V::add(V::add(acc[2], acc[6]), V::add(acc[3], acc[7]))));
}

// IQ4_NL in Q4_0's layout (packed_legacy.hpp), decode: one token a call, each row's float steps those
// of dot_row<FmtIQ4_NL> (lanes8_row, dot_iquants-inl.hpp): block b's exact integer sum, converted,
// times dw * dy added to accumulator b % 8, the 8 summed in hsum's order, so decode gives vec_dot's
// bits. Prefill runs packed_gemm (prefill_gemm), the matrix in place too (kernels/matmul.hpp).
template <class V>
inline void packed_iq4_nl_token(int64_t n_in, const uint8_t* group, const uint8_t* act, float* out) {
  using G = packed::GeometryQ4_0<V::kRows>;
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = n_in / packed::kBlock;
  const packed::ActView a = packed::act_view(act, n_in);
  const I table = iq4_nl_table<V>();
  const auto block = [&](int64_t b, F& acc_k) {
    prefetch_ahead(group + G::kPair / 2 * size_t(b), G::kPair / 2);
    I w[packed::kWords];
    load_words<V, Packed::IQ4_NL, false>(group + G::qs_at(b), w, table);
    const int8_t* y = a.qs + b * packed::kBlock;
    I s0 = V::kExactU8 ? V::splat(a.corr + b) : V::zero_i(), s1 = V::zero_i();
#pragma GCC unroll 4
    for (int j = 0; j < packed::kWords; j += 2) {
      s0 = dot_step<V, Packed::IQ4_NL>(s0, w[j], V::splat(y + 4 * j));
      s1 = dot_step<V, Packed::IQ4_NL>(s1, w[j + 1], V::splat(y + 4 * j + 4));
    }
    acc_k = V::fma(V::cvt(V::add(s0, s1)), V::mul(V::scales(group + G::scales_at(b)), V::splat(a.d[b])), acc_k);
  };
  lanes8_blocks<V>(nb, block, out);
}
template <class V>
inline void packed_iq4_nl_gemv(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  for (int t = 0; t < ntok; ++t)
    packed_iq4_nl_token<V>(n_in, static_cast<const uint8_t*>(group),
                           static_cast<const uint8_t*>(act) + size_t(t) * packed::act_bytes(n_in), out + size_t(t) * out_stride);
}

// IQ4_XS in Q4_0's layout per 32 weights (packed_legacy.hpp, GeometryIQ4_XS): per vector v of block
// b the 8 words looked up as IQ4_NL's, each token's dots from its -128 * sum y (the u8 path; its
// two Q8_K group sums) or 0, times the rows' scales ls_v (int32 multiply), summed into the block's
// exact integer sum per row: the integer IQ4_XS's file kernels sum.
template <class V, int T>
inline void iq4_xs_block_isums(const uint8_t* group, int64_t b, const block_q8_K* const (&y)[T], typename V::I table,
                               typename V::I (&isum)[T]) {
  using G = packed::GeometryIQ4_XS<V::kRows>;
  using I = typename V::I;
  for (int t = 0; t < T; ++t) isum[t] = V::zero_i();
  for (int v = 0; v < QK_K / 32; ++v) {
    I w[packed::kWords];
    load_words<V, Packed::IQ4_NL, false>(group + G::qs_at(b, v), w, table);
    const I ls = V::widen_i8(group + G::ls_at(b) + size_t(v) * V::kRows);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* yq = y[t]->qs + 32 * v;
      I s0 = V::kExactU8 ? V::set1(-128 * (int(y[t]->bsums[2 * v]) + int(y[t]->bsums[2 * v + 1]))) : V::zero_i();
      I s1 = V::zero_i();
#pragma GCC unroll 4
      for (int j = 0; j < packed::kWords; j += 2) {
        s0 = dot_step<V, Packed::IQ4_NL>(s0, w[j], V::splat(yq + 4 * j));
        s1 = dot_step<V, Packed::IQ4_NL>(s1, w[j + 1], V::splat(yq + 4 * j + 4));
      }
      isum[t] = V::add(isum[t], V::mullo(V::add(s0, s1), ls));
    }
  }
}
// Decode, one token a call: each row's float steps those of dot_row<FmtIQ4_XS> (lanes8_row): the
// block's sum converted, times d * y.d added to accumulator b % 8, the 8 summed in hsum's order.
template <class V>
inline void packed_iq4_xs_token(int64_t n_in, const uint8_t* group, const block_q8_K* y, float* out) {
  using G = packed::GeometryIQ4_XS<V::kRows>;
  using I = typename V::I;
  using F = typename V::F;
  const int64_t nb = n_in / QK_K;
  const I table = iq4_nl_table<V>();
  const auto block = [&](int64_t b, F& acc_k) {
    prefetch_ahead(group + G::qs_at(b, 0), G::kBlockBytes);
    const block_q8_K* const yb[1] = {y + b};
    I isum[1];
    iq4_xs_block_isums<V, 1>(group, b, yb, table, isum);
    acc_k = V::fma(V::cvt(isum[0]), V::mul(V::scales(group + G::d_at(b)), V::splat(y[b].d)), acc_k);
  };
  lanes8_blocks<V>(nb, block, out);
}
template <class V>
inline void packed_iq4_xs_gemv(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  for (int t = 0; t < ntok; ++t)
    packed_iq4_xs_token<V>(n_in, static_cast<const uint8_t*>(group),
                           static_cast<const block_q8_K*>(act) + size_t(t) * size_t(n_in / QK_K), out + size_t(t) * out_stride);
}
// Prefill: T tokens share each looked-up vector; one float accumulator per token.
template <class V>
struct TileIQ4_XS {
  static size_t act_bytes(int64_t n_in) { return packed::act_bytes_q8_K(n_in); }
  template <int T>
  static void run(int64_t n_in, const uint8_t* group, const uint8_t* act, size_t ab, float* out, size_t out_stride) {
    using G = packed::GeometryIQ4_XS<V::kRows>;
    using I = typename V::I;
    using F = typename V::F;
    const I table = iq4_nl_table<V>();
    F acc[T];
    for (F& f : acc) f = V::zero();
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
      prefetch_ahead(group + G::qs_at(b, 0), G::kBlockBytes);
      const block_q8_K* yb[T];
      for (int t = 0; t < T; ++t) yb[t] = reinterpret_cast<const block_q8_K*>(act + size_t(t) * ab) + b;
      I isum[T];
      iq4_xs_block_isums<V, T>(group, b, yb, table, isum);
      const F dw = V::scales(group + G::d_at(b));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t] = V::fma(V::cvt(isum[t]), V::mul(dw, V::splat(yb[t]->d)), acc[t]);
    }
    for (int t = 0; t < T; ++t) V::store(out + size_t(t) * out_stride, acc[t]);
  }
};

// Fills packed_of(Q4_0), packed_of(Q8_0) and packed_of(IQ4_NL): unsigned where the dot step is exact
// for bytes up to 255 (VNNI), else (AVX2 without VNNI) the signed Q8_0 and IQ4_NL forms. IQ4_NL's
// is resident_only (streamed matrices keep the file's bytes, as the transcoded i-quant forms do).
inline void register_packed(KernelTable& t) {
  using V = PackedVec;
  constexpr int R = V::kRows;
  t.packed_of(DType::Q4_0) =
      packed::make_format(R, R == 16 ? "q4_0x16" : "q4_0x8", packed::GeometryQ4_0<R>::group_bytes,
                          packed::pack_q4_0<R>, packed::prepare_act<quantize_row_q8_0, packed::kQ4Offset>,
                          packed_gemm<V, Packed::Q4_0>);
  if constexpr (V::kExactU8) {
    t.packed_of(DType::Q8_0) =
        packed::make_format(R, R == 16 ? "q8_0x16" : "q8_0x8", packed::GeometryQ8_0<R>::group_bytes,
                            packed::pack_q8_0<R>, packed::prepare_act<quantize_row_q8_0, packed::kQ8Offset>,
                            packed_gemm<V, Packed::Q8_0>);
  } else {
    static_assert(V::kExactU8 || R == 8, "the signed form's tile is AVX2's");
    t.packed_of(DType::Q8_0) = packed::make_format(R, "q8_0x8s", packed::GeometryQ8_0<R>::group_bytes,
                                                   packed::pack_q8_0<R, 0>, packed::prepare_act<quantize_row_q8_0, 0>,
                                                   packed_s8_gemm);
  }
  PackedFormat nl = packed::make_format(R, R == 16 ? "iq4_nlx16" : "iq4_nlx8", packed::GeometryQ4_0<R>::group_bytes,
                                        packed::pack_q4_0<R>,
                                        packed::prepare_act<quantize_row_q8_0, V::kExactU8 ? packed::kQ8Offset : 0>,
                                        packed_iq4_nl_gemv<V>);
  nl.resident_only = true;
  nl.prefill_gemm = packed_gemm<V, Packed::IQ4_NL>;
  t.packed_of(DType::IQ4_NL) = nl;
  PackedFormat xs = packed::make_format(R, R == 16 ? "iq4_xsx16" : "iq4_xsx8", packed::GeometryIQ4_XS<R>::group_bytes,
                                        packed::pack_iq4_xs<R>, packed::prepare_act_q8_K<quantize_row_q8_K>,
                                        packed_iq4_xs_gemv<V>);
  xs.act_bytes = packed::act_bytes_q8_K;
  xs.resident_only = true;
  // AVX2 without VNNI: the token tile's per-token |w| x signed y and scale multiplies lose to the u8
  // GEMM of the file's bytes read back (pp512 85-89 t/s against 112-117, TinyLlama, Zen 4 at avx2).
  if constexpr (V::kExactU8) xs.prefill_gemm = packed_tiles<TileIQ4_XS<V>, kPackedTileToks>;
  else xs.to_file_row = packed::iq4_xs_group_row<R>;
  t.packed_of(DType::IQ4_XS) = xs;
}
