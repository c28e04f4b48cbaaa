// x86 kernels of the transcoded i-quant forms (kernels/layouts/transcoded_iquants.hpp), the
// PackedFormats of the resident IQ3_S, IQ3_XXS (nibble forms), IQ2_XXS, IQ2_XS, IQ2_S (3-bit forms),
// IQ1_S, IQ1_M and TQ1_0 matrices at every level:
// one row a group, the row's blocks in order. Per 32-weight vector they make, with a shift, a mask
// and a byte shuffle instead of 4 or 8 grid loads, exactly the magnitude bytes, signed activation
// and int16 scales of the file form's kernel (FmtIQ3_S, FmtIQ2_XXS, FmtIQ2_XS, FmtIQ2_S, FmtIQ3_XXS
// in dot_iquants-inl.hpp), so the int32 lanes are its lanes; the blocks' float steps (iq_finish,
// two accumulators by block parity, one horizontal sum) are dot_row's: decode equals vec_dot bit
// for bit, and so does the GEMM of a few tokens (each block decoded once for a tile of tokens).
// From 4 tokens prefill takes the u8 GEMM (unpack_u8). (IQ4_XS and IQ4_NL are interleaved across
// rows instead: kernels/x86/packed-inl.hpp.)
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// A block's int16 scales 2s + 1 under vector k's weights (at<k>()): a 4-bit scale s per 32 weights
// (nibble k % 2 of scales[k / 2]), or per 16 (NibScales16: scales 2k and 2k + 1 under the
// vector's weights 0..15 and 16..31), as the file forms' kernels apply them.
// Once a block the nibbles become odd bytes 2s + 1, nibble i at byte i of both 128-bit halves: a
// broadcast load, a shift, an unpack, a mask and a table shuffle (odd_scale_bytes256: the 256-bit
// twin of dot_iquants-inl.hpp's odd_scale_bytes, same byte order). A vector's int16 scales are then
// one in-lane byte shuffle that puts a zero byte (index bit 7) above each. (Widening the bytes to
// int16 once a block, as GroupScales16 does for the file forms, took about 5 more instructions a
// block: IQ2_XXS rows of 2048 weights in L1, one Zen 3 thread, decode 4-7 % faster this way.)
inline __m256i odd_scale_bytes256(__m256i b) {
  const __m256i n = _mm256_and_si256(_mm256_unpacklo_epi8(b, _mm256_srli_epi16(b, 4)), _mm256_set1_epi8(0x0F));
  const __m256i odd = _mm256_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 1, 3, 5, 7, 9, 11, 13,
                                       15, 17, 19, 21, 23, 25, 27, 29, 31);
  return _mm256_shuffle_epi8(odd, n);
}
struct NibScales32 {
  __m256i odd;
  template <class Block>
  explicit NibScales32(const Block& x) : odd(odd_scale_bytes256(_mm256_set1_epi32(load_i32(x.scales)))) {}
  template <int k>
  __m256i at() const {  // int16 lanes 2 s_k + 1: byte k, then a zero byte (index bit 7)
    return _mm256_shuffle_epi8(odd, _mm256_set1_epi16(short(k | 0x8000)));
  }
};
struct NibScales16 {
  __m256i odd;
  template <class Block>
  explicit NibScales16(const Block& x) : odd(odd_scale_bytes256(_mm256_set1_epi64x(int64_t(load_u64(x.scales))))) {}
  template <int k>
  __m256i at() const {  // scale 2k under the vector's weights 0..15 (low 128 bits), 2k + 1 under 16..31
    constexpr short lo = short((2 * k) | 0x8000), hi = short((2 * k + 1) | 0x8000);
    return _mm256_shuffle_epi8(odd, _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi));
  }
};

