// The i-quant and ternary types (IQ1_S ... IQ4_XS, TQ1_0, TQ2_0): the scalar reference dots against
// a float dot of the dequantized rows; every ISA table's vec_dot / vec_dot_rows and its matmul paths
// (decode GEMV, streamed or not, and prefill: the dots for a few tokens, the u8 GEMM of
// kernels/layouts/unpack_u8.hpp from kGemmMinTokens on) against the reference, on random blocks and
// on the rows of the shared iq models; unpack_row_u8's GEMM form against the dequantizers; the ternary digit decoding against ggml's encoding rule. Written
// over the KernelTable only, so SIMD kernels registered for these types are checked here as soon
// as they exist (until then every table holds the references).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/gguf/reader.hpp"
#include "edgellm/kernels/layouts/unpack_u8.hpp"
#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"
#include "q8_1_float_model.hpp"

namespace dot_iquants_test {

using namespace edgellm;

// |ref dot - float dot of the dequantized rows| / sum |w_i * a_i|: the ref applies the scales after
// the integer sums (ggml's order), the float dot before, so only float rounding differs (the same
// bound as test_dot.cpp's kMaxRefVsDequantErr; measured <= 2.6e-8 on the EPYC, 200 random rows of
// 4096 per type).
constexpr double kMaxIqRefVsDequantErr = 1e-5;
// |ISA dot - ref dot| / sum |w_i * a_i|: integer sums are exact, only the order of the float
// additions of sub-block / block results may differ (test_dot.cpp's kMaxDotErr* for the K-quants).
constexpr double kMaxIqDotErr = 2e-6;
// matmul's outputs against the ref dot per row, same measure: its paths call the same kernels
// (vec_dot, vec_dot_rows, a packed or u8 form if one is ever added, with float order differences).
constexpr double kMaxIqMatmulErr = 2e-6;
// Prefill through the u8 GEMM, same measure: the weights as s * u + m per 16 (float s and m, the
// offset's share taken from the activations' block sums) and the float additions in the tile's
// order (test_gemm_u8.cpp's kMaxGemmErr).
constexpr double kMaxIqPrefillErr = 1e-5;
// unpack_row_u8's s * u + m against the dequantizer, as a fraction of the row's largest |w|: m = -off * s
// cancels most of s * u (off <= 127, u <= 240), so a few float epsilons of off * s.
constexpr float kMaxIqUnpackErr = 4e-6f;

const DType kIqTypes[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                          DType::IQ1_M,   DType::IQ4_NL, DType::IQ4_XS, DType::TQ1_0,  DType::TQ2_0};

std::vector<int> iq_lengths(DType t) { return dtype_block_size(t) == 32 ? std::vector<int>{32, 96, 32 * 17, 4096} : std::vector<int>{256, 768, 4096}; }

// Random bytes are a valid block of every one of these types except for the fp16 scale, which may
// come out NaN or inf: it is set to a finite value in [-0.1, 0.1) (IQ1_M: spread over the top
// nibbles of its four scale words).
void set_iq_scale(DType t, uint8_t* blk, std::mt19937& rng) {
  const uint16_t h = fp32_to_fp16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
  size_t off = 0;
  switch (t) {
    case DType::TQ1_0: off = offsetof(block_tq1_0, d); break;
    case DType::TQ2_0: off = offsetof(block_tq2_0, d); break;
    case DType::IQ1_M: {
      uint16_t sc[4];
      std::memcpy(sc, blk + offsetof(block_iq1_m, scales), sizeof sc);
      for (int k = 0; k < 4; ++k) sc[k] = uint16_t((sc[k] & 0x0FFF) | (((h >> (4 * k)) & 0xF) << 12));
      std::memcpy(blk + offsetof(block_iq1_m, scales), sc, sizeof sc);
      return;
    }
    default: off = 0;  // d is the first field of the others
  }
  std::memcpy(blk + off, &h, sizeof h);
}

// nrows rows of n weights at `stride` bytes apart (>= the row's bytes), random valid blocks.
std::vector<uint8_t> random_iq_rows(std::mt19937& rng, DType t, int n, int nrows, size_t stride) {
  std::vector<uint8_t> w(stride * size_t(nrows));
  for (auto& b : w) b = uint8_t(rng());
  const size_t bb = dtype_block_bytes(t), nb = size_t(n) / dtype_block_size(t);
  for (int r = 0; r < nrows; ++r)
    for (size_t i = 0; i < nb; ++i) set_iq_scale(t, w.data() + stride * size_t(r) + bb * i, rng);
  return w;
}

// Checks table t's kernels for type wt on nrows rows (stride apart) against the ref table's dot:
// vec_dot, vec_dot_rows if the table has it, and matmul() of the rows as one matrix, decode (one
// token) and prefill (5 tokens, the first being x; 8, 16 and 33: the u8 GEMM's whole and partial
// token tiles where the table's GEMM takes the type).
void check_rows_against_ref(const KernelTable& t, const KernelTable& ref, DType wt, const uint8_t* w, size_t stride,
                            int n, int nrows, std::mt19937& rng) {
  const TypeKernels& k = t.of(wt);
  const TypeKernels& kr = ref.of(wt);
  REQUIRE(static_cast<bool>(k.vec_dot));
  REQUIRE(k.vec_dot_type == kr.vec_dot_type);
  const DType at = k.vec_dot_type;
  constexpr int kTok = 5, kMaxTok = 33;
  const auto x = edgellm_test::uniform_floats(rng, int64_t(n) * kMaxTok, -3.0f, 3.0f);
  std::vector<uint8_t> a(dtype_row_bytes(at, n) * kTok);
  for (int c = 0; c < kTok; ++c) ref.of(at).from_float(x.data() + size_t(c) * size_t(n), a.data() + dtype_row_bytes(at, n) * size_t(c), n);
  // want[c * nrows + r]: the ref dot of row r with token c; scale the same index's sum |w_i * a_i|.
  std::vector<double> want(size_t(nrows) * kTok), scale(want.size());
  for (int c = 0; c < kTok; ++c)
    for (int r = 0; r < nrows; ++r) {
      const uint8_t* row = w + stride * size_t(r);
      const void* ac = a.data() + dtype_row_bytes(at, n) * size_t(c);
      const size_t i = size_t(c) * size_t(nrows) + size_t(r);
      want[i] = kr.vec_dot(n, row, ac);
      double fdot = 0.0;
      scale[i] = edgellm_test::abs_dot_dequantized(wt, row, at, ac, n, &fdot);
      CHECK(std::fabs(want[i] - fdot) <= kMaxIqRefVsDequantErr * scale[i] + 1e-30);
      if (c == 0) CHECK(std::fabs(k.vec_dot(n, row, ac) - want[i]) <= kMaxIqDotErr * scale[i] + 1e-30);
    }
  if (k.vec_dot_rows) {
    for (int nr = 1; nr <= nrows; ++nr) {
      CAPTURE(nr);
      std::vector<float> out(size_t(nr) + 1, -12345.0f);
      k.vec_dot_rows(n, out.data(), nr, w, stride, a.data());
      for (int r = 0; r < nr; ++r) CHECK(std::fabs(out[size_t(r)] - want[size_t(r)]) <= kMaxIqDotErr * scale[size_t(r)] + 1e-30);
      CHECK(out[size_t(nr)] == -12345.0f);  // writes exactly nr results
    }
  }
  // matmul: activations quantized by the table's own from_float, as the model does; that may
  // differ from the ref's by one step per element on a SIMD table, so the ref is recomputed here
  // from the table's activation rows.
  MatmulWeight mw{wt, w, n, nrows, stride};
  MatmulScratch scratch;
  ThreadPool pool(2);
  for (int ntok : {1, kTok, 8, 16, kMaxTok}) {
    CAPTURE(ntok);
    const double tol = ntok == 1 ? kMaxIqMatmulErr : kMaxIqPrefillErr;
    std::vector<float> y(size_t(ntok) * size_t(nrows));
    matmul(t, &pool, mw, x.data(), ntok, y.data(), scratch);
    std::vector<uint8_t> ta(dtype_row_bytes(at, n));
    for (int c = 0; c < ntok; ++c) {
      t.of(at).from_float(x.data() + size_t(c) * size_t(n), ta.data(), n);
      for (int r = 0; r < nrows; ++r) {
        const uint8_t* row = w + stride * size_t(r);
        double unused = 0.0;
        const double s = edgellm_test::abs_dot_dequantized(wt, row, at, ta.data(), n, &unused);
        CHECK(std::fabs(y[size_t(c) * size_t(nrows) + size_t(r)] - kr.vec_dot(n, row, ta.data())) <= tol * s + 1e-30);
      }
    }
  }
}

}  // namespace dot_iquants_test

