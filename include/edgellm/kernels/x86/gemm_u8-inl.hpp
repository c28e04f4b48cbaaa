// The x86 VNNI tile of the prefill GEMM (KernelTable::u8_gemm; the driver is kernels/matmul.hpp):
// weight rows in the common u8 form (kernels/layouts/unpack_u8.hpp: w = s * u + m per 16
// elements) against int8 activations, a register tile of kGemmRows rows x kGemmToks tokens running
// vpdpbusd, each loaded weight vector reused by every token of the tile and each activation vector
// by every row. AVX-512 (64 bytes per step) when the level has it, else AVX2: with VNNI, or
// vpmaddubsw + vpmaddwd (dot_u8s8), exact for weight bytes up to 127 (kMaxU; not q8_0's form).
// The K form's types (K-quants, i-quants against Q8_K) take the grouped 8-row tile further down
// instead (without VNNI those without mins the signed-offset K form's, tile_ks), and without VNNI
// q8_0 / IQ4_NL the signed one, IQ4_XS the signed K one.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// Every loop over the tile's rows and tokens is unrolled: its accumulators then live in registers.
// g++ -O2 (a user's plain build) left them as arrays in memory, and the tile ran at half speed.
#define EDGELLM_GEMM_UNROLL _Pragma("GCC unroll 8")


#if EDGELLM_X86_AVX512VNNI
// 64 bytes per step: the 16 int32 lanes are 16 groups of 4 weights.
struct GemmVec {
  using I = __m512i;
  using F = __m512;
  static constexpr int kBytes = 64;
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F zero() { return _mm512_setzero_ps(); }
  static I dot(I u, I s) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static float sum(F a) { return _mm512_reduce_add_ps(a); }
};
#else
struct GemmVec {
  using I = __m256i;
  using F = __m256;
  static constexpr int kBytes = 32;
  static I load(const void* p) { return load256(p); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static F zero() { return _mm256_setzero_ps(); }
  static I dot(I u, I s) { return dot_u8s8(u, s); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static float sum(F a) { return hsum(a); }
};
#endif

// Register tile: 4 x 4 accumulators plus the loaded vectors fit the 32 AVX-512 registers; AVX2 has
// 16, so 2 rows there.
inline constexpr int kGemmRows = kAvx512 ? 4 : 2;
inline constexpr int kGemmToks = 4;
inline constexpr int kMaxU = kVnni ? 255 : 127;

// The offsets' share of a tile, sum over groups of m_w * (activation scale * sum of its quants),
// for every row and token: R x C independent fma chains (one chain per pair in turn waited on the
// fma latency for as long as the whole integer loop took).
template <int R, int C>
inline void tile_offsets(int64_t n, const U8GemmRow* w, const U8GemmRow* a, __m256 (&mo)[R][C]) {
  EDGELLM_GEMM_UNROLL
  for (int r = 0; r < R; ++r)
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) mo[r][c] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n / 16; g += 8) {
    __m256 am[C];
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) am[c] = _mm256_loadu_ps(a[c].m + g);
    EDGELLM_GEMM_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m256 wm = _mm256_loadu_ps(w[r].m + g);
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) mo[r][c] = _mm256_fmadd_ps(wm, am[c], mo[r][c]);
    }
  }
}

// out[c * out_stride + r] = dot(weight row r, activation row c) for a full kGemmRows x kGemmToks
// tile; n % 128 == 0. w / a: the rows' GEMM forms.
inline void gemm_u8_tile(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  using V = GemmVec;
  constexpr int R = kGemmRows, C = kGemmToks;
  typename V::F acc[R][C];
  EDGELLM_GEMM_UNROLL
  for (int r = 0; r < R; ++r)
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = V::zero();
  for (int64_t k = 0; k < n; k += V::kBytes) {
    typename V::I y[C];
    typename V::F dy[C];
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) {
      y[c] = V::load(a[c].u + k);
      dy[c] = V::loadf(a[c].sv + k / 4);
    }
    EDGELLM_GEMM_UNROLL
    for (int r = 0; r < R; ++r) {
      const typename V::I u = V::load(w[r].u + k);
      const typename V::F s = V::loadf(w[r].sv + k / 4);
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = V::fma(V::mul(V::cvt(V::dot(u, y[c])), dy[c]), s, acc[r][c]);
    }
  }
  __m256 mo[R][C];
  tile_offsets(n, w, a, mo);
  EDGELLM_GEMM_UNROLL
  for (int r = 0; r < R; ++r)
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) out[size_t(c) * out_stride + size_t(r)] = V::sum(acc[r][c]) + hsum(mo[r][c]);
}