// The nibble forms' weights by nibble (bit 3: negative), the byte table of a shuffle; the scales;
// the file form kernel's constant factor.
struct NibIQ3_S {
  using Block = block_iq3_s_t;
  using Scales = NibScales32;
  static constexpr float kMul = 1.0f;  // FmtIQ3_S: d * y.d
  static __m256i table() {
    return _mm256_setr_epi8(1, 3, 5, 7, 9, 11, 13, 15, -1, -3, -5, -7, -9, -11, -13, -15, 1, 3, 5, 7, 9, 11, 13, 15, -1,
                            -3, -5, -7, -9, -11, -13, -15);
  }
};
struct NibIQ3_XXS {
  using Block = block_iq3_xxs_t;
  using Scales = NibScales32;
  static constexpr float kMul = 0.25f;  // FmtIQ3_XXS: 0.25f * d * y.d
  static __m256i table() {
    return _mm256_setr_epi8(4, 12, 20, 28, 36, 44, 52, 62, -4, -12, -20, -28, -36, -44, -52, -62, 4, 12, 20, 28, 36, 44,
                            52, 62, -4, -12, -20, -28, -36, -44, -52, -62);
  }
};

// The signed weight bytes w of the activations' bytes off .. off + 31 for T tokens: isum[t] += the
// file forms' |w| * (y with w's signs), pairs scaled by s16's int16 lanes.
template <int T>
inline void signed_dot_tokens(__m256i w, const block_q8_K* const (&y)[T], int64_t b, int off, __m256i s16,
                              __m256i (&isum)[T]) {
  const __m256i mag = _mm256_abs_epi8(w);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
    isum[t] = _mm256_add_epi32(isum[t], dot_u8s8_scaled(mag, _mm256_sign_epi8(load256(y[t][b].qs + off), w), s16));
}

// Block b of a row for T tokens (activation rows y[t]), each vector decoded once: Fmt::vectors's
// int32 sums, then acc[t] gets the file form's step, Fmt::kMul * d * y.d. The integer sums' order
// differs from the file form's, their values do not.
template <class Fmt>
struct TokenBlocks {
  template <int T, class Block>
  static void block_tokens(const Block& x, const block_q8_K* const (&y)[T], int64_t b, __m256 (&acc)[T]) {
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    Fmt::template vectors<T>(x, y, b, isum, std::make_index_sequence<QK_K / 32>{});
    const float dx = Fmt::kMul * fp16_to_fp32(x.d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = iq_finish(isum[t], dx * y[t][b].d, acc[t]);
  }
};

// A nibble form (iq3_s_t, iq3_xxs_t), a block for T tokens at once.
template <class Nib>
struct FmtNibble : BlockFmt<typename Nib::Block, block_q8_K, QK_K>, TokenBlocks<FmtNibble<Nib>> {
  using Block = typename Nib::Block;
  using ActBlock = block_q8_K;
  // Vector k of block b for T tokens: isum[t] += its scaled sums.
  template <int T, int k>
  static void vec_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, const typename Nib::Scales& sc,
                         __m256i table, __m256i (&isum)[T]) {
    signed_dot_tokens<T>(_mm256_shuffle_epi8(table, nibbles_to_bytes32(x.qs + 16 * k)), y, b, 32 * k, sc.template at<k>(),
                         isum);
  }
  template <int T, size_t... K>
  static void vectors(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i (&isum)[T],
                      std::index_sequence<K...>) {
    const typename Nib::Scales sc(x);
    const __m256i table = Nib::table();
    (vec_tokens<T, int(K)>(x, y, b, sc, table, isum), ...);
  }
  static constexpr float kMul = Nib::kMul;
};

