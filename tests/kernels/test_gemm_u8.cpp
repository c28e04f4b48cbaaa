// The prefill GEMM's common weight form (kernels/layouts/unpack_u8.hpp) against each type's
// dequantizer, and the GEMM (several tokens) against the GEMV (one token at a time) for shapes
// the GEMM takes (rows a multiple of 128) with row and token tails, and the forms' arithmetic in
// scalar code (the grouped K and signed forms too) against the ref GEMV on every machine; the x86
// K-quant scale unpack; matmul_multi (fused Q/K/V, gate/up) against separate matmuls.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/layouts/unpack_u8.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"

using namespace edgellm;

namespace {

// s * u + m in float vs the dequantizer's float expression: a few ulps of the block's scale.
constexpr float kMaxUnpackErr = 1e-5f;
// GEMM vs GEMV, relative to sum |w * a| of the output: only the float summation order differs.
constexpr double kMaxGemmErr = 1e-5;

const DType kGemmTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                        DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};

std::vector<float> normal_floats(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = d(rng);
  return v;
}

}  // namespace

TEST_CASE("unpack_row_u8 gives the dequantized values for every type") {
  std::mt19937 rng(11);
  const int64_t n = 512;
  for (DType t : kGemmTypes) {
    const std::string name = dtype_name(t);
    CAPTURE(name);
    REQUIRE(can_unpack_u8(t));
    const auto x = normal_floats(rng, n);
    std::vector<uint8_t> q(dtype_row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> want(static_cast<size_t>(n)), s(static_cast<size_t>(n / 16)), m(static_cast<size_t>(n / 16));
    std::vector<uint8_t> u(static_cast<size_t>(n));
    dequantize_row(t, q.data(), want.data(), n);
    unpack_row_u8(t, q.data(), n, u.data(), s.data(), m.data());
    float amax = 0;
    for (float v : want) amax = std::max(amax, std::fabs(v));
    for (int64_t i = 0; i < n; ++i) {
      const float got = s[size_t(i / 16)] * float(u[size_t(i)]) + m[size_t(i / 16)];
      CHECK(std::fabs(got - want[size_t(i)]) <= kMaxUnpackErr * amax);
    }
  }
  CHECK_FALSE(can_unpack_u8(DType::F16));
  std::vector<uint8_t> u(32);
  std::vector<float> s(2), m(2);
  CHECK_THROWS_AS(unpack_row_u8(DType::F16, u.data(), 32, u.data(), s.data(), m.data()), Error);
}

#if EDGELLM_HAS_X86_KERNELS
TEST_CASE("x86 word-operation scale unpack equals unpack_scales_mins_k4 for every byte pattern") {
#if EDGELLM_X86_DISPATCH
  namespace x86 = x86_avx2;  // the lowest level, if this CPU runs it
  if (!x86_cpu_runs(Isa::Avx2)) return;
#else
  namespace x86 = x86_native;
#endif
  std::mt19937 rng(13);
  for (int it = 0; it < 20000; ++it) {
    uint8_t q[12];
    for (auto& b : q) b = uint8_t(rng());
    uint8_t sc[8], mn[8], sc2[8], mn2[8];
    unpack_scales_mins_k4(q, sc, mn);
    x86::scales_mins_k4_words(q, sc2, mn2);
    bool same = true;
    for (int j = 0; j < 8; ++j) same = same && sc[j] == sc2[j] && mn[j] == mn2[j];
    REQUIRE(same);
  }
}
#endif

namespace {

// The u8 GEMM tiles' arithmetic in scalar code (x86 has the tiles). Unsigned form: per 4-weight
// lane sv_w * sv_a * integer dot, plus sum over 16-groups of m_w * m_a.
double gemm_form_dot(int64_t n, const U8GemmRow& w, const U8GemmRow& a) {
  double sum = 0.0;
  for (int64_t l = 0; l < n / 4; ++l) {
    int32_t d = 0;
    for (int j = 0; j < 4; ++j) d += int32_t(w.u[4 * l + j]) * int32_t(int8_t(a.u[4 * l + j]));
    sum += double(d) * w.sv[l] * a.sv[l];
  }
  for (int64_t g = 0; g < n / 16; ++g) sum += double(w.m[g]) * a.m[g];
  return sum;
}

// Byte i of row r in an interleaved group (kernels/layouts/unpack_u8.hpp): step i / 4, lane r.
uint8_t group_byte(const uint8_t* group, int r, int64_t i) {
  return group[size_t(i / 4) * 4 * kGroupRows + size_t(r) * 4 + size_t(i % 4)];
}

// The signed forms' integer dot of block b (32 int8 values) of row r of a group with a's quants.
int32_t group_dot_s8(const uint8_t* group, int r, const U8GemmRow& a, int64_t b) {
  int32_t d = 0;
  for (int64_t i = b * 32; i < b * 32 + 32; ++i) d += int32_t(int8_t(group_byte(group, r, i))) * int32_t(int8_t(a.u[i]));
  return d;
}

// Signed form: row r of a group against an activation row, per block d_w * d_a * integer dot.
double gemm_s8_group_dot(int64_t n, const uint8_t* group, int r, const U8GemmRow& a) {
  const auto* dw = reinterpret_cast<const float*>(group + U8GroupLayout(U8Form::Signed, n).d);
  double sum = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) sum += double(group_dot_s8(group, r, a, b)) * dw[b * kGroupRows + r] * a.sv[b * 8];
  return sum;
}

// The int16 pair (sc, sc) of row r at index i of a group's scale section (both halves equal).
int16_t group_pair(const uint8_t* sc, int64_t i, int r) {
  int16_t s[2];
  std::memcpy(s, sc + (size_t(i) * kGroupRows + size_t(r)) * 4, 4);
  CHECK(s[0] == s[1]);
  return s[0];
}

// Signed K form: row r of a group, per super-block d_w * d_a * sum over 32-blocks of sc * integer
// dot of the int8 values (the group's int16 pair (sc, sc) per row).
double gemm_sk_group_dot(int64_t n, const uint8_t* group, int r, const U8GemmRow& a) {
  constexpr int G = kGroupRows;
  const U8GroupLayout at(U8Form::SignedK, n);
  const auto* dw = reinterpret_cast<const float*>(group + at.d);
  double sum = 0.0;
  for (int64_t sb = 0; sb < n / 256; ++sb) {
    int64_t isum = 0;
    for (int64_t b = sb * 8; b < sb * 8 + 8; ++b) isum += int64_t(group_dot_s8(group, r, a, b)) * group_pair(group + at.sc, b, r);
    sum += double(isum) * dw[sb * G + r] * a.d[sb];
  }
  return sum;
}

// K form (ksigned false): row r of a group, per super-block d_w * d_a * sum over 16-groups of sc *
// integer dot (the group's int16 pair (sc, sc) per row), plus per 16-group m_w * m_a.
// Signed-offset K form (ksigned): per super-block d_w * d_a * (sum over 16-groups of sc * integer
// dot of the int8 values with the activations' bytes + 128, minus the row's correction c), as
// tile_ks computes it; c = 128 * sum of sc * values makes that the values' dot with a.
double gemm_k_group_dot(int64_t n, const uint8_t* group, int r, const U8GemmRow& a, bool ksigned = false) {
  constexpr int G = kGroupRows;
  const U8GroupLayout at(ksigned ? U8Form::KSigned : U8Form::KScales, n);
  const uint8_t* sc = group + at.sc;
  const auto* mw = reinterpret_cast<const float*>(group + at.m);
  const auto* c = reinterpret_cast<const int32_t*>(group + at.m);
  const auto* dw = reinterpret_cast<const float*>(group + at.d);
  double sum = 0.0;
  for (int64_t sb = 0; sb < n / 256; ++sb) {
    int64_t isum = 0;
    for (int64_t g = sb * 16; g < sb * 16 + 16; ++g) {
      int32_t d = 0;
      for (int64_t i = g * 16; i < g * 16 + 16; ++i) {
        const uint8_t wb = group_byte(group, r, i);
        d += ksigned ? int32_t(int8_t(wb)) * (int32_t(int8_t(a.u[i])) + 128) : int32_t(wb) * int32_t(int8_t(a.u[i]));
      }
      isum += int64_t(d) * group_pair(sc, g, r);
      if (!ksigned) sum += double(mw[g * G + r]) * a.m[g];
    }
    if (ksigned) isum -= c[sb * G + r];
    sum += double(isum) * dw[sb * G + r] * a.d[sb];
  }
  return sum;
}

}  // namespace

