// Row-interleaved ("packed") Q4_0 / Q8_0 formats (kernels/layouts/packed_legacy.hpp layout): the scalar
// reference formats (16 and 8 rows), the x86 table's and the NEON dotprod table's (4 rows),
// against the unpacked ref vec_dot of each row, for full and partial groups and several token counts; the packer against the layout
// it documents, and prepare_act against the ref Q8_0 quantizer byte for byte.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/scalar/dot.hpp"
#include "edgellm/kernels/layouts/packed_legacy.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

// Allowed |packed - ref vec_dot| as a fraction of sum |w_i * a_i| (dequantized): the integer block
// sums are exact, only the float sum of the block results is ordered / fused differently.
constexpr double kMaxPackedErr = 1e-5;

struct FormatCase {
  std::string name;
  DType type;
  PackedFormat pf;
};

std::vector<FormatCase> formats_to_test() {
  std::vector<FormatCase> v{{"ref x16", DType::Q4_0, packed::format_q4_0_ref<16>()},
                            {"ref x8", DType::Q4_0, packed::format_q4_0_ref<8>()},
                            {"ref x16", DType::Q8_0, packed::format_q8_0_ref<16>()},
                            {"ref x8", DType::Q8_0, packed::format_q8_0_ref<8>()},
                            {"ref x8 signed", DType::Q8_0, packed::format_q8_0s_ref<8>()}};
#if EDGELLM_HAS_X86_KERNELS
  for (Isa isa : available_isas()) {  // every x86 level this CPU runs
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    const PackedFormat& q4 = t.packed_of(DType::Q4_0);
    REQUIRE(q4.rows > 0);  // every x86 level has the Q4_0 form
    v.push_back({std::string(isa_name(isa)) + " " + q4.name, DType::Q4_0, q4});
    const PackedFormat& q8 = t.packed_of(DType::Q8_0);
    if (q8.rows > 0) v.push_back({std::string(isa_name(isa)) + " " + q8.name, DType::Q8_0, q8});
  }
#endif
#if EDGELLM_HAS_NEON
  if (cpu_has_dotprod()) {  // the x4 forms need sdot; an ARMv8.0 table has none
    const KernelTable dp = make_kernel_table(Isa::Dotprod);
    for (DType type : {DType::Q4_0, DType::Q8_0}) {
      const PackedFormat& pf = dp.packed_of(type);
      REQUIRE(pf.rows == 4);
      v.push_back({std::string("dotprod ") + pf.name, type, pf});
    }
  } else {
    CHECK(make_kernel_table(Isa::Neon).packed_of(DType::Q4_0).rows == 0);
  }
#endif
  return v;
}

// nrows quantized rows of type t, a different spread per row.
std::vector<uint8_t> make_rows(std::mt19937& rng, DType t, int64_t n, int nrows) {
  const size_t rb = dtype_row_bytes(t, n);
  std::vector<uint8_t> w(rb * size_t(nrows));
  for (int r = 0; r < nrows; ++r) {
    const auto f = uniform_floats(rng, n, -(0.25f + 0.5f * float(r % 5)), 0.25f + 0.5f * float(r % 5));
    quantize_row(t, f.data(), w.data() + rb * size_t(r), n);
  }
  return w;
}

// All groups of nrows rows packed back to back.
std::vector<uint8_t> pack_all(const PackedFormat& pf, const std::vector<uint8_t>& w, size_t rb, int nrows, int64_t n) {
  const int groups = (nrows + pf.rows - 1) / pf.rows;
  const size_t gb = pf.group_bytes(n);
  std::vector<uint8_t> out(gb * size_t(groups), 0xAB);  // pack must write every byte
  for (int g = 0; g < groups; ++g)
    pf.pack(w.data() + rb * size_t(g * pf.rows), rb, std::min(pf.rows, nrows - g * pf.rows), n,
            out.data() + gb * size_t(g));
  return out;
}

double abs_dot_dequantized(DType wt, const void* w, const void* a, int64_t n) {
  std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
  dequantize_row(wt, w, fw.data(), n);
  dequantize_row(DType::Q8_0, a, fa.data(), n);
  double s = 0.0;
  for (size_t i = 0; i < fw.size(); ++i) s += std::fabs(double(fw[i]) * fa[i]);
  return s;
}

}  // namespace