// u8_gemm_interleave_ref by an 8 x 8 transpose of 4-byte words per 32 bytes of the 8 rows.
inline void u8_interleave(const uint8_t* src, size_t stride, int64_t n, uint8_t* out) {
  static_assert(kGroupRows == 8, "8 rows of 4-byte words per step");
  for (int64_t j = 0; j < n; j += 32) {
    __m256i r[8];
    EDGELLM_GEMM_UNROLL
    for (int i = 0; i < 8; ++i) r[i] = load256(src + size_t(i) * stride + j);  // row i, steps j/4 .. j/4 + 7
    __m256i t[8], u[8];
    EDGELLM_GEMM_UNROLL
    for (int i = 0; i < 4; ++i) {  // rows 2i, 2i + 1: steps (0 1 | 4 5) and (2 3 | 6 7)
      t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    EDGELLM_GEMM_UNROLL
    for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3: u[4h + s] holds steps s | s + 4
      u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
      u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
      u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    uint8_t* o = out + j * 8;
    EDGELLM_GEMM_UNROLL
    for (int s = 0; s < 4; ++s) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * s), _mm256_permute2x128_si256(u[s], u[4 + s], 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32 * (s + 4)), _mm256_permute2x128_si256(u[s], u[4 + s], 0x31));
    }
  }
}

// The grouped tiles' vectors, GemmVec's width: 32 bytes hold one group (8 rows, a lane each); at
// the AVX-512 VNNI level 64 bytes hold two groups side by side, the 16 rows of one register tile
// (groups g[0] and g[1]; the driver lays them out kGroupRows GEMM rows apart).
// The two forms are partial specialisations on the width (V, the base, a template parameter), so
// that only the level's own form is compiled.
template <int kBytes, class V = GemmVec>
struct KGroupsOf;
template <class V>
struct KGroupsOf<64, V> : V {
  using I = typename V::I;
  using F = typename V::F;
  static constexpr int kGroups = 2;
  // 32 bytes at off of each group.
  static I load(const uint8_t* const* g, size_t off) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256(g[0] + off)), load256(g[1] + off), 1);
  }
  static I idot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static F loadf(const uint8_t* const* g, size_t off) { return _mm512_castsi512_ps(load(g, off)); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I high16(I a) { return _mm512_srai_epi32(a, 16); }
  static F fset1(float v) { return _mm512_set1_ps(v); }
  static void store(float* p, F a) { _mm512_storeu_ps(p, a); }
};
template <class V>
struct KGroupsOf<32, V> : V {
  using I = typename V::I;
  using F = typename V::F;
  static constexpr int kGroups = 1;
  static I load(const uint8_t* const* g, size_t off) { return load256(g[0] + off); }
  static I idot(I acc, I u, I s) { return dot_u8s8_acc(acc, u, s); }
  static F loadf(const uint8_t* const* g, size_t off) { return _mm256_castsi256_ps(load(g, off)); }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I high16(I a) { return _mm256_srai_epi32(a, 16); }
  static F fset1(float v) { return _mm256_set1_ps(v); }
  static void store(float* p, F a) { _mm256_storeu_ps(p, a); }
};
using KGroups = KGroupsOf<GemmVec::kBytes>;
// Rows of the grouped tiles (U8GemmKernel::group_rows).
inline constexpr int kGroupTileRows = KGroups::kGroups * kGroupRows;