using namespace dot_iquants_test;

TEST_CASE("i-quants: every ISA's kernels and matmul match the ref dot on random blocks and padded strides") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(33);
  constexpr size_t kPad = 6;  // a row stride that is not a multiple of the block size nor of 4 bytes
  for (Isa isa : available_isas()) {
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (DType wt : kIqTypes) {
      const std::string type_s = dtype_name(wt), variant_s = t.of(wt).variant;
      CAPTURE(type_s);
      CAPTURE(variant_s);
      for (int n : iq_lengths(wt)) {
        CAPTURE(n);
        // 11: not a multiple of any unroll; 5: a 16-row grouped tile whose second group is empty.
        for (int rows : {11, 5}) {
          CAPTURE(rows);
          const size_t stride = dtype_row_bytes(wt, n) + kPad;
          const auto w = random_iq_rows(rng, wt, n, rows, stride);
          check_rows_against_ref(t, ref, wt, w.data(), stride, n, rows, rng);
        }
      }
    }
  }
}

TEST_CASE("i-quants: every ISA's kernels match the ref on the rows of the shared iq models") {
  const std::string dir = edgellm_test::kData + "/iq/models/";
  if (!edgellm_test::dir_exists(dir)) EDGELLM_SKIP("no shared data at ", dir);
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(34);
  int checked = 0;
  for (const char* model : {"IQ1_M", "IQ1_S", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ3_M", "IQ3_S", "IQ3_XXS",
                            "IQ4_NL", "IQ4_XS", "Q2_K_S", "Q4_K_M", "TQ1_0", "TQ2_0"}) {
    const std::string path = dir + "tiny-llama-256-" + model + "-imat.gguf";
    if (!edgellm_test::path_exists(path)) {
      EDGELLM_SKIP_PART(path, " not found");
      continue;
    }
    const GgufFile f = GgufFile::open(path);
    std::set<std::pair<DType, int64_t>> seen;  // one matrix per type and row length of each file
    for (const GgufTensorInfo& ti : f.tensors()) {
      bool iq = false;
      for (DType wt : kIqTypes) iq = iq || ti.type == wt;
      if (!iq || ti.n_dims != 2 || !seen.insert({ti.type, ti.ne[0]}).second) continue;
      const std::string name = std::string(model) + " " + ti.name + " " + dtype_name(ti.type);
      CAPTURE(name);
      const int n = int(ti.ne[0]);
      const int nrows = int(std::min<int64_t>(ti.ne[1], 9));
      // The stored rows dequantize to finite values.
      std::vector<float> row(static_cast<size_t>(n));
      bool finite = true;
      for (int r = 0; r < nrows; ++r) {
        dequantize_row(ti.type, static_cast<const uint8_t*>(ti.data) + dtype_row_bytes(ti.type, n) * size_t(r), row.data(), n);
        for (float v : row) finite = finite && std::isfinite(v);
      }
      CHECK(finite);
      for (Isa isa : available_isas()) {
        const std::string isa_s = isa_name(isa);
        CAPTURE(isa_s);
        check_rows_against_ref(make_kernel_table(isa), ref, ti.type, static_cast<const uint8_t*>(ti.data),
                               dtype_row_bytes(ti.type, n), n, nrows, rng);
      }
      ++checked;
    }
  }
  MESSAGE("i-quant / ternary tensors checked: ", checked);
  CHECK(checked > 0);
}