TEST_CASE("the u8 GEMM forms (unsigned, K, signed, signed K, signed-offset K) of weights and activations give the GEMV's dot") {
  // Checks the forms themselves (kernels/layouts/unpack_u8.hpp) on every machine: for Q8_1
  // activations (q4_1 / q5_1) the offsets must carry the block's s, not d * sum of the quants.
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(15);
  const int64_t n = 512;
  const size_t rb = u8_gemm_row_bytes(n);
  std::vector<uint8_t> wrow(rb), arow(rb);
  std::vector<float> s16(u8_gemm_pack_scratch(n));
  for (DType t : kGemmTypes) {
    const std::string name = dtype_name(t);
    CAPTURE(name);
    const DType act = ref.of(t).vec_dot_type;
    for (int it = 0; it < 8; ++it) {
      const auto wf = normal_floats(rng, n), x = normal_floats(rng, n);
      std::vector<uint8_t> w(dtype_row_bytes(t, n)), q(dtype_row_bytes(act, n)), scratch(q.size());
      quantize_row(t, wf.data(), w.data(), n);
      ref.of(act).from_float(x.data(), q.data(), n);
      const U8GemmRow wr = U8GemmRow::at(wrow.data(), n, 0), ar = U8GemmRow::at(arow.data(), n, 0);
      u8_gemm_pack_weight_row(t, w.data(), n, wr, s16.data());
      u8_gemm_pack_act_row(act, ref.of(act).from_float, x.data(), n, ar, scratch.data());
      const double want = ref.of(t).vec_dot(int(n), w.data(), q.data());
      std::vector<float> wd(static_cast<size_t>(n)), ad(static_cast<size_t>(n));
      dequantize_row(t, w.data(), wd.data(), n);
      dequantize_row(act, q.data(), ad.data(), n);
      double scale = 0.0;
      for (int64_t i = 0; i < n; ++i) scale += std::fabs(double(wd[size_t(i)]) * ad[size_t(i)]);
      CHECK(std::fabs(gemm_form_dot(n, wr, ar) - want) <= kMaxGemmErr * scale);
      // The grouped forms (K: K-quants and iq4_xs, signed: q8_0 and iq4_xs, signed K: iq4_xs) pack groups of rows; here the row is each of a
      // group's rows in turn (a short group's missing rows are zero).
      const void* rows[kGroupRows];
      for (auto& p : rows) p = w.data();
      std::vector<uint8_t> gscratch(u8_gemm_group_scratch(n));
      for (U8Form form : {U8Form::KScales, U8Form::Signed, U8Form::SignedK, U8Form::KSigned}) {
        const bool takes = form == U8Form::KScales  ? has_kscales(t)
                           : form == U8Form::Signed ? has_signed_form(t)
                           : form == U8Form::KSigned ? u8_form_offset(t) >= 0
                                                    : has_signed_k_form(t);
        std::vector<uint8_t> group(u8_gemm_group_bytes(form, n) + 1, 0xEE);
        if (!takes) {
          CHECK_THROWS_AS(u8_gemm_pack_group(t, form, rows, 1, n, group.data(), gscratch.data()), Error);
          continue;
        }
        for (int cnt : {1, 3, kGroupRows}) {
          u8_gemm_pack_group(t, form, rows, cnt, n, group.data(), gscratch.data());
          for (int r = 0; r < kGroupRows; ++r) {
            const double got = form == U8Form::KScales   ? gemm_k_group_dot(n, group.data(), r, ar)
                               : form == U8Form::Signed  ? gemm_s8_group_dot(n, group.data(), r, ar)
                               : form == U8Form::KSigned ? gemm_k_group_dot(n, group.data(), r, ar, true)
                                                         : gemm_sk_group_dot(n, group.data(), r, ar);
            CHECK(std::fabs(got - (r < cnt ? want : 0.0)) <= kMaxGemmErr * scale);
          }
          CHECK(group.back() == 0xEE);  // nothing written past the group
        }
        // A group is no larger than the 8 GEMM rows whose memory the driver gives it.
        CHECK(u8_gemm_group_bytes(form, n) <= kGroupRows * rb);
      }
      CHECK_THROWS_AS(u8_gemm_pack_group(t, U8Form::Unsigned, rows, 1, n, wrow.data(), gscratch.data()), Error);
    }
  }
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> scratch(dtype_row_bytes(DType::Q8_0, 64));
  CHECK_THROWS_AS(u8_gemm_pack_act_row(DType::F16, ref.of(DType::Q8_0).from_float, x.data(), 64,
                                       U8GemmRow::at(arow.data(), 64, 0), scratch.data()),
                  Error);
}