// The K form's tile (KernelTable::u8_gemm.tile_k: K-quant and i-quant weights against Q8_K), where
// the float tile above pays per 4 weights and token a convert and two float multiplies after the
// integer dot: kGroupTileRows rows x kGemmToks tokens over one or two interleaved groups
// (unpack_u8.hpp), a lane per row. This loop is the VNNI levels': per 4 weights and token one
// vpdpbusd (u up to 255: IQ4_XS takes this form there) into the 16 weights' sum, the token's 4 bytes
// broadcast, then per 16 weights and token one vpmulld by the rows' scales and an add; on AVX-512
// for 16 rows at once (TinyLlama IQ3_S pp512 on one Zen 5 thread: 14.2 s of CPU with 8 rows, 8.7 s
// with 16 and unpack_u8.hpp's 64-bit IQ3_S unpacking). gemm_u8_tile_k_avx2 below is the levels'
// without VNNI. Either way a super-block sums in int32 (|sum| < 2^28: 256 x 240 x 127 x 32 for
// IQ4_XS), then per super-block and token one float fma by d_w * d_a, and per 16 weights one fma of
// the rows' offsets m_w by the token's m_a, for all rows at once. n % 256 == 0.
// V a template parameter so that the loop is compiled only in the levels that call it.
template <class V = KGroups>
inline void gemm_u8_tile_k_vnni(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  constexpr int C = kGemmToks;
  const uint8_t* grp[V::kGroups];
  for (int i = 0; i < V::kGroups; ++i) grp[i] = w[i * kGroupRows].u;
  const U8GroupLayout at(U8Form::KScales, n);
  // Per 16 weights 32 bytes of each section: (sc, sc) pairs, m; per 256, d.
  const auto sc_at = [&](int64_t g) { return at.sc + size_t(g) * 32; };
  const auto m_at = [&](int64_t g) { return at.m + size_t(g) * 32; };
  typename V::F acc[C];
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) acc[c] = V::zero();
  for (int64_t sb = 0; sb < n / 256; ++sb) {
    typename V::I isum[C];
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) isum[c] = V::set1(0);
#pragma GCC unroll 1
    for (int64_t g = sb * 16; g < sb * 16 + 16; ++g) {
      const typename V::I s = V::high16(V::load(grp, sc_at(g)));  // the pair's high half: sc in int32
      typename V::I p[C];
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) p[c] = V::set1(0);
      EDGELLM_GEMM_UNROLL
      for (int k = 0; k < 4; ++k) {
        const typename V::I v = V::load(grp, size_t(g * 4 + k) * 32);
        EDGELLM_GEMM_UNROLL
        for (int c = 0; c < C; ++c) p[c] = V::idot(p[c], v, V::set1(load_i32(a[c].u + g * 16 + 4 * k)));
      }
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) isum[c] = V::add(isum[c], V::mullo(p[c], s));
    }
    const typename V::F d = V::loadf(grp, at.d + size_t(sb) * 32);
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) acc[c] = V::fma(V::cvt(isum[c]), V::mul(d, V::fset1(a[c].d[sb])), acc[c]);
#pragma GCC unroll 4
    for (int64_t g = sb * 16; g < sb * 16 + 16; ++g) {
      const typename V::F m = V::loadf(grp, m_at(g));
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) acc[c] = V::fma(m, V::fset1(a[c].m[g]), acc[c]);
    }
  }
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) V::store(out + size_t(c) * out_stride, acc[c]);
}
// Without VNNI (AVX2, one group of 8 rows) the K form's tile below. Per 4 weights and token:
// vpmaddubsw (u x s8 pairs, below 2^15 since u <= 127 = max_u), vpmaddwd by the rows' int16 group
// scales and an add. kNarrow (tile_k_narrow): bytes u <= kNarrowMaxU (IQ3_S's 30, IQ1, TQ, Q2_K ..
// Q5_K), so a 16-weight group's four vpmaddubsw results add in int16 (|sum| <= 4 x 2 x 31 x 128 =
// 31744 < 2^15) before one vpmaddwd by the scales: per 16 weights and token 4 + 1 multiplies and
// 4 adds instead of 4 + 4 and 4.
// Per 16 weights and token the tile broadcasts the token's 16 activation bytes with one 128-bit
// load and takes each 4 of them to every lane with vpshufd, where a vpbroadcastd per 4 (as in the
// VNNI loop above) makes 16 loads instead of 4 per 16 weights of 4 tokens. Zen 3 runs out of loads
// (about 1.6 a cycle) before its two multiply pipes, and vpshufd takes an idle shuffle pipe. The
// products and their order are those of the vpbroadcastd form it replaced (same bits). Zen 3, one
// thread, each tile alone in L1, four interleaved rounds: narrow 40-43 GMAC/s with vpbroadcastd,
// 45-52 this way; tile_k 33-38 -> 38-42. A function of its own: as a branch of the VNNI loop above,
// g++ allocated registers worse and the gain was lost. (The signed tiles and packed-inl.hpp's token
// tiles, tried the same way, were not faster.)
inline constexpr int kNarrowMaxU = 31;
inline __m256i bcast16(const void* p) { return _mm256_broadcastsi128_si256(load128(p)); }
template <int k>
inline __m256i quads(__m256i x16) {  // bytes 4k .. 4k + 3 of each 16-byte half in every lane
  return _mm256_shuffle_epi32(x16, k * 0x55);
}
// Weights 4k .. 4k + 3 of a 16-weight group (the vector at qg + 32k) for every token of the tile;
// kSignedW (the signed-offset K form): the weights are the signed operand, the activations (made
// a + 128) the unsigned one.
template <int k, bool kSignedW, int C>
inline void tile_k_avx2_step(const uint8_t* qg, const __m256i (&x)[C], __m256i s, __m256i (&isum)[C]) {
  const __m256i v = load256(qg + 32 * k);
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c)
    isum[c] = _mm256_add_epi32(isum[c], kSignedW ? dot_u8s8_scaled(quads<k>(x[c]), v, s) : dot_u8s8_scaled(v, quads<k>(x[c]), s));
}
// kSignedW: the signed-offset K form (tile_ks, unpack_u8.hpp): int8 weights |w| <= kSignedMaxW
// (kNarrow: kSignedNarrowMaxW) against the activations' bytes a + 128 (the driver biases the rows
// once, u8_gemm_bias_act: a vpxor here per 16 bytes and token cost the narrow tile about 10 %), so
// a pair of products is at most 2 x 255 x 64 = 32640 (a narrow group's four pairs 4 x 2 x 255 x 16
// = 32640) < 2^15; per super-block and token the rows' correction c subtracted from the int32
// sums, and no offsets loop (K form: per 16 weights and token a broadcast and an fma).
// (Helpers, not lambdas: a lambda does not take the level's target attributes in the dispatch build.)
// A 4-byte step's products: weights v against a token's bytes xq.
template <bool kSignedW>
inline __m256i tile_k_mul(__m256i v, __m256i xq) {
  return kSignedW ? _mm256_maddubs_epi16(xq, v) : _mm256_maddubs_epi16(v, xq);
}
template <bool kNarrow, bool kSignedW = false>
inline void gemm_u8_tile_k_avx2(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  constexpr int C = kGemmToks;
  const uint8_t* q = w[0].u;
  const U8GroupLayout at(kSignedW ? U8Form::KSigned : U8Form::KScales, n);
  __m256 acc[C];
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < n / 256; ++sb) {
    __m256i isum[C];
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int64_t g = sb * 16; g < sb * 16 + 16; ++g) {
      const __m256i s = load256(q + at.sc + size_t(g) * 32);
      const uint8_t* qg = q + size_t(g) * 128;
      if constexpr (kNarrow) {  // the group's 4 vectors held; per token 4 vpmaddubsw summed in int16, one vpmaddwd
        const __m256i v0 = load256(qg), v1 = load256(qg + 32), v2 = load256(qg + 64), v3 = load256(qg + 96);
        EDGELLM_GEMM_UNROLL
        for (int c = 0; c < C; ++c) {
          const __m256i x = bcast16(a[c].u + g * 16);  // the token's 16 bytes of group g in both halves
          __m256i p = tile_k_mul<kSignedW>(v0, quads<0>(x));
          p = _mm256_add_epi16(p, tile_k_mul<kSignedW>(v1, quads<1>(x)));
          p = _mm256_add_epi16(p, tile_k_mul<kSignedW>(v2, quads<2>(x)));
          p = _mm256_add_epi16(p, tile_k_mul<kSignedW>(v3, quads<3>(x)));
          isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, s));
        }
      } else {  // per 4 weights and token a vpmaddubsw, a vpmaddwd and an add
        __m256i x[C];
        EDGELLM_GEMM_UNROLL
        for (int c = 0; c < C; ++c) x[c] = bcast16(a[c].u + g * 16);
        tile_k_avx2_step<0, kSignedW>(qg, x, s, isum);
        tile_k_avx2_step<1, kSignedW>(qg, x, s, isum);
        tile_k_avx2_step<2, kSignedW>(qg, x, s, isum);
        tile_k_avx2_step<3, kSignedW>(qg, x, s, isum);
      }
    }
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(q + at.d + size_t(sb) * 32));
    if constexpr (kSignedW) {
      const __m256i corr = load256(q + at.m + size_t(sb) * 32);
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) isum[c] = _mm256_sub_epi32(isum[c], corr);
    }
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c)
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, _mm256_set1_ps(a[c].d[sb])), acc[c]);
    if constexpr (kSignedW) continue;