// The 3-bit forms (iq2_xxs_t3, iq2_xs_t3, iq2_s_t3): per block two loads of codes and one of signs;
// vector k's magnitudes are its codes (a mask, and a shift per two vectors) through a byte shuffle,
// its signs the top bits of the sign load doubled 7 - k times, or'ed with 1 (a +-1 byte for the
// activations' sign). Shifts and shuffles share two ports on Zen 3, so the work goes to the others.
// The magnitude bytes, signed activations and int16 scales are those of the file forms' kernels
// (FmtIQ2_XXS, FmtIQ2_XS, FmtIQ2_S), and so are the int32 lanes.
template <class Block_, class Scales>
struct FmtIQ2T3 : BlockFmt<Block_, block_q8_K, QK_K>, TokenBlocks<FmtIQ2T3<Block_, Scales>> {
  using Block = Block_;
  using ActBlock = block_q8_K;
  template <int T, int k>
  static void vec_tokens(const ActBlock* const (&y)[T], int64_t b, const Scales& sc, __m256i table, __m256i codes,
                         __m256i signs, __m256i (&isum)[T]) {
    // codes 2l, 2l + 1 (l = k % 4) of each byte: bits 0..1 or 2..3 of the load (l < 2) or of it
    // shifted right by 4 (one shift for two vectors), masked; the table reads 0, 1, 2 and 0, 4, 8
    const __m256i nib = k % 4 < 2 ? codes : _mm256_srli_epi16(codes, 4);
    const __m256i mag = _mm256_shuffle_epi8(table, _mm256_and_si256(nib, _mm256_set1_epi8(char(k % 2 ? 0x0C : 0x03))));
    const __m256i sign = _mm256_or_si256(signs, _mm256_set1_epi8(1));  // +-1: the sign is bit 7
    const __m256i s16 = sc.template at<k>();
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_add_epi32(isum[t], dot_u8s8_scaled(mag, _mm256_sign_epi8(load256(y[t][b].qs + 32 * k), sign), s16));
  }
  template <int T, size_t... K>
  static void vectors(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i (&isum)[T],
                      std::index_sequence<K...>) {
    const Scales sc(x);
    const __m256i table = _mm256_setr_epi8(8, 25, 43, 0, 25, 0, 0, 0, 43, 0, 0, 0, 0, 0, 0, 0, 8, 25, 43, 0, 25, 0, 0, 0,
                                           43, 0, 0, 0, 0, 0, 0, 0);  // codes 0..2 and 4 x codes
    const __m256i c0 = load256(x.qs), c1 = load256(x.qs + 32);
    // vectors 7, 6, .. 0: the sign bits of vector k are bit 7 of each byte after 7 - k doublings
    // (a byte add, which the shuffle ports do not take)
    __m256i signs = load256(x.signs);
    ((vec_tokens<T, 7 - int(K)>(y, b, sc, table, 7 - K < 4 ? c0 : c1, signs, isum), signs = _mm256_add_epi8(signs, signs)),
     ...);
  }
  static constexpr float kMul = 0.125f;  // FmtIQ2_XXS, FmtIQ2_XS, FmtIQ2_S: 0.125f * d * y.d
};

// iq1_s_t and iq1_m_t: vector k's 2-bit codes u = q + 1 (bits 2 (k % 4) of the 32 bytes of chunk
// k / 4, as TQ2_0) are one load, a shift and a mask; 8u is one more shift (u <= 2: no bit leaves
// its byte). The file form's weight bytes follow with an add: FmtIQ1_S's signed 8q +- 1 = 8u - 8 +- 1
// (then its |w| * (y with w's sign)), FmtIQ1_M's unsigned 8q +- 1 + 9 = 8u + 2 or 8u (its 9 * the
// scaled group sums of y subtracted once a block), so the int32 lanes are the file kernel's and its
// float step, 0.125 * d * y.d, follows.
template <int k>
inline __m256i ternary_x8(const uint8_t* qs) {
  const __m256i u = _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (k / 4)), 2 * (k % 4)), _mm256_set1_epi8(3));
  return _mm256_slli_epi16(u, 3);
}
struct FmtIQ1S_T : BlockFmt<block_iq1_s_t, block_q8_K, QK_K>, TokenBlocks<FmtIQ1S_T> {
  template <int T, int k>
  static void vec_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, uint32_t sd, __m256i (&isum)[T]) {
    const uint32_t nib = (sd >> (4 * k)) & 15;  // scale in bits 0..2, bit 3: the shift is negative
    const __m256i w = _mm256_add_epi8(ternary_x8<k>(x.qs), _mm256_set1_epi8(char(nib & 8 ? -9 : -7)));
    signed_dot_tokens<T>(w, y, b, 32 * k, _mm256_set1_epi16(short(2 * (nib & 7) + 1)), isum);
  }
  template <int T, size_t... K>
  static void vectors(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i (&isum)[T],
                      std::index_sequence<K...>) {
    uint32_t sd;
    std::memcpy(&sd, x.sd, 4);
    (vec_tokens<T, int(K)>(x, y, b, sd, isum), ...);
  }
  static constexpr float kMul = 0.125f;  // FmtIQ1_S: 0.125f * d * y.d
};
struct FmtIQ1M_T : BlockFmt<block_iq1_m_t, block_q8_K, QK_K> {
  template <int T, int k>
  static void vec_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i neg, const GroupScales16& ls,
                         __m256i (&isum)[T]) {
    // bit 4k + j of neg (group j of the vector, its bytes 8j .. 8j + 7) -> 0xFF bytes where set
    constexpr uint32_t b0 = 1u << (4 * k), b1 = b0 << 1, b2 = b0 << 2, b3 = b0 << 3;
    const __m256i bit = _mm256_setr_epi32(int(b0), int(b0), int(b1), int(b1), int(b2), int(b2), int(b3), int(b3));
    const __m256i negative = _mm256_cmpeq_epi32(_mm256_and_si256(neg, bit), bit);
    const __m256i u = _mm256_add_epi8(ternary_x8<k>(x.qs), _mm256_andnot_si256(negative, _mm256_set1_epi8(2)));
    const __m256i s16 = ls.template pair<k>();
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_add_epi32(isum[t], dot_u8s8_scaled(u, load256(y[t][b].qs + 32 * k), s16));
  }
  template <int T, size_t... K>
  static void vectors(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i (&isum)[T], __m128i sc8,
                      std::index_sequence<K...>) {
    uint32_t n32;
    std::memcpy(&n32, x.neg, 4);
    const __m256i neg = _mm256_set1_epi32(int(n32));
    const GroupScales16 ls(sc8);
    (vec_tokens<T, int(K)>(x, y, b, neg, ls, isum), ...);
  }
  template <int T>
  static void block_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256 (&acc)[T]) {
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    const __m128i sc8 = odd_scale_bytes(load_u64(x.scales));
    vectors<T>(x, y, b, isum, sc8, std::make_index_sequence<QK_K / 32>{});
    const float dx = 0.125f * fp16_to_fp32(x.d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      acc[t] = iq_finish(_mm256_sub_epi32(isum[t], FmtIQ1_M::offset(y[t][b], sc8)), dx * y[t][b].d, acc[t]);
  }
};