TEST_CASE("tq1_0: the base-3 digits come back as ggml's quantizer stores them") {
  // ggml (quantize_row_tq1_0_ref) packs 5 digits d0..d4 in {0, 1, 2} (weight + 1) as v = d0 * 81 +
  // d1 * 27 + d2 * 9 + d3 * 3 + d4, stored as ceil(v * 256 / 243); 4 digits as 3v, the same way.
  for (int v = 0; v < 243; ++v) {
    const uint8_t byte = uint8_t((v * 256 + 242) / 243);
    int rest = v;
    for (int n = 4; n >= 0; --n, rest /= 3) CHECK(tq1_digit(byte, n) == rest % 3);
  }
  // A whole block: weight i = (i % 3) - 1 in the order of dequantize_row_tq1_0.
  block_tq1_0 b{};
  int8_t want[QK_K];
  for (int i = 0; i < QK_K; ++i) want[i] = int8_t(i % 3 - 1);
  auto pack = [&](const int8_t* w, int ndig, int step) {  // digits w[0], w[step], ... most significant first
    int v = 0;
    for (int k = 0; k < ndig; ++k) v = 3 * v + w[k * step] + 1;
    for (int k = ndig; k < 5; ++k) v *= 3;
    return uint8_t((v * 256 + 242) / 243);
  };
  for (int m = 0; m < 32; ++m) b.qs[m] = pack(want + m, 5, 32);
  for (int m = 0; m < 16; ++m) b.qs[32 + m] = pack(want + 160 + m, 5, 16);
  for (int j = 0; j < 4; ++j) b.qh[j] = pack(want + 240 + j, 4, 4);
  b.d = fp32_to_fp16(0.5f);
  float y[QK_K];
  dequantize_row_tq1_0(&b, y, QK_K);
  for (int i = 0; i < QK_K; ++i) CHECK(y[i] == 0.5f * want[i]);
}