#pragma GCC unroll 4
    for (int64_t g = sb * 16; g < sb * 16 + 16; ++g) {
      const __m256 m = _mm256_loadu_ps(reinterpret_cast<const float*>(q + at.m + size_t(g) * 32));
      EDGELLM_GEMM_UNROLL
      for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(m, _mm256_set1_ps(a[c].m[g]), acc[c]);
    }
  }
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + size_t(c) * out_stride, acc[c]);
}
inline void gemm_u8_tile_k(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  if constexpr (kVnni) gemm_u8_tile_k_vnni(n, w, a, out, out_stride);
  else gemm_u8_tile_k_avx2<false>(n, w, a, out, out_stride);
}
// With VNNI the same loop: vpdpbusd has no int16 step to narrow.
inline void gemm_u8_tile_k_narrow(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  if constexpr (kVnni) gemm_u8_tile_k_vnni(n, w, a, out, out_stride);
  else gemm_u8_tile_k_avx2<true>(n, w, a, out, out_stride);
}
// The signed-offset K form's tiles (levels without VNNI only).
inline constexpr int kSignedMaxW = 64, kSignedNarrowMaxW = 16;
inline void gemm_u8_tile_ks(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  gemm_u8_tile_k_avx2<false, true>(n, w, a, out, out_stride);
}
inline void gemm_u8_tile_ks_narrow(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  gemm_u8_tile_k_avx2<true, true>(n, w, a, out, out_stride);
}
// The signed forms' tile for levels without VNNI: kGroupRows rows x kGemmToks tokens. One 32-byte
// load holds 4 weights of each of the 8 interleaved rows (unpack_u8.hpp), so every lane is a row
// and a token's 4 activation bytes are broadcast: per 4 weights and token, |w| x (a with w's sign)
// by vpmaddubsw (pairs of at most 2 * 128 * 127 < 2^15), vpmaddwd and an add (four operations for
// 8 rows), and no horizontal sum at the end.
// - kIntScales false, the signed form (tile_s8: q8_0 and IQ4_NL, whose bytes shifted by 128 would
//   saturate vpmaddubsw): vpmaddwd by ones; per 32 weights and token one convert and fma by
//   d_w * d_a for the 8 rows. n % 32 == 0.
// - kIntScales true, the signed K form (tile_sk: IQ4_XS against Q8_K, bytes up to 240 once
//   shifted): vpmaddwd by the block's integer scale ls - 32 instead of ones, so no float work per
//   32: the int32 sums run over the super-block (|sum| <= 256 x 127 x 128 x 32 < 2^28), then one
//   convert and fma by d_w * d_a per super-block and token. n % 256 == 0.
template <bool kIntScales>
inline void gemm_u8_tile_signed(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  constexpr int G = kGroupRows, C = kGemmToks;
  constexpr int64_t kSpan = kIntScales ? 256 : 32;  // weights per float scale
  const uint8_t* q = w[0].u;
  const U8GroupLayout at(kIntScales ? U8Form::SignedK : U8Form::Signed, n);
  const float* dw = reinterpret_cast<const float*>(q + at.d);
  __m256 acc[C];
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
  for (int64_t sp = 0; sp < n / kSpan; ++sp) {
    __m256i isum[C];
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) isum[c] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int64_t b = sp * (kSpan / 32); b < (sp + 1) * (kSpan / 32); ++b) {
      const __m256i s = kIntScales ? load256(q + at.sc + size_t(b) * 32) : _mm256_set1_epi16(1);
      const uint8_t* qb = q + size_t(b) * 32 * G;
#pragma GCC unroll 2  // unrolled fully, g++ summed the 32 products of a block as a tree and spilled them
      for (int k = 0; k < 8; ++k) {
        const __m256i v = load256(qb + 32 * k), va = _mm256_abs_epi8(v);
        EDGELLM_GEMM_UNROLL
        for (int c = 0; c < C; ++c)
          isum[c] = _mm256_add_epi32(
              isum[c], dot_u8s8_scaled(va, _mm256_sign_epi8(_mm256_set1_epi32(load_i32(a[c].u + b * 32 + 4 * k)), v), s));
      }
    }
    const __m256 d = _mm256_loadu_ps(dw + sp * G);
    EDGELLM_GEMM_UNROLL
    for (int c = 0; c < C; ++c) {
      const float da = kIntScales ? a[c].d[sp] : a[c].sv[sp * 8];
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_mul_ps(d, _mm256_set1_ps(da)), acc[c]);
    }
  }
  static_assert(G == 8, "one float vector holds the group's rows");
  EDGELLM_GEMM_UNROLL
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + size_t(c) * out_stride, acc[c]);
}
inline void gemm_u8_tile_s8(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  gemm_u8_tile_signed<false>(n, w, a, out, out_stride);
}
inline void gemm_u8_tile_sk(int64_t n, const U8GemmRow* w, const U8GemmRow* a, float* out, size_t out_stride) {
  gemm_u8_tile_signed<true>(n, w, a, out, out_stride);
}


#undef EDGELLM_GEMM_UNROLL