TEST_CASE("the K forms' tiles are exact at the largest values and activations they take") {
  // Exact integers in, so the float result may differ from the double reference only by its own
  // rounding (kMaxGemmErr). Every activation is -128 or 127 (token 0 all -128, token 1 all 127,
  // the others runs of each), the rows' scales reach 63 (the K-quants'), and:
  // - K form: every byte at max_u (tile_k) or narrow_max_u (tile_k_narrow, which adds a 16-weight
  //   group's four vpmaddubsw pairs in int16 first: 4 x 2 x 31 x 128 = 31744 < 2^15), offsets 0.
  // - signed-offset K form: int8 values at +-ks_max_w (tile_ks: a vpmaddubsw pair of them by the
  //   activations' bytes + 128 reaches 2 x 255 x 64 = 32640 < 2^15) or +-ks_narrow_max_w
  //   (tile_ks_narrow: 4 x 2 x 255 x 16 = 32640), with the corrections u8_gemm_pack_group writes
  //   (128 x sum of sc x values): the reference is then the plain integer dot.
  const int64_t n = 512;
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    const U8GemmKernel& g = kt.u8_gemm;
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (int form_i = 0; form_i < 4; ++form_i) {
      const bool ksigned = form_i >= 2, narrow = form_i % 2 == 1;
      const auto tile = ksigned ? (narrow ? g.tile_ks_narrow : g.tile_ks) : (narrow ? g.tile_k_narrow : g.tile_k);
      if (!tile) continue;
      const int vmax = ksigned ? (narrow ? g.ks_narrow_max_w : g.ks_max_w) : (narrow ? g.narrow_max_u : g.max_u);
      CAPTURE(form_i);
      CAPTURE(vmax);
      const int rows = g.group_rows, toks = g.toks, groups = rows / kGroupRows;
      const U8GroupLayout at(ksigned ? U8Form::KSigned : U8Form::KScales, n);
      std::vector<uint8_t> wbuf(size_t(groups) * at.bytes);
      std::vector<U8GemmRow> w(static_cast<size_t>(rows));
      // value i of tile row r (K form: the byte; signed: even rows +vmax, odd -vmax, rows 4 .. 7
      // of a group flipping sign every 64 values); its scale and d
      const auto value = [&](int r, int64_t i) {
        if (!ksigned) return vmax;
        const int gr = r % kGroupRows;
        return (gr % 2 == 1) != (gr >= 4 && (i / 64) % 2 == 1) ? -vmax : vmax;
      };
      const auto scale = [](int r) { return int16_t(63 - 2 * (r % kGroupRows)); };
      const auto dw = [](int r) { return 1.0f / float(r + 1); };
      for (int gi = 0; gi < groups; ++gi) {
        uint8_t* grp = wbuf.data() + size_t(gi) * at.bytes;
        for (int gr = 0; gr < kGroupRows; ++gr) {
          const int r = gi * kGroupRows + gr;
          for (int64_t i = 0; i < n; ++i)
            grp[size_t(i / 4) * 4 * kGroupRows + size_t(gr) * 4 + size_t(i % 4)] = uint8_t(int8_t(value(r, i)));
          const int16_t pair[2] = {scale(r), scale(r)};
          for (int64_t i = 0; i < n / 16; ++i) {
            std::memcpy(grp + at.sc + (size_t(i) * kGroupRows + size_t(gr)) * 4, pair, 4);
            const float m = 0.0f;
            if (!ksigned) std::memcpy(grp + at.m + (size_t(i) * kGroupRows + size_t(gr)) * 4, &m, 4);
          }
          for (int64_t sb = 0; sb < n / 256; ++sb) {
            if (ksigned) {
              int32_t c = 0;
              for (int64_t i = sb * 256; i < sb * 256 + 256; ++i) c += scale(r) * value(r, i);
              const int32_t c128 = 128 * c;
              std::memcpy(grp + at.m + (size_t(sb) * kGroupRows + size_t(gr)) * 4, &c128, 4);
            }
            const float d = dw(r);
            std::memcpy(grp + at.d + (size_t(sb) * kGroupRows + size_t(gr)) * 4, &d, 4);
          }
        }
        w[size_t(gi * kGroupRows)].u = grp;
      }
      std::vector<uint8_t> abuf(u8_gemm_row_bytes(n) * size_t(toks));
      std::vector<U8GemmRow> a(static_cast<size_t>(toks));
      for (int c = 0; c < toks; ++c) {
        a[size_t(c)] = U8GemmRow::at(abuf.data(), n, c);
        for (int64_t i = 0; i < n; ++i) a[size_t(c)].u[i] = uint8_t(c == 0 ? 0x80 : c == 1 ? 0x7F : (i / (16 * c)) % 2 ? 0x80 : 0x7F);
        for (int64_t i = 0; i < n / 16; ++i) a[size_t(c)].m[i] = 0.0f;
        for (int64_t i = 0; i < n / 256; ++i) a[size_t(c)].d[i] = 0.5f;
      }
      std::vector<float> out(size_t(toks) * size_t(rows));
      if (ksigned)  // the driver's biased rows (u8_gemm_bias_act), restored after the call
        for (const U8GemmRow& ac : a) u8_gemm_bias_act(ac, n);
      tile(n, w.data(), a.data(), out.data(), size_t(rows));
      if (ksigned)
        for (const U8GemmRow& ac : a) u8_gemm_bias_act(ac, n);
      for (int c = 0; c < toks; ++c)
        for (int r = 0; r < rows; ++r) {
          double want = 0.0;
          for (int64_t sb = 0; sb < n / 256; ++sb) {
            int64_t isum = 0;
            for (int64_t i = sb * 256; i < sb * 256 + 256; ++i) isum += int64_t(scale(r)) * value(r, i) * int8_t(a[size_t(c)].u[i]);
            want += double(isum) * dw(r) * 0.5;
          }
          CHECK(std::fabs(out[size_t(c) * size_t(rows) + size_t(r)] - want) <= kMaxGemmErr * std::fabs(want));
          // the forms' scalar references (the forms test's) agree
          const uint8_t* grp = wbuf.data() + size_t(r / kGroupRows) * at.bytes;
          const double ref = gemm_k_group_dot(n, grp, r % kGroupRows, a[size_t(c)], ksigned);
          CHECK(std::fabs(ref - want) <= kMaxGemmErr * std::fabs(want));
        }
    }
  }
}