TEST_CASE("iq4_nl / tq2_0: hand-made blocks dequantize to their table values") {
  block_iq4_nl b{};
  b.d = fp32_to_fp16(2.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[QK4_NL];
  dequantize_row_iq4_nl(&b, y, QK4_NL);
  for (int j = 0; j < 16; ++j) {
    CHECK(y[j] == 2.0f * kvalues_iq4nl[j]);
    CHECK(y[j + 16] == 2.0f * kvalues_iq4nl[15 - j]);
  }
  block_tq2_0 t{};
  t.d = fp32_to_fp16(1.0f);
  for (int j = 0; j < 64; ++j) t.qs[j] = uint8_t(0 | (1 << 2) | (2 << 4) | (3 << 6));  // digits 0, 1, 2, 3 -> -1, 0, 1, 2
  float z[QK_K];
  dequantize_row_tq2_0(&t, z, QK_K);
  for (int i = 0; i < QK_K; ++i) CHECK(z[i] == float((i % 128) / 32 - 1));
}

TEST_CASE("i-quants: unpack_row_u8 gives the dequantized values within the type's u8 range") {
  std::mt19937 rng(35);
  for (DType wt : kIqTypes) {
    const std::string type_s = dtype_name(wt);
    CAPTURE(type_s);
    REQUIRE(can_unpack_u8(wt));
    const int n = 4 * QK_K;
    const auto w = random_iq_rows(rng, wt, n, 1, dtype_row_bytes(wt, n));
    std::vector<float> want(static_cast<size_t>(n)), s(static_cast<size_t>(n / 16)), m(static_cast<size_t>(n / 16));
    std::vector<uint8_t> u(static_cast<size_t>(n));
    dequantize_row(wt, w.data(), want.data(), n);
    unpack_row_u8(wt, w.data(), n, u.data(), s.data(), m.data());
    float amax = 0.0f;
    for (float v : want) amax = std::max(amax, std::fabs(v));
    int umax = 0, bad = 0;
    for (int i = 0; i < n; ++i) {
      umax = std::max(umax, int(u[size_t(i)]));
      bad += std::fabs(s[size_t(i / 16)] * float(u[size_t(i)]) + m[size_t(i / 16)] - want[size_t(i)]) > kMaxIqUnpackErr * amax;
    }
    CHECK(bad == 0);
    CHECK(umax <= u8_form_max(wt));
    // The signed-offset K form's offset table (u8_form_offset) is the unpacker's: m = -off * s.
    if (u8_form_offset(wt) >= 0) {
      int other_off = 0;
      for (int g = 0; g < n / 16; ++g)
        if (s[size_t(g)] != 0.0f) other_off += m[size_t(g)] != -float(u8_form_offset(wt)) * s[size_t(g)];
      CHECK(other_off == 0);
    }
    // The types but IQ1 (whose 8q + delta has its own scale) take their float sub-block scale from the
    // K form's integer one, (d / 2^k) * Sc: bit for bit the dequantizer's dl, so s * (u - off) is
    // exactly its dl * q.
    if (wt == DType::IQ1_S || wt == DType::IQ1_M) continue;
    int inexact = 0;
    for (int i = 0; i < n; ++i) {
      const float sg = s[size_t(i / 16)];
      if (sg == 0.0f) continue;
      const int off = int(std::lround(-m[size_t(i / 16)] / sg));
      inexact += sg * float(int(u[size_t(i)]) - off) != want[size_t(i)];
    }
    CHECK(inexact == 0);
  }
}

#if EDGELLM_HAS_X86_KERNELS
TEST_CASE("i-quants: the x86 levels prefill every type through a u8 GEMM tile") {
  for (Isa isa : available_isas()) {
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    for (DType wt : kIqTypes) {
      const std::string type_s = dtype_name(wt);
      CAPTURE(type_s);
      const MatmulWeight mw{wt, nullptr, 4096, 64, dtype_row_bytes(wt, 4096)};
      CHECK(detail::gemm_u8_applies(t, mw, 8));
      // The Q8_K types take the integer-scale grouped K form (issue 33), but for IQ4_XS's bytes
      // (up to 240) on a level without VNNI, whose vpmaddubsw would saturate: the signed K form
      // there (int8 values, the integer scale per 32 folded into the sums).
      U8Form form = U8Form::Unsigned;
      const DType act = t.of(wt).vec_dot_type;
      const auto tile = detail::u8_gemm_tile(t, wt, act, form);
      CHECK(static_cast<bool>(tile));
      // Without VNNI the types without mins whose values fit (all but IQ4_XS) take the
      // signed-offset K form, its narrow tile for |value| <= 16 (IQ3_S, IQ1, TQ).
      const bool ks_form = t.u8_gemm.tile_ks && u8_form_offset(wt) >= 0 && u8_form_max_abs(wt) <= t.u8_gemm.ks_max_w;
      if (t.u8_gemm.tile_ks_narrow)
        CHECK((tile == t.u8_gemm.tile_ks_narrow) == (ks_form && u8_form_max_abs(wt) <= t.u8_gemm.ks_narrow_max_w));
      const bool k_form = has_kscales(wt) && u8_form_max(wt) <= t.u8_gemm.max_u;
      CHECK(has_kscales(wt) == (act == DType::Q8_K));
      const U8Form signed_form = has_signed_k_form(wt) && t.u8_gemm.tile_sk ? U8Form::SignedK
                                 : has_signed_form(wt) && t.u8_gemm.tile_s8 ? U8Form::Signed
                                                                            : U8Form::Unsigned;
      CHECK(form == (ks_form ? U8Form::KSigned : k_form ? U8Form::KScales : signed_form));
      // Every level without VNNI (max_u 127) has the signed tiles; IQ4_XS takes the signed K one.
      CHECK(static_cast<bool>(t.u8_gemm.tile_sk) == (t.u8_gemm.max_u < 240));
      CHECK(static_cast<bool>(t.u8_gemm.tile_ks) == (t.u8_gemm.max_u < 240));
      if (wt == DType::IQ4_XS) CHECK(form == (t.u8_gemm.max_u < 240 ? U8Form::SignedK : U8Form::KScales));
      if (wt != DType::IQ4_XS && wt != DType::IQ4_NL && t.u8_gemm.max_u < 240) CHECK(form == U8Form::KSigned);
    }
  }
}

TEST_CASE("i-quants: every x86 level this CPU runs has its own kernels for the 11 types") {
  for (Isa isa : available_isas()) {
    if (isa == Isa::Ref) continue;
    const KernelTable t = make_kernel_table(isa);
    for (DType wt : kIqTypes) {
      const std::string type_s = dtype_name(wt);
      CAPTURE(type_s);
      CHECK(std::string(t.of(wt).variant) == isa_name(isa));
      CHECK(static_cast<bool>(t.of(wt).vec_dot_rows));
    }
  }
}
#endif