TEST_CASE("packed gemm matches the unpacked ref vec_dot per row and token") {
  std::mt19937 rng(2024);
  for (const FormatCase& fc : formats_to_test()) {
    const PackedFormat& pf = fc.pf;
    const std::string fmt = std::string(dtype_name(fc.type)) + " " + fc.name;
    CAPTURE(fmt);
    const VecDotFn ref_dot = fc.type == DType::Q4_0 ? vec_dot_q4_0_q8_0_ref : vec_dot_q8_0_q8_0_ref;
    for (int64_t n : {32, 64, 2048, 5632}) {
      CAPTURE(n);
      const size_t rb = dtype_row_bytes(fc.type, n), ab = pf.act_bytes(n), qb = dtype_row_bytes(DType::Q8_0, n);
      for (int nrows : {1, 5, 16, 37}) {
        CAPTURE(nrows);
        const auto w = make_rows(rng, fc.type, n, nrows);
        const auto grp = pack_all(pf, w, rb, nrows, n);
        const int groups = (nrows + pf.rows - 1) / pf.rows;
        const size_t out_stride = size_t(groups * pf.rows);
        for (int ntok : {1, 3, 7, 64}) {
          if (n > 2048 && ntok == 64 && fc.name.rfind("ref", 0) == 0) continue;  // the scalar gemm is slow
          CAPTURE(ntok);
          std::vector<uint8_t> act(ab * size_t(ntok)), qref(qb * size_t(ntok));
          for (int t = 0; t < ntok; ++t) {
            const auto x = uniform_floats(rng, n, -1.0f, 1.0f);
            pf.prepare_act(x.data(), n, act.data() + ab * size_t(t));
            quantize_row(DType::Q8_0, x.data(), qref.data() + qb * size_t(t), n);
          }
          std::vector<float> out(out_stride * size_t(ntok), -1.0f);
          for (int g = 0; g < groups; ++g)
            pf.gemm(n, grp.data() + pf.group_bytes(n) * size_t(g), act.data(), ntok, out.data() + g * pf.rows,
                    out_stride);
          int bad = 0;
          for (int t = 0; t < ntok; ++t) {
            const uint8_t* a = qref.data() + qb * size_t(t);
            for (int r = 0; r < nrows; ++r) {
              const double want = ref_dot(int(n), w.data() + rb * size_t(r), a);
              const double tol = kMaxPackedErr * abs_dot_dequantized(fc.type, w.data() + rb * size_t(r), a, n);
              if (std::fabs(out[size_t(t) * out_stride + size_t(r)] - want) > tol + 1e-30) ++bad;
            }
            for (size_t r = size_t(nrows); r < out_stride; ++r)  // zero rows of a partial group
              if (out[size_t(t) * out_stride + r] != 0.0f) ++bad;
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}

TEST_CASE("prepare_act holds the ref Q8_0 quants, scales and offset corrections") {
  std::mt19937 rng(7);
  for (const FormatCase& fc : formats_to_test()) {
    const std::string fmt = std::string(dtype_name(fc.type)) + " " + fc.name;
    CAPTURE(fmt);
    // The signed Q8_0 forms ("q8_0s-ref", AVX2's "q8_0x8s") keep the quants as they are.
    const std::string pf_name = fc.pf.name;
    const bool q8_signed = pf_name == "q8_0s-ref" || pf_name == "q8_0x8s";
    const int offset = fc.type == DType::Q4_0 ? packed::kQ4Offset : q8_signed ? 0 : packed::kQ8Offset;
    for (int64_t n : {32, 2048, 5632}) {
      CAPTURE(n);
      auto x = uniform_floats(rng, n, -3.0f, 3.0f);
      x[5] = 0.5f;  // ties: roundf's half-away-from-zero must be kept
      std::fill(x.begin() + 32 * ((n / 32) - 1), x.end(), 0.0f);  // an all-zero last block: d = 0
      std::vector<uint8_t> act(fc.pf.act_bytes(n));
      fc.pf.prepare_act(x.data(), n, act.data());
      std::vector<block_q8_0> q(size_t(n / 32));
      quantize_row_q8_0_ref(x.data(), q.data(), n);
      const packed::ActView a = packed::act_view(act.data(), n);
      int bad = 0;
      for (size_t b = 0; b < q.size(); ++b) {
        if (std::memcmp(a.qs + 32 * b, q[b].qs, 32) != 0) ++bad;
        if (fp32_to_fp16(a.d[b]) != q[b].d || a.d[b] != fp16_to_fp32(q[b].d)) ++bad;
        int32_t sum = 0;
        for (int8_t v : q[b].qs) sum += v;
        if (a.corr[b] != -offset * sum) ++bad;
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("pack places every weight where the layout says and zeroes missing rows") {
  std::mt19937 rng(3);
  constexpr int R = 16;
  constexpr int64_t n = 96;  // three blocks: a full pair and a half-empty one
  constexpr int kCount = 5;
  using G4 = packed::GeometryQ4_0<R>;
  using G8 = packed::GeometryQ8_0<R>;
  CHECK(G4::group_bytes(n) == 2 * G4::kPair);
  CHECK(G4::kPair == 576);   // == 16 rows x 2 blocks x 18 B: no padding
  CHECK(G8::kPair == 1088);  // == 16 rows x 2 blocks x 34 B
  CHECK(G4::group_bytes(4096) == size_t(R) * dtype_row_bytes(DType::Q4_0, 4096));

  const auto w4 = make_rows(rng, DType::Q4_0, n, kCount);
  std::vector<uint8_t> g4(G4::group_bytes(n), 0xAB);
  packed::pack_q4_0<R>(w4.data(), dtype_row_bytes(DType::Q4_0, n), kCount, n, g4.data());
  const auto w8 = make_rows(rng, DType::Q8_0, n, kCount);
  std::vector<uint8_t> g8(G8::group_bytes(n), 0xAB);
  packed::pack_q8_0<R>(w8.data(), dtype_row_bytes(DType::Q8_0, n), kCount, n, g8.data());

  int bad = 0;
  for (int r = 0; r < R; ++r) {
    const auto* x4 = reinterpret_cast<const block_q4_0*>(w4.data() + dtype_row_bytes(DType::Q4_0, n) * size_t(r));
    const auto* x8 = reinterpret_cast<const block_q8_0*>(w8.data() + dtype_row_bytes(DType::Q8_0, n) * size_t(r));
    for (int b = 0; b < n / 32; ++b) {
      ggml_half d4, d8;
      std::memcpy(&d4, g4.data() + G4::scales_at(b) + 2 * size_t(r), 2);
      std::memcpy(&d8, g8.data() + G8::scales_at(b) + 2 * size_t(r), 2);
      if (d4 != (r < kCount ? x4[b].d : 0) || d8 != (r < kCount ? x8[b].d : 0)) ++bad;
      for (int k = 0; k < 32; ++k) {
        const int u4 = packed::weight_q4_0<R>(g4.data() + G4::qs_at(b), r, k);
        const int u8 = packed::weight_q8_0<R>(g8.data() + G8::qs_at(b), r, k);
        const int want4 = r < kCount ? (k < 16 ? x4[b].qs[k] & 0x0F : x4[b].qs[k - 16] >> 4) : 0;
        const int want8 = r < kCount ? x8[b].qs[k] + packed::kQ8Offset : 0;
        if (u4 != want4 || u8 != want8) ++bad;
      }
    }
  }
  CHECK(bad == 0);
  // The signed Q8_0 form: the same places, the int8 quants themselves.
  std::vector<uint8_t> g8s(G8::group_bytes(n), 0xAB);
  packed::pack_q8_0<R, 0>(w8.data(), dtype_row_bytes(DType::Q8_0, n), kCount, n, g8s.data());
  for (int r = 0; r < R; ++r) {
    const auto* x8 = reinterpret_cast<const block_q8_0*>(w8.data() + dtype_row_bytes(DType::Q8_0, n) * size_t(r));
    for (int b = 0; b < n / 32; ++b)
      for (int k = 0; k < 32; ++k)
        bad += packed::weight_q8_0<R, true>(g8s.data() + G8::qs_at(b), r, k) != (r < kCount ? x8[b].qs[k] : 0);
  }
  for (size_t i = G8::scales_at(0); i < G8::scales_at(0) + 2 * size_t(R); ++i) bad += g8s[i] != g8[i];
  CHECK(bad == 0);
  // The empty partner of the odd last block is all zero.
  for (size_t i = G4::qs_at(3); i < G4::scales_at(2); ++i) bad += g4[i] != 0;
  for (size_t i = G4::scales_at(3); i < g4.size(); ++i) bad += g4[i] != 0;
  CHECK(bad == 0);
}

TEST_CASE("pack rejects rows that do not fit") {
  std::vector<uint8_t> src(dtype_row_bytes(DType::Q4_0, 64) * 17), dst(packed::GeometryQ4_0<16>::group_bytes(64));
  CHECK_THROWS_AS(packed::pack_q4_0<16>(src.data(), dtype_row_bytes(DType::Q4_0, 64), 17, 64, dst.data()), Error);
  CHECK_THROWS_AS(packed::pack_q4_0<16>(src.data(), dtype_row_bytes(DType::Q4_0, 64), 1, 48, dst.data()), Error);
}

// IQ4_NL and IQ4_XS in Q4_0's layout (x86: iq4_nlx16 / iq4_nlx8, iq4_xsx16 / iq4_xsx8, resident
// only): gemm (decode) gives each token the same table's vec_dot of the file's row bit for bit (it
// repeats its float steps), over block counts that are and are not multiples of 8, partial groups
// and several tokens; prefill_gemm is within kMaxPackedErr of it (or, where the form has none,
// to_file_row gives the u8 GEMM the file's rows); the packed group gives every row's file bytes back.
TEST_CASE("packed IQ4_NL and IQ4_XS: decode gives the file's vec_dot bit for bit, prefill close to it, the rows read back") {
  std::mt19937 rng(4242);
  int tables = 0;
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    for (DType type : {DType::IQ4_NL, DType::IQ4_XS}) {
      const PackedFormat& pf = kt.packed_of(type);
      if (pf.rows <= 1) continue;
      ++tables;
      const std::string what = std::string(isa_name(isa)) + " " + pf.name;
      CAPTURE(what);
      REQUIRE((pf.prefill_gemm != nullptr || pf.to_file_row != nullptr));
      REQUIRE((pf.rows == 16 || pf.rows == 8));
      const bool xs = type == DType::IQ4_XS;
      const auto group_row = xs ? (pf.rows == 16 ? packed::iq4_xs_group_row<16> : packed::iq4_xs_group_row<8>)
                                : (pf.rows == 16 ? packed::q4_0_group_row<16> : packed::q4_0_group_row<8>);
      CHECK(pf.resident_only);
      const TypeKernels& k = kt.of(type);
      const DType act_type = k.vec_dot_type;
      for (int64_t n : {256, 256 * 9, 2048, 32 * 176}) {
        CAPTURE(n);
        const size_t rb = dtype_row_bytes(type, n), ab = pf.act_bytes(n), qb = dtype_row_bytes(act_type, n);
        for (int nrows : {1, 5, pf.rows + 3}) {
          CAPTURE(nrows);
          const auto w = make_rows(rng, type, n, nrows);
          const auto grp = pack_all(pf, w, rb, nrows, n);
          const int groups = (nrows + pf.rows - 1) / pf.rows;
          const size_t out_stride = size_t(groups * pf.rows);
          int back_bad = 0;
          std::vector<uint8_t> back(rb);
          for (int r = 0; r < nrows; ++r) {
            const uint8_t* g = grp.data() + pf.group_bytes(n) * size_t(r / pf.rows);
            group_row(g, n, r % pf.rows, back.data());
            if (std::memcmp(back.data(), w.data() + rb * size_t(r), rb) != 0) ++back_bad;
            if (!pf.to_file_row) continue;
            pf.to_file_row(g, n, r % pf.rows, back.data());
            if (std::memcmp(back.data(), w.data() + rb * size_t(r), rb) != 0) ++back_bad;
          }
          CHECK(back_bad == 0);
          for (int ntok : {1, 3, 9}) {
            CAPTURE(ntok);
            std::vector<uint8_t> act(ab * size_t(ntok)), q(qb * size_t(ntok));
            for (int t = 0; t < ntok; ++t) {
              const auto x = uniform_floats(rng, n, -1.0f, 1.0f);
              pf.prepare_act(x.data(), n, act.data() + ab * size_t(t));
              kt.of(act_type).from_float(x.data(), q.data() + qb * size_t(t), n);
            }
            std::vector<float> out(out_stride * size_t(ntok), -1.0f), pre(out);
            for (int g = 0; g < groups; ++g) {
              const uint8_t* gp = grp.data() + pf.group_bytes(n) * size_t(g);
              pf.gemm(n, gp, act.data(), ntok, out.data() + g * pf.rows, out_stride);
              if (pf.prefill_gemm) pf.prefill_gemm(n, gp, act.data(), ntok, pre.data() + g * pf.rows, out_stride);
            }
            int bad = 0, far = 0;
            std::vector<float> fw(static_cast<size_t>(n)), fa(static_cast<size_t>(n));
            for (int t = 0; t < ntok; ++t)
              for (int r = 0; r < nrows; ++r) {
                const uint8_t* a = q.data() + qb * size_t(t);
                const float want = k.vec_dot(int(n), w.data() + rb * size_t(r), a);
                const float got = out[size_t(t) * out_stride + size_t(r)];
                if (std::memcmp(&want, &got, sizeof want) != 0) ++bad;
                dequantize_row(type, w.data() + rb * size_t(r), fw.data(), n);
                dequantize_row(act_type, a, fa.data(), n);
                double mag = 0.0;
                for (size_t i = 0; i < fw.size(); ++i) mag += std::fabs(double(fw[i]) * fa[i]);
                if (pf.prefill_gemm && std::fabs(pre[size_t(t) * out_stride + size_t(r)] - want) > kMaxPackedErr * mag + 1e-30)
                  ++far;
              }
            CHECK(bad == 0);
            CHECK(far == 0);
          }
        }
      }
    }
  }
#if EDGELLM_HAS_X86_KERNELS
  CHECK(tables > 0);  // every x86 level has the forms
#endif
}