// T tokens (from t0) of one transcoded row: out[t * out_stride], dot_row's float order per token.
template <class Fmt, int T>
void transcoded_tile(int64_t nb, const typename Fmt::Block* x, const void* act, int t0, float* out, size_t out_stride) {
  using A = typename Fmt::ActBlock;
  const A* y[T];
  __m256 acc0[T], acc1[T];
  for (int t = 0; t < T; ++t) {
    y[t] = static_cast<const A*>(act) + size_t(t0 + t) * size_t(nb);
    acc0[t] = acc1[t] = _mm256_setzero_ps();
  }
  constexpr size_t kB = sizeof(typename Fmt::Block);
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    prefetch_ahead(x + b, 2 * kB);
    Fmt::template block_tokens<T>(x[b], y, b, acc0);
    Fmt::template block_tokens<T>(x[b + 1], y, b + 1, acc1);
  }
  if (b < nb) Fmt::template block_tokens<T>(x[b], y, b, acc0);
  for (int t = 0; t < T; ++t) out[size_t(t0 + t) * out_stride] = hsum(_mm256_add_ps(acc0[t], acc1[t]));
}

template <class Fmt, int T>
void transcoded_tail(int n, int64_t nb, const typename Fmt::Block* x, const void* act, int t0, float* out,
                     size_t out_stride) {
  if constexpr (T > 0) {
    if (n == T) transcoded_tile<Fmt, T>(nb, x, act, t0, out, out_stride);
    else transcoded_tail<Fmt, T - 1>(n, nb, x, act, t0, out, out_stride);
  }
}

// Tokens per prefill tile: T x 2 float accumulators + T int sums + a decoded vector fit AVX2's 16
// registers with T = 2, AVX-512's 32 with T = 4.
inline constexpr int kTranscodedToks = kAvx512 ? 4 : 2;

// PackedFormat::gemm of a one-row group: tiles of kTranscodedToks tokens, then one of those left.
template <class Fmt>
void transcoded_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  const int64_t nb = n_in / Fmt::kBlock;
  const auto* x = static_cast<const typename Fmt::Block*>(group);
  int t0 = 0;
  for (; t0 + kTranscodedToks <= ntok; t0 += kTranscodedToks)
    transcoded_tile<Fmt, kTranscodedToks>(nb, x, act, t0, out, out_stride);
  transcoded_tail<Fmt, kTranscodedToks - 1>(ntok - t0, nb, x, act, t0, out, out_stride);
}

