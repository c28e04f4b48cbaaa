// x86 (AVX2) activation quantizers: quantize_row_q8_0, quantize_row_q8_1 and
// quantize_row_q8_K, bit-exact with the run-time quantizers of quant/dequantize.hpp
// (quantize_row_q8_0_ref / _q8_1_ref / _q8_K_ref: same rounding rules).
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// roundf(): half away from zero. trunc + (|fraction| >= 0.5 ? sign(v) : 0) is exact for all floats.
inline __m256i round_half_away_epi32(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(v, t);
  const __m256 up = _mm256_cmp_ps(abs_ps(frac), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
  return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// Four vectors of 8 int32 (values within int8) -> 32 int8 in their original order.
inline __m256i pack4_epi32_to_epi8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);  // lane-interleaved: a0 b0 c0 d0 | a1 b1 c1 d1
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The value of largest |x| in a Q8_K block, the first one on ties (ggml's signed max rule).
inline float signed_absmax_256(const float* x) {
  __m256 vmax = _mm256_loadu_ps(x), vmin = vmax;
  for (int j = 8; j < QK_K; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    vmax = _mm256_max_ps(vmax, v);
    vmin = _mm256_min_ps(vmin, v);
  }
  const float hi = hmax_ps(vmax), lo = hmin_ps(vmin);
  if (hi != -lo) return hi > -lo ? hi : lo;
  for (int j = 0; j < QK_K; ++j)  // both signs reach the max: the first one wins
    if (x[j] == hi || x[j] == lo) return x[j];
  return hi;
}

// One 32-float block as the legacy ref quantizes it: returns d = amax / 127, q = roundf(x * (1 / d))
// as four vectors of 8 int32.
inline float quantize_block32(const float* x, __m256i (&q)[4]) {
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax = _mm256_max_ps(amax, abs_ps(v[j]));
  }
  const float d = hmax_ps(amax) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  for (int j = 0; j < 4; ++j) q[j] = round_half_away_epi32(_mm256_mul_ps(v[j], vid));
  return d;
}


// x: [k] floats -> y: [k/32] block_q8_0. d = amax / 127, q = roundf(x / d) as the ref.
inline void quantize_row_q8_0(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t k) {
  auto* y = static_cast<block_q8_0*>(vy);
  for (int64_t b = 0; b < k / QK8_0; ++b, x += QK8_0) {
    __m256i q[4];
    y[b].d = fp32_to_fp16(quantize_block32(x, q));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack4_epi32_to_epi8(q[0], q[1], q[2], q[3]));
  }
}

// x: [k] floats -> y: [k/32] block_q8_1: as q8_0, plus s = fp16(sum(q) * d) with the unrounded d.
inline void quantize_row_q8_1(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t k) {
  auto* y = static_cast<block_q8_1*>(vy);
  for (int64_t b = 0; b < k / QK8_1; ++b, x += QK8_1) {
    __m256i q[4];
    const float d = quantize_block32(x, q);
    y[b].d = fp32_to_fp16(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack4_epi32_to_epi8(q[0], q[1], q[2], q[3]));
    const __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
    y[b].s = fp32_to_fp16(float(_mm_cvtsi128_si32(s4)) * d);
  }
}

// x: [k] floats -> y: [k/256] block_q8_K. iscale = -127 / signed max, q = nearest-even, bsums.
inline void quantize_row_q8_K(const float* EDGELLM_RESTRICT x, void* EDGELLM_RESTRICT vy, int64_t k) {
  auto* y = static_cast<block_q8_K*>(vy);
  for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
    const float max = signed_absmax_256(x);
    if (max == 0.0f) {
      __builtin_memset(&y[b], 0, sizeof(block_q8_K));
      continue;
    }
    const float iscale = -127.f / max;
    const __m256 vis = _mm256_set1_ps(iscale);
    for (int c = 0; c < QK_K / 32; ++c) {  // 32 quants = 2 bsums groups per step
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * j), vis));
        q[j] = _mm256_min_epi32(q[j], _mm256_set1_epi32(127));
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * c), pack4_epi32_to_epi8(q[0], q[1], q[2], q[3]));
      // [g0 lanes 0..3, g1 0..3 | g0 4..7, g1 4..7] after two hadds of (q0 + q1, q2 + q3).
      const __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      const __m256i hh = _mm256_hadd_epi32(h, h);
      const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1));
      y[b].bsums[2 * c] = int16_t(_mm_cvtsi128_si32(s));
      y[b].bsums[2 * c + 1] = int16_t(_mm_extract_epi32(s, 1));
    }
    y[b].d = 1 / iscale;
  }
}
