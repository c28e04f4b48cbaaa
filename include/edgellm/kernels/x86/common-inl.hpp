// Shared pieces of the x86 kernels (AVX2 + FMA + F16C, 8 floats per vector): horizontal sums, the
// u8 x s8 dot step (AVX-VNNI / AVX512-VNNI when the level has it, else maddubs + madd: the one
// place that gap is handled), nibble/bit expansion and the multi-row driver.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// F16 <-> F32 with the F16C instructions of every level: the same values as quant/fp16.hpp's exact
// conversions (round to nearest even), found first by the kernels' unqualified calls.
inline float fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t fp32_to_fp16(float f) { return uint16_t(_cvtss_sh(f, 0)); }


// Sum of the 8 lanes: (x0 + x4) + (x1 + x5) + ((x2 + x6) + (x3 + x7)), the order xsimd's hadd used.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(_mm_hadd_ps(s, s));
}
// Horizontal max / min (xsimd 8.1 has no reduce_max).
inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
inline float hmin_ps(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_min_ss(m, _mm_movehdup_ps(m)));
}

// acc + per 32-bit lane sum of four u8 * s8 products.
inline __m256i dot_u8s8_acc(__m256i acc, __m256i u, __m256i s) {
  if constexpr (kAvxVnni && !kEmulateAvxVnni) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  } else if constexpr (kAvx512Vnni) {
    return _mm256_dpbusd_epi32(acc, u, s);
  } else if constexpr (kAvxVnni) {
    // EDGELLM_X86_EMULATE_AVXVNNI (kernels/x86/register.hpp, tests only): vpdpbusd's exact result from
    // AVX2. The even and the odd bytes of each 16-bit lane widened to int16 (u zero-, s sign-extended),
    // each pair of products summed by vpmaddwd: no saturation, whatever the bytes.
    const __m256i u_even = _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)), u_odd = _mm256_srli_epi16(u, 8);
    const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), s_odd = _mm256_srai_epi16(s, 8);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
  } else {
    // maddubs cannot saturate here: every caller keeps u <= 128 and |s| <= 128 with u * s pairs < 2^15.
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
}
inline __m256i dot_u8s8(__m256i u, __m256i s) { return dot_u8s8_acc(_mm256_setzero_si256(), u, s); }

// u8 x s8 products summed in pairs into 16 int16 lanes, then multiplied by the int16 scale of each
// lane pair: K-quants fold the sub-block scale into the madd. Needs |u * s| pairs < 2^15.
inline __m256i dot_u8s8_scaled(__m256i u, __m256i s, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
}

// v shifted left by S bits (right by -S) in 16-bit lanes, with an immediate count: moves a bit
// field of every byte in place before it is masked (the masks keep no bit that crossed a byte).
// 32-byte vectors, or 64 at the AVX-512 levels.
template <int S, class I>
inline I shift16(I v) {
  if constexpr (S == 0) return v;
  else if constexpr (sizeof(I) == 64 && S > 0) return _mm512_slli_epi16(v, S);
  else if constexpr (sizeof(I) == 64) return _mm512_srli_epi16(v, -S);
  else if constexpr (S > 0) return _mm256_slli_epi16(v, S);
  else return _mm256_srli_epi16(v, -S);
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 16 bytes of nibble pairs -> 32 bytes: low nibbles in bytes 0..15, high nibbles in 16..31
// (the q4_0 / q4_1 / q5 weight order).
inline __m256i nibbles_to_bytes32(const uint8_t* qs) {
  const __m128i x = load128(qs);
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(x, 4), x);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Bit j of a little-endian 32-bit mask -> byte j all ones (0xFF) or 0.
inline __m256i bits_to_bytes_mask(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Bit j of a little-endian 32-bit mask -> byte j set to 0x10 (the fifth bit of q5 quants) or 0.
inline __m256i bits_to_0x10(const uint8_t* qh_bytes) {
  uint32_t qh;
  __builtin_memcpy(&qh, qh_bytes, 4);
  return _mm256_and_si256(bits_to_bytes_mask(qh), _mm256_set1_epi8(0x10));
}

// What a per-block kernel Fmt names besides its `static __m256 block(const Block& w, const ActBlock&
// a, __m256 acc)`: its weight and activation block types and the weights per block.
template <class B, class A, int K>
struct BlockFmt {
  using Block = B;
  using ActBlock = A;
  static constexpr int kBlock = K;
};

// Drives a per-block kernel `__m256 Fmt::block(const Block& w, const ActBlock& a, __m256 acc)`
// over R weight rows sharing the activation loads: out[r] = dot(row r, a). w: R rows of nb blocks,
// w_stride bytes apart; a: [nb] activation blocks.
template <class Fmt, int R>
inline void dot_rows(int nb, float* out, const void* w, size_t w_stride, const void* a) {
  using Block = typename Fmt::Block;
  using ActBlock = typename Fmt::ActBlock;
  const auto* y = static_cast<const ActBlock*>(a);
  const Block* x[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    x[r] = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride);
    acc[r] = _mm256_setzero_ps();
  }
  for (int b = 0; b < nb; ++b)
    for (int r = 0; r < R; ++r) acc[r] = Fmt::block(x[r][b], y[b], acc[r]);
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// One row with two accumulators, so consecutive blocks do not wait on each other's FMA.
template <class Fmt>
inline float dot_row(int nb, const void* w, const void* a) {
  const auto* x = static_cast<const typename Fmt::Block*>(w);
  const auto* y = static_cast<const typename Fmt::ActBlock*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int b = 0;
  for (; b + 1 < nb; b += 2) {
    acc0 = Fmt::block(x[b], y[b], acc0);
    acc1 = Fmt::block(x[b + 1], y[b + 1], acc1);
  }
  if (b < nb) acc0 = Fmt::block(x[b], y[b], acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

// vec_dot_rows in groups of kRowsPerCall rows, then one at a time.
template <class Fmt, int kRows>
inline void dot_rows_grouped(int n, float* out, int nrows, const void* w, size_t w_stride, const void* a) {
  const int nb = n / Fmt::kBlock;
  int r = 0;
  for (; r + kRows <= nrows; r += kRows)
    dot_rows<Fmt, kRows>(nb, out + r, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, w_stride, a);
  for (; r < nrows; ++r) out[r] = dot_row<Fmt>(nb, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, a);
}

// A per-block format's kernel table entries: vec_dot (VecDotFn) and vec_dot_rows (VecDotRowsFn) in
// groups of R rows sharing the activation loads (R = 1: a row at a time, two blocks in flight).
template <class Fmt>
inline float vec_dot(int n, const void* EDGELLM_RESTRICT w, const void* EDGELLM_RESTRICT a) {
  return dot_row<Fmt>(n / Fmt::kBlock, w, a);
}
template <class Fmt, int R>
inline void vec_dot_rows(int n, float* EDGELLM_RESTRICT out, int nrows, const void* w, size_t w_stride,
                         const void* EDGELLM_RESTRICT a) {
  if constexpr (R == 1) {
    for (int r = 0; r < nrows; ++r)
      out[r] = dot_row<Fmt>(n / Fmt::kBlock, static_cast<const uint8_t*>(w) + size_t(r) * w_stride, a);
  } else {
    dot_rows_grouped<Fmt, R>(n, out, nrows, w, w_stride, a);
  }
}