// On every ISA this build and CPU run (the _dispatch build: every x86 level, so the AVX2 tiles
// without VNNI, float and K form, run on an AVX-512 machine too).
TEST_CASE("every table's group interleave equals u8_gemm_interleave_ref") {
  std::mt19937 rng(16);
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    if (!kt.u8_gemm.interleave) continue;
    CAPTURE(isa_name(isa));
    for (int64_t n : {32, 256, 2048}) {
      const size_t stride = size_t(n) + 36;  // rows apart by more than their bytes, as in the scratch
      std::vector<uint8_t> src(stride * kGroupRows), want(size_t(n) * kGroupRows), got(want.size() + 1, 0xEE);
      for (auto& b : src) b = uint8_t(rng());
      u8_gemm_interleave_ref(src.data(), stride, n, want.data());
      kt.u8_gemm.interleave(src.data(), stride, n, got.data());
      CHECK(std::equal(want.begin(), want.end(), got.begin()));
      CHECK(got.back() == 0xEE);
    }
  }
}

TEST_CASE("matmul over several tokens equals the one-token matmul per token") {
  std::mt19937 rng(12);
  ThreadPool pool(2);
  for (Isa isa : available_isas())
  for (DType t : kGemmTypes) {
    const KernelTable kt = make_kernel_table(isa);
    const std::string name = std::string(isa_name(isa)) + " " + dtype_name(t) + " (" +
                             (kt.u8_gemm.tile ? kt.u8_gemm.name : "no u8 GEMM") + ")";
    CAPTURE(name);
    const int64_t n_in = dtype_block_size(t) == 256 ? 512 : 384, n_out = 45, n_tok = 7;  // tails: rows of 16, tokens of 4
    const size_t rb = dtype_row_bytes(t, n_in);
    std::vector<uint8_t> w(rb * size_t(n_out));
    std::vector<float> wf(size_t(n_in * n_out));
    for (int64_t r = 0; r < n_out; ++r) {
      const auto f = normal_floats(rng, n_in);
      quantize_row(t, f.data(), w.data() + size_t(r) * rb, n_in);
      dequantize_row(t, w.data() + size_t(r) * rb, wf.data() + r * n_in, n_in);
    }
    const MatmulWeight mw{t, w.data(), n_in, n_out, rb};
    // The tiles this test is for really run (q8_0 without VNNI: the signed form).
    if (kt.u8_gemm.tile) CHECK(detail::gemm_u8_applies(kt, mw, n_tok));
    const auto x = normal_floats(rng, n_tok * n_in);
    std::vector<float> y(size_t(n_tok * n_out)), y1(static_cast<size_t>(n_out));
    matmul(kt, &pool, mw, x.data(), n_tok, y.data());
    for (int64_t tok = 0; tok < n_tok; ++tok) {
      matmul(kt, nullptr, mw, x.data() + tok * n_in, 1, y1.data());
      for (int64_t r = 0; r < n_out; ++r) {
        double scale = 0;
        for (int64_t i = 0; i < n_in; ++i) scale += std::fabs(double(wf[size_t(r * n_in + i)]) * x[size_t(tok * n_in + i)]);
        CHECK(std::fabs(double(y[size_t(tok * n_out + r)]) - y1[size_t(r)]) <= kMaxGemmErr * scale);
      }
    }
  }
}

