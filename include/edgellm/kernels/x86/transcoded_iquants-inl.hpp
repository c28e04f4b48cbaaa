// x86 kernels of the transcoded i-quant forms (kernels/layouts/transcoded_iquants.hpp), the
// PackedFormats of the resident IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ4_XS matrices at every level:
// one row a group, the row's blocks in order. Per 32-weight vector they make, with a shift, a mask
// and a byte shuffle instead of 4 or 8 grid loads, exactly the magnitude bytes, signed activation
// and int16 scales of the file form's kernel (FmtIQ3_S, FmtIQ2_XXS, FmtIQ2_XS, FmtIQ2_S, FmtIQ3_XXS
// in dot_iquants-inl.hpp), so the int32 lanes are its lanes; the blocks' float steps (iq_finish,
// two accumulators by block parity, one horizontal sum) are dot_row's: decode equals vec_dot bit
// for bit, and so does the GEMM of a few tokens (each block decoded once for a tile of tokens).
// From 4 tokens prefill takes the u8 GEMM (unpack_u8). IQ4_XS's iq4_xs_t (the file's nibbles in
// chunk order, activations to match) differs: one scale vector a block, the integer block sum then
// dot_row<FmtIQ4_XS>'s float steps (iq4_xs_row), prefill from 4 tokens the u8 GEMM over the file's
// bytes read back (to_file_row).
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// A block's int16 scales 2s + 1 under vector k's weights (at<k>()): a 4-bit scale s per 32 weights
// (nibble k % 2 of scales[k / 2]), or per 16 (GroupScales16: scales 2k and 2k + 1 under the
// vector's weights 0..15 and 16..31), as the file forms' kernels apply them.
struct NibScales32 {
  const uint8_t* sc;
  template <class Block>
  explicit NibScales32(const Block& x) : sc(x.scales) {}
  template <int k>
  __m256i at() const { return _mm256_set1_epi16(short(2 * ((sc[k / 2] >> (4 * (k & 1))) & 15) + 1)); }
};
struct NibScales16 {
  GroupScales16 g;
  template <class Block>
  explicit NibScales16(const Block& x) : g(odd_scales16(x.scales)) {}
  template <int k>
  __m256i at() const { return g.template pair<k>(); }
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
struct NibIQ2_XXS {
  using Block = block_iq2_xxs_t;
  using Scales = NibScales32;
  static constexpr float kMul = 0.125f;  // FmtIQ2_XXS: 0.125f * d * y.d
  static __m256i table() {
    return _mm256_setr_epi8(8, 25, 43, 0, 0, 0, 0, 0, -8, -25, -43, 0, 0, 0, 0, 0, 8, 25, 43, 0, 0, 0, 0, 0, -8, -25,
                            -43, 0, 0, 0, 0, 0);
  }
};
// iq2_xs_t and iq2_s_t: IQ2's values, a scale per 16 (FmtIQ2_XS, FmtIQ2_S: 0.125f * d * y.d).
struct NibIQ2_XS : NibIQ2_XXS {
  using Block = block_iq2_xs_t;
  using Scales = NibScales16;
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

// A nibble form (iq3_s_t, iq2_xxs_t, iq2_xs_t, iq3_xxs_t), a block for T tokens at once.
template <class Nib>
struct FmtNibble : BlockFmt<typename Nib::Block, block_q8_K, QK_K> {
  using Block = typename Nib::Block;
  using ActBlock = block_q8_K;
  // Vector k of block b for T tokens: isum[t] += its scaled sums.
  template <int T, int k>
  static void vec_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, const typename Nib::Scales& sc,
                         __m256i table, __m256i (&isum)[T]) {
    const __m256i w = _mm256_shuffle_epi8(table, nibbles_to_bytes32(x.qs + 16 * k));
    const __m256i mag = _mm256_abs_epi8(w), s16 = sc.template at<k>();
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_add_epi32(isum[t], dot_u8s8_scaled(mag, _mm256_sign_epi8(load256(y[t][b].qs + 32 * k), w), s16));
  }
  template <int T, size_t... K>
  static void vectors(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256i (&isum)[T],
                      std::index_sequence<K...>) {
    const typename Nib::Scales sc(x);
    const __m256i table = Nib::table();
    (vec_tokens<T, int(K)>(x, y, b, sc, table, isum), ...);
  }
  // Block b of the row for T tokens (activation rows y[t]), each vector decoded once: acc[t] gets
  // the block's step. The integer sums' order differs from the file form's, their values do not.
  template <int T>
  static void block_tokens(const Block& x, const ActBlock* const (&y)[T], int64_t b, __m256 (&acc)[T]) {
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    vectors<T>(x, y, b, isum, std::make_index_sequence<QK_K / 32>{});
    const float dx = Nib::kMul * fp16_to_fp32(x.d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = iq_finish(isum[t], dx * y[t][b].d, acc[t]);
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

// iq4_xs_t (chunk order: kernels/layouts/transcoded_iquants.hpp): a 32-byte load's low and high
// nibbles are two chunks, each 32 weights of which int32 lane v (AVX-512: v and 8 + v) holds vector
// v's; the block's one scale vector multiplies the chunks' sums (VNNI: after the +128 form's dots,
// whose 128 * sum y share comes from the group sums; AVX2: in the int16 madd of |w| * signed y).
// The activation slot of chunk 2m (transcode::iq4_slot), chunk 2m + 1's two slots on; written out
// so that the plain -O2 build, which keeps the loop, computes it in place.
inline int iq4_slot_even(int m) { return ((m & 2) << 1) | (m & 1); }
inline __m256i iq4_xs_t_block_sum(const block_iq4_xs_t& x, const block_q8_K& y) {
  const __m256i sc = iq4_xs_scales8(x);
#if EDGELLM_X86_AVX512VNNI
  const __m512i table = _mm512_broadcast_i32x4(_mm_xor_si128(load128(kvalues_iq4nl), _mm_set1_epi8(char(0x80))));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int h = 0; h < 2; ++h) {  // chunks 4h, 4h + 2 (low nibbles) and 4h + 1, 4h + 3 (high): slots 4h .. 4h + 3
    const __m512i q = _mm512_loadu_si512(x.qs + 64 * h);
    acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4)), _mm512_loadu_si512(y.qs + 128 * h));
    acc[1] = _mm512_dpbusd_epi32(acc[1], _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)),
                                 _mm512_loadu_si512(y.qs + 128 * h + 64));
  }
  const __m512i s = _mm512_add_epi32(acc[0], acc[1]);
  const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm256_mullo_epi32(_mm256_sub_epi32(s8, _mm256_slli_epi32(q8_K_sum(y), 7)), sc);