// The activation rows of the transcoded forms: Q8_K as vec_dot reads them (this level's quantizer).
inline void prepare_act_q8_K_rows(const float* x, int64_t n_in, void* dst) { quantize_row_q8_K(x, dst, n_in); }

// tq1_0_t (a TQ2_0 block made from each TQ1_0 block): FmtTQ2_0's decode, each 32-byte load's four
// crumb vectors taken once for T tokens; per token the exact integer block sum (the -1 through the
// activations' sum) and FmtTQ1_0's (= FmtTQ2_0's) float step, so transcoded_tile gives dot_row's.
// The int32 lanes converted to float are FmtTQ1_0's too, not only their sum: in both kernels (all
// levels) lane i holds the weights w with w % 32 in 4i .. 4i + 3 (activations loaded 32 at a time).
struct FmtTQ1_0_T : FmtTQ2_0 {
  template <int T>
  static void block_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256 (&acc)[T]) {
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 2; ++j) {
      const __m256i qv = load256(x.qs + 32 * j);
      const __m256i c[4] = {crumbs<0>(qv), crumbs<1>(qv), crumbs<2>(qv), crumbs<3>(qv)};
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l)
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[t] = dot_u8s8_acc(isum[t], c[l], load256(y[t][b].qs + 128 * j + 32 * l));
    }
    const float d = fp16_to_fp32(x.d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = iq_finish(_mm256_sub_epi32(isum[t], q8_K_sum(y[t][b])), d * y[t][b].d, acc[t]);
  }
};

inline void register_transcoded_iquants(KernelTable& t) {
  auto form = [&](DType type, const char* name, size_t (*group_bytes)(int64_t),
                  void (*pack)(const void*, size_t, int, int64_t, void*), PackedGemmFn gemm, UnpackRowU8Fn unpack) {
    PackedFormat f{1, name, group_bytes, pack, act_bytes_q8_K_rows, prepare_act_q8_K_rows, gemm};
    f.resident_only = true;
    f.unpack_u8 = unpack;
    t.packed_of(type) = f;
  };
  form(DType::IQ3_S, "iq3_s_t", FormIQ3_S_T::group_bytes, FormIQ3_S_T::pack, transcoded_gemm<FmtNibble<NibIQ3_S>>, unpack_u8_iq3_s_t);
  form(DType::IQ2_XXS, "iq2_xxs_t3", FormIQ2_XXS_T3::group_bytes, FormIQ2_XXS_T3::pack,
       transcoded_gemm<FmtIQ2T3<block_iq2_xxs_t3, NibScales32>>, unpack_u8_iq2_xxs_t3);
  form(DType::IQ2_XS, "iq2_xs_t3", FormIQ2_XS_T3::group_bytes, FormIQ2_XS_T3::pack,
       transcoded_gemm<FmtIQ2T3<block_iq2_xs_t3, NibScales16>>, unpack_u8_iq2_xs_t3);
  form(DType::IQ2_S, "iq2_s_t3", FormIQ2_S_T3::group_bytes, FormIQ2_S_T3::pack,
       transcoded_gemm<FmtIQ2T3<block_iq2_s_t3, NibScales16>>, unpack_u8_iq2_xs_t3);
  form(DType::IQ3_XXS, "iq3_xxs_t", FormIQ3_XXS_T::group_bytes, FormIQ3_XXS_T::pack,
       transcoded_gemm<FmtNibble<NibIQ3_XXS>>, unpack_u8_iq3_xxs_t);
  form(DType::IQ1_S, "iq1_s_t", FormIQ1_S_T::group_bytes, FormIQ1_S_T::pack, transcoded_gemm<FmtIQ1S_T>,
       unpack_u8_iq1_s_t);
  form(DType::IQ1_M, "iq1_m_t", FormIQ1_M_T::group_bytes, FormIQ1_M_T::pack, transcoded_gemm<FmtIQ1M_T>,
       unpack_u8_iq1_m_t);
  form(DType::TQ1_0, "tq1_0_t", FormTQ1_0_T::group_bytes, FormTQ1_0_T::pack, transcoded_gemm<FmtTQ1_0_T>,
       unpack_u8_tq1_0_t);
}
