// The packed K-quant GEMMs' skeleton, shared by the 16-row AVX-512 VNNI kernels
// (packed_kquants_x16-inl.hpp) and the 8-row AVX2 ones (packed_kquants_x8-inl.hpp): one vector lane per row
// of the group (PackedVec, packed-inl.hpp: 64-byte vectors with AVX-512 VNNI, else 32), register tiles
// of a few tokens, per super-block a kernel K::superblock(sb, x, sum) that adds the super-block's
// dot of every row and token to sum[t] (float lanes = rows), the stream prefetched ahead
// (prefetch_ahead, packed-inl.hpp), one store per token, no horizontal sums. Layouts and oracle:
// kernels/layouts/packed_kquants.hpp.
// Included by kernels/x86/register_level-inl.hpp inside namespace edgellm::x86_<level>, once per level.

// x: [n_in] floats -> [n_in / 256] PackedActQ8K, quantized by this level's quantize_row_q8_K
// (bit-exact with the ref): the activations of every level's packed K-quant forms.
inline void prepare_act_q8_K_packed(const float* x, int64_t n_in, void* dst) {
  edgellm::prepare_act_q8_K_packed<quantize_row_q8_K>(x, n_in, dst);
}

// The super-block's float step, for T tokens x kRows rows of sb (its d and dmin as kRows F16 each).
// sum[t] += d8 * (d * isum - dmin * msum) (Q4_K, Q5_K) or d8 * d * isum - d8 * dmin * msum (Q2_K):
// each in the order of its per-row ref (and ggml), since the two terms often nearly cancel.
template <bool kFactored, int T>
inline void add_d_dmin(const uint8_t* sb, const PackedActQ8K* const (&x)[T], const PackedVec::I (&isum)[T],
                       const PackedVec::I (&msum)[T], PackedVec::F (&sum)[T]) {
  using V = PackedVec;
  const V::F d = V::scales(sb), dmin = V::scales(sb + 2 * V::kRows);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const V::F d8 = V::splat(x[t]->q.d), fi = V::cvt(isum[t]), fm = V::cvt(msum[t]);
    if constexpr (kFactored) {
      sum[t] = V::fma(d8, V::fmsub(d, fi, V::mul(dmin, fm)), sum[t]);
    } else {
      sum[t] = V::add(sum[t], V::fmsub(V::mul(d8, d), fi, V::mul(V::mul(d8, dmin), fm)));
    }
  }
}

// sum[t] += d8 * d * (isum - 2^kShift * csum): Q3_K (offset 4) and Q6_K (offset 32).
template <int kShift, int T>
inline void add_d_offset(const uint8_t* sb, const PackedActQ8K* const (&x)[T], const PackedVec::I (&isum)[T],
                         const PackedVec::I (&csum)[T], PackedVec::F (&sum)[T]) {
  using V = PackedVec;
  const V::F d = V::scales(sb);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    const V::I total = V::sub(isum[t], V::template shl<kShift>(csum[t]));
    sum[t] = V::fma(V::mul(V::splat(x[t]->q.d), d), V::cvt(total), sum[t]);
  }
}

// T tokens (from t0) x the rows of one group: out[t * out_stride + r].
template <class K, int T>
void packed_kq_tile(int64_t nsb, const uint8_t* w, const void* act, int t0, float* out, size_t out_stride) {
  const PackedActQ8K* x[T];
  PackedVec::F sum[T];
  for (int t = 0; t < T; ++t) {
    x[t] = static_cast<const PackedActQ8K*>(act) + size_t(t0 + t) * size_t(nsb);
    sum[t] = PackedVec::zero();
  }
  for (int64_t b = 0; b < nsb; ++b, w += K::kBytes) {
    prefetch_ahead(w, K::kBytes);
    K::superblock(w, x, sum);
    for (int t = 0; t < T; ++t) ++x[t];
  }
  for (int t = 0; t < T; ++t) PackedVec::store(out + size_t(t0 + t) * out_stride, sum[t]);
}

// The remainder tile of 1 .. T tokens, dispatched to a compile-time size.
template <class K, int T>
void packed_kq_tail(int n, int64_t nsb, const uint8_t* w, const void* act, int t0, float* out, size_t out_stride) {
  if constexpr (T > 0) {
    if (n == T) packed_kq_tile<K, T>(nsb, w, act, t0, out, out_stride);
    else packed_kq_tail<K, T - 1>(n, nsb, w, act, t0, out, out_stride);
  }
}

// PackedFormat::gemm: tiles of kToks tokens, then one tile of the 1 .. kToks-1 left.
template <class K, int kToks>
void packed_kq_gemm(int64_t n_in, const void* group, const void* act, int ntok, float* out, size_t out_stride) {
  const int64_t nsb = n_in / QK_K;
  const auto* w = static_cast<const uint8_t*>(group);
  int t0 = 0;
  for (; t0 + kToks <= ntok; t0 += kToks) packed_kq_tile<K, kToks>(nsb, w, act, t0, out, out_stride);
  packed_kq_tail<K, kToks - 1>(ntok - t0, nsb, w, act, t0, out, out_stride);
}

// Sets t.packed_of(Q2_K .. Q6_K) to the forms of the kernels given, named q2_Kx16 or q2_Kx8 ...
template <int kToks, class Q2K, class Q3K, class Q4K, class Q5K, class Q6K>
inline void set_packed_kquant_forms(KernelTable& t) {
  constexpr int R = PackedVec::kRows;
  constexpr auto prep = prepare_act_q8_K_packed;
  set_packed_kquant_form<R>(t, DType::Q2_K, R == 16 ? "q2_Kx16" : "q2_Kx8", packed_kq_gemm<Q2K, kToks>, prep);
  set_packed_kquant_form<R>(t, DType::Q3_K, R == 16 ? "q3_Kx16" : "q3_Kx8", packed_kq_gemm<Q3K, kToks>, prep);
  set_packed_kquant_form<R>(t, DType::Q4_K, R == 16 ? "q4_Kx16" : "q4_Kx8", packed_kq_gemm<Q4K, kToks>, prep);
  set_packed_kquant_form<R>(t, DType::Q5_K, R == 16 ? "q5_Kx16" : "q5_Kx8", packed_kq_gemm<Q5K, kToks>, prep);
  set_packed_kquant_form<R>(t, DType::Q6_K, R == 16 ? "q6_Kx16" : "q6_Kx8", packed_kq_gemm<Q6K, kToks>, prep);
}