#elif EDGELLM_X86_AVXVNNI
  const __m256i table = _mm256_broadcastsi128_si256(_mm_xor_si128(load128(kvalues_iq4nl), _mm_set1_epi8(char(0x80))));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int m = 0; m < 4; ++m) {  // chunks 2m (low nibbles) and 2m + 1 (high)
    const __m256i q = load256(x.qs + 32 * m);
    const int8_t* ym = y.qs + 32 * iq4_slot_even(m);  // chunk 2m; chunk 2m + 1 two slots on
    acc[0] = dot_u8s8_acc(acc[0], _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4)), load256(ym));
    acc[1] = dot_u8s8_acc(acc[1], _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)), load256(ym + 64));
  }
  const __m256i s8 = _mm256_add_epi32(acc[0], acc[1]);
  return _mm256_mullo_epi32(_mm256_sub_epi32(s8, _mm256_slli_epi32(q8_K_sum(y), 7)), sc);
#else
  const __m256i table = _mm256_broadcastsi128_si256(load128(kvalues_iq4nl));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i sc16 = _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(sc, 16));
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int m = 0; m < 4; ++m) {
    const __m256i q = load256(x.qs + 32 * m);
    const __m256i w0 = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
    const __m256i w1 = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    const int8_t* ym = y.qs + 32 * iq4_slot_even(m);
    acc[0] = _mm256_add_epi32(acc[0], signed_dot_scaled(w0, ym, sc16));
    acc[1] = _mm256_add_epi32(acc[1], signed_dot_scaled(w1, ym + 64, sc16));
  }
  return _mm256_add_epi32(acc[0], acc[1]);
#endif
}
// iq4_xs_t's activations: this level's Q8_K quantizer, then the chunk order.
inline void prepare_act_iq4_xs_t(const float* x, int64_t n_in, void* dst) {
  iq4_xs_t_prepare_act<quantize_row_q8_K>(x, n_in, dst);
}
// PackedFormat::gemm of a one-row group: each token as dot_row<FmtIQ4_XS> takes the file's row.
inline void iq4_xs_t_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  const int nb = int(n_in / QK_K);
  const auto* x = static_cast<const block_iq4_xs_t*>(group);
  for (int t = 0; t < ntok; ++t)
    out[size_t(t) * out_stride] =
        iq4_xs_row<block_iq4_xs_t, iq4_xs_t_block_sum>(nb, x, static_cast<const block_q8_K*>(act) + size_t(t) * size_t(nb));
}

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
  form(DType::IQ2_XXS, "iq2_xxs_t", FormIQ2_XXS_T::group_bytes, FormIQ2_XXS_T::pack, transcoded_gemm<FmtNibble<NibIQ2_XXS>>,
       unpack_u8_iq2_xxs_t);
  form(DType::IQ2_XS, "iq2_xs_t", FormIQ2_XS_T::group_bytes, FormIQ2_XS_T::pack, transcoded_gemm<FmtNibble<NibIQ2_XS>>,
       unpack_u8_iq2_xs_t);
  form(DType::IQ2_S, "iq2_s_t", FormIQ2_S_T::group_bytes, FormIQ2_S_T::pack, transcoded_gemm<FmtNibble<NibIQ2_XS>>,
       unpack_u8_iq2_xs_t);
  form(DType::IQ3_XXS, "iq3_xxs_t", FormIQ3_XXS_T::group_bytes, FormIQ3_XXS_T::pack,
       transcoded_gemm<FmtNibble<NibIQ3_XXS>>, unpack_u8_iq3_xxs_t);
  PackedFormat iq4{1, "iq4_xs_t", FormIQ4_XS_T::group_bytes, FormIQ4_XS_T::pack, act_bytes_q8_K_rows,
                   prepare_act_iq4_xs_t, iq4_xs_t_gemm};
  iq4.resident_only = true;  // the file's size, but streamed rows stay the file's bytes
  iq4.to_file_row = iq4_xs_t_to_file_row;
  t.packed_of(DType::IQ4_XS) = iq4;
  form(DType::TQ1_0, "tq1_0_t", FormTQ1_0_T::group_bytes, FormTQ1_0_T::pack, transcoded_gemm<FmtTQ1_0_T>,
       unpack_u8_tq1_0_t);
}