TEST_CASE("matmul_multi gives each matrix's own matmul, fused or not") {
  const KernelTable& kt = kernels();
  std::mt19937 rng(14);
  ThreadPool pool(2);
  const int64_t n_in = 512;
  struct M {
    DType type;
    int64_t n_out;
  };
  for (const auto& set : {std::vector<M>{{DType::Q4_K, 300}, {DType::Q4_K, 77}, {DType::Q4_K, 77}},
                          std::vector<M>{{DType::Q8_0, 600}, {DType::Q6_K, 5}},
                          std::vector<M>{{DType::Q4_1, 300}, {DType::Q4_1, 77}},  // fused, Q8_1 activations
                          std::vector<M>{{DType::Q5_1, 100}, {DType::Q5_0, 60}, {DType::Q8_0, 7}}}) {
    std::vector<std::vector<uint8_t>> data;
    std::vector<MatmulWeight> ws;
    for (const M& m : set) {
      const size_t rb = dtype_row_bytes(m.type, n_in);
      data.emplace_back(rb * size_t(m.n_out));
      for (int64_t r = 0; r < m.n_out; ++r) {
        const auto f = normal_floats(rng, n_in);
        quantize_row(m.type, f.data(), data.back().data() + size_t(r) * rb, n_in);
      }
    }
    for (size_t i = 0; i < set.size(); ++i)
      ws.push_back({set[i].type, data[i].data(), n_in, set[i].n_out, dtype_row_bytes(set[i].type, n_in)});
    for (int64_t n_tok : {int64_t(1), int64_t(5)}) {
      const auto x = normal_floats(rng, n_tok * n_in);
      std::vector<std::vector<float>> got(ws.size()), want(ws.size());
      std::vector<MatmulTask> tasks;
      for (size_t i = 0; i < ws.size(); ++i) {
        got[i].assign(size_t(n_tok * ws[i].n_out), NAN);
        want[i].assign(got[i].size(), 0.f);
        matmul(kt, nullptr, ws[i], x.data(), n_tok, want[i].data());
        tasks.push_back({&ws[i], got[i].data()});
      }
      MatmulScratch scratch;
      matmul_multi(kt, &pool, tasks.data(), int(tasks.size()), x.data(), n_tok, scratch);
      for (size_t i = 0; i < ws.size(); ++i) CHECK(got[i] == want[i]);
    }
  }
}
