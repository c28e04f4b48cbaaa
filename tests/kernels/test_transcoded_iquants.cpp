// The transcoded i-quant forms (kernels/layouts/transcoded_iquants.hpp,
// kernels/x86/transcoded_iquants-inl.hpp, kernels/neon/transcoded_iquants.hpp), IQ3_S, IQ2_XXS,
// IQ2_XS, IQ2_S (nibble forms on NEON, 3-bit forms on x86), IQ3_XXS, IQ1_S and IQ1_M (x86 only),
// TQ1_0 (tq1_0_t, a TQ2_0 block): the
// transcode is exact (the same weights and dequantized floats as the file's block, on random blocks
// covering every grid point), its u8 GEMM form is the file's, the scalar oracle is the file's
// reference dot bit for bit, and at every x86 level and NEON table (ARMv8.0, dotprod) this CPU runs
// the PackedFormat's GEMM gives each token exactly the level's vec_dot of the file's row, with 1 or
// many tokens; IQ4_XS's iq4_xs_t (NEON; x86 interleaves IQ4_XS's rows: test_packed.cpp) the same
// with its chunk-ordered activations. (Real files' blocks:
// tests/model/test_transcoded_model.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/layouts/transcoded_iquants.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"

#include "../test_util.hpp"
#include "../transcoded_check.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;
using edgellm_test::unpacks_as_file;

namespace {

// Which tables carry a form: IQ2's nibble forms are NEON's, their 3-bit forms x86's.
enum class On { Both, X86, Neon };
// One transcoded form: the file's type, its transcoded block size and the layout's functions.
struct TranscodedCase {
  DType type;
  const char* name;
  size_t block_bytes;
  void (*pack)(const void*, size_t, int, int64_t, void*);
  void (*unpack_file)(const void* x, int b, int8_t* q);  // block b's weights
  void (*unpack_t)(const void* t, int b, int8_t* q);
  void (*dequantize_t)(const void* t, float* y, int64_t n);
  UnpackRowU8Fn unpack_u8;
  VecDotFn dot_file_ref;
  void (*gemm_ref)(int64_t, const void*, const void*, int, float*, size_t);
  On on;
};

template <class File, void (*UnpackFile)(const File&, int8_t*), class T, void (*Unpack)(const T&, int8_t*),
          void (*Dequantize)(const T*, float*, int64_t)>
TranscodedCase transcoded_case(DType type, const char* name, void (*pack)(const void*, size_t, int, int64_t, void*),
                               UnpackRowU8Fn unpack_u8, VecDotFn dot_file_ref,
                               void (*gemm_ref)(int64_t, const void*, const void*, int, float*, size_t),
                               On on = On::Both) {
  return {type,
          name,
          sizeof(T),
          pack,
          [](const void* x, int b, int8_t* q) { UnpackFile(static_cast<const File*>(x)[b], q); },
          [](const void* t, int b, int8_t* q) { Unpack(static_cast<const T*>(t)[b], q); },
          [](const void* t, float* y, int64_t n) { Dequantize(static_cast<const T*>(t), y, n); },
          unpack_u8,
          dot_file_ref,
          gemm_ref,
          on};
}

std::vector<TranscodedCase> transcoded_cases() {
  return {transcoded_case<block_iq3_s, unpack_iq3_s, block_iq3_s_t, unpack_iq3_s_t, dequantize_row_iq3_s_t>(
              DType::IQ3_S, "iq3_s_t", FormIQ3_S_T::pack, unpack_u8_iq3_s_t, vec_dot_iq3_s_q8_K_ref, FormIQ3_S_T::gemm_ref),
          transcoded_case<block_iq2_xxs, unpack_iq2_xxs, block_iq2_xxs_t, unpack_iq2_xxs_t, dequantize_row_iq2_xxs_t>(
              DType::IQ2_XXS, "iq2_xxs_t", FormIQ2_XXS_T::pack, unpack_u8_iq2_xxs_t, vec_dot_iq2_xxs_q8_K_ref,
              FormIQ2_XXS_T::gemm_ref, On::Neon),
          transcoded_case<block_iq2_xs, unpack_iq2_xs, block_iq2_xs_t, unpack_iq2_xs_t, dequantize_row_iq2_xs_t>(
              DType::IQ2_XS, "iq2_xs_t", FormIQ2_XS_T::pack, unpack_u8_iq2_xs_t, vec_dot_iq2_xs_q8_K_ref,
              FormIQ2_XS_T::gemm_ref, On::Neon),
          transcoded_case<block_iq2_s, unpack_iq2_s, block_iq2_s_t, unpack_iq2_xs_t, dequantize_row_iq2_xs_t>(
              DType::IQ2_S, "iq2_s_t", FormIQ2_S_T::pack, unpack_u8_iq2_xs_t, vec_dot_iq2_s_q8_K_ref, FormIQ2_S_T::gemm_ref,
              On::Neon),
          transcoded_case<block_iq2_xxs, unpack_iq2_xxs, block_iq2_xxs_t3, unpack_iq2_xxs_t3, dequantize_row_iq2_xxs_t3>(
              DType::IQ2_XXS, "iq2_xxs_t3", FormIQ2_XXS_T3::pack, unpack_u8_iq2_xxs_t3, vec_dot_iq2_xxs_q8_K_ref,
              FormIQ2_XXS_T3::gemm_ref, On::X86),
          transcoded_case<block_iq2_xs, unpack_iq2_xs, block_iq2_xs_t3, unpack_iq2_xs_t3, dequantize_row_iq2_xs_t3>(
              DType::IQ2_XS, "iq2_xs_t3", FormIQ2_XS_T3::pack, unpack_u8_iq2_xs_t3, vec_dot_iq2_xs_q8_K_ref,
              FormIQ2_XS_T3::gemm_ref, On::X86),
          transcoded_case<block_iq2_s, unpack_iq2_s, block_iq2_s_t3, unpack_iq2_xs_t3, dequantize_row_iq2_xs_t3>(
              DType::IQ2_S, "iq2_s_t3", FormIQ2_S_T3::pack, unpack_u8_iq2_xs_t3, vec_dot_iq2_s_q8_K_ref,
              FormIQ2_S_T3::gemm_ref, On::X86),
          transcoded_case<block_iq3_xxs, unpack_iq3_xxs, block_iq3_xxs_t, unpack_iq3_xxs_t, dequantize_row_iq3_xxs_t>(
              DType::IQ3_XXS, "iq3_xxs_t", FormIQ3_XXS_T::pack, unpack_u8_iq3_xxs_t, vec_dot_iq3_xxs_q8_K_ref,
              FormIQ3_XXS_T::gemm_ref),
          transcoded_case<block_iq1_s, unpack_iq1_s, block_iq1_s_t, unpack_iq1_s_t, dequantize_row_iq1_s_t>(
              DType::IQ1_S, "iq1_s_t", FormIQ1_S_T::pack, unpack_u8_iq1_s_t, vec_dot_iq1_s_q8_K_ref, FormIQ1_S_T::gemm_ref),
          transcoded_case<block_iq1_m, unpack_iq1_m, block_iq1_m_t, unpack_iq1_m_t, dequantize_row_iq1_m_t>(
              DType::IQ1_M, "iq1_m_t", FormIQ1_M_T::pack, unpack_u8_iq1_m_t, vec_dot_iq1_m_q8_K_ref,
              FormIQ1_M_T::gemm_ref),
          transcoded_case<block_tq1_0, unpack_tq1_0, block_tq1_0_t, unpack_tq2_0, dequantize_row_tq2_0>(
              DType::TQ1_0, "tq1_0_t", FormTQ1_0_T::pack, unpack_u8_tq1_0_t, vec_dot_tq1_0_q8_K_ref,
              FormTQ1_0_T::gemm_ref)};
}

// Every point of grid g: its nibble codes read back (Value) as its magnitudes.
template <class G, size_t N, int (*Value)(uint8_t)>
int grid_points_differing(const IqGrid<G, N>& grid, const G* nibbles) {
  int differing = 0;
  for (size_t i = 0; i < N; ++i)
    for (size_t j = 0; j < sizeof(G); ++j)
      differing += Value(uint8_t(nibbles[i] >> (8 * j)) & 15) != int((grid[i] >> (8 * j)) & 0xFF);
  return differing;
}

// A row of n weights of the type from random bytes (every byte pattern of these types is a valid
// block), each block's d a finite scale (IQ1_M: in its scale words' top nibbles).
std::vector<uint8_t> random_iq_row(std::mt19937& rng, DType type, int64_t n) {
  std::vector<uint8_t> v(dtype_row_bytes(type, n));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(-0.05f, 0.05f);
  for (uint8_t& b : v) b = uint8_t(byte(rng));
  const size_t bb = dtype_row_bytes(type, QK_K);
  const size_t d_at = type == DType::TQ1_0 ? bb - 2 : 0;  // d is the i-quants' first field, TQ1_0's last
  for (size_t o = 0; o < v.size(); o += bb) {
    const uint16_t h = fp32_to_fp16_ref(d(rng));
    if (type != DType::IQ1_M) {
      std::memcpy(v.data() + o + d_at, &h, 2);
      continue;
    }
    uint8_t* sc = v.data() + o + offsetof(block_iq1_m, scales);
    for (int w = 0; w < 4; ++w) sc[2 * w + 1] = uint8_t((sc[2 * w + 1] & 0x0F) | (((h >> (4 * w)) & 15) << 4));
  }
  return v;
}

std::vector<uint8_t> transcoded_row(const TranscodedCase& c, const std::vector<uint8_t>& file, int64_t n) {
  std::vector<uint8_t> t(size_t(n / QK_K) * c.block_bytes);
  c.pack(file.data(), file.size(), 1, n, t.data());
  return t;
}

std::vector<uint8_t> q8_K_rows(std::mt19937& rng, int64_t n, int ntok) {
  std::vector<uint8_t> a(act_bytes_q8_K_rows(n) * size_t(ntok));
  for (int t = 0; t < ntok; ++t) {
    const auto x = uniform_floats(rng, n, -3.0f, 3.0f);
    quantize_row_q8_K_ref(x.data(), reinterpret_cast<block_q8_K*>(a.data() + act_bytes_q8_K_rows(n) * size_t(t)), n);
  }
  return a;
}

}  // namespace

TEST_CASE("transcoded i-quants keep every weight, dequantized float and u8 GEMM byte of the file's blocks") {
  std::mt19937 rng(47);
  for (const TranscodedCase& c : transcoded_cases()) {
    CAPTURE(c.name);
    // 64 blocks x 32 or 64 indexes: every grid point many times over
    const int64_t n = 64 * QK_K;
    const std::vector<uint8_t> x = random_iq_row(rng, c.type, n);
    const std::vector<uint8_t> t = transcoded_row(c, x, n);
    int differing = 0;
    for (int b = 0; b < int(n / QK_K); ++b) {
      int8_t qa[QK_K], qb[QK_K];
      c.unpack_file(x.data(), b, qa);
      c.unpack_t(t.data(), b, qb);
      differing += std::memcmp(qa, qb, QK_K) != 0;
    }
    CHECK(differing == 0);
    std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
    dequantize_row(c.type, x.data(), fa.data(), n);
    c.dequantize_t(t.data(), fb.data(), n);
    CHECK(std::memcmp(fa.data(), fb.data(), sizeof(float) * size_t(n)) == 0);
    CHECK(unpacks_as_file(c.type, x.data(), c.unpack_u8, t.data(), n));
  }
  CHECK_THROWS_AS(transcode::odd_nibble(2), Error);
  CHECK_THROWS_AS(transcode::odd_nibble(-17), Error);
  CHECK_THROWS_AS(transcode::iq2_nibble(9), Error);
  CHECK_THROWS_AS(transcode::iq2_nibble(0), Error);
  CHECK_THROWS_AS(transcode::iq3_xxs_nibble(60), Error);
  CHECK_THROWS_AS(transcode::iq3_xxs_nibble(-63), Error);
  CHECK_THROWS_AS(transcode::ternary_code(2), Error);
  CHECK_THROWS_AS(transcode::ternary_code(-2), Error);
}

TEST_CASE("transcoded i-quants: every grid point's nibble codes are its magnitudes") {
  // (the random blocks above draw the IQ2_S grid's 1024 points 2048 times: some points not at all)
  CHECK(grid_points_differing<uint32_t, 512, transcode::odd_value>(iq3s_grid, iq3_s_grid_nibbles()) == 0);
  CHECK(grid_points_differing<uint64_t, 256, transcode::iq2_value>(iq2xxs_grid, iq2_xxs_grid_nibbles()) == 0);
  CHECK(grid_points_differing<uint64_t, 512, transcode::iq2_value>(iq2xs_grid, iq2_xs_grid_nibbles()) == 0);
  CHECK(grid_points_differing<uint64_t, 1024, transcode::iq2_value>(iq2s_grid, iq2_s_grid_nibbles()) == 0);
  CHECK(grid_points_differing<uint32_t, 256, transcode::iq3_xxs_value>(iq3xxs_grid, iq3_xxs_grid_nibbles()) == 0);
}

TEST_CASE("transcoded i-quants: the scalar oracle is the file's reference dot bit for bit") {
  std::mt19937 rng(48);
  for (const TranscodedCase& c : transcoded_cases()) {
    CAPTURE(c.name);
    for (int64_t n : {256, 1280}) {
      const std::vector<uint8_t> x = random_iq_row(rng, c.type, n);
      const std::vector<uint8_t> t = transcoded_row(c, x, n);
      const std::vector<uint8_t> a = q8_K_rows(rng, n, 3);
      float out[3];
      c.gemm_ref(n, t.data(), a.data(), 3, out, 1);
      for (int k = 0; k < 3; ++k) {
        const float want = c.dot_file_ref(int(n), x.data(), a.data() + act_bytes_q8_K_rows(n) * size_t(k));
        CHECK(std::memcmp(&want, &out[k], sizeof want) == 0);
      }
    }
  }
}

TEST_CASE("transcoded i-quants: every x86 level's and NEON table's GEMM gives each token its vec_dot, bit for bit") {
  std::mt19937 rng(49);
  int levels = 0;
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    const bool simd = isa != Isa::Ref;  // x86 levels, NEON ARMv8.0 and dotprod
    levels += simd;
    for (const TranscodedCase& c : transcoded_cases()) {
      CAPTURE(c.name);
      const PackedFormat& pf = kt.packed_of(c.type);
      // The scalar table reads the file's form, and so does NEON IQ1_S's and IQ1_M's; IQ2's forms
      // are the other ISA's case where this table has the 3-bit or the nibble form.
      const bool x86 = isa == Isa::Avx2 || isa == Isa::Avx2Vnni || isa == Isa::Avx512Vnni;
      if (simd && c.on == (x86 ? On::Neon : On::X86)) {
        CHECK(std::string(pf.name) != c.name);
        continue;
      }
      if (!simd || (!x86 && (c.type == DType::IQ1_S || c.type == DType::IQ1_M))) {
        CHECK(pf.rows == 0);
        continue;
      }
      REQUIRE(pf.rows == 1);
      CHECK(std::string(pf.name) == c.name);
      CHECK(pf.resident_only);
      CHECK((pf.unpack_u8 == c.unpack_u8));
      const VecDotFn dot = kt.of(c.type).vec_dot;
      for (int64_t n : {256, 768, 2048}) {  // 1, 3 (an odd block last) and 8 blocks
        CAPTURE(n);
        const std::vector<uint8_t> x = random_iq_row(rng, c.type, n);
        REQUIRE(pf.group_bytes(n) == size_t(n / QK_K) * c.block_bytes);
        std::vector<uint8_t> group(pf.group_bytes(n));
        pf.pack(x.data(), x.size(), 1, n, group.data());
        // prepare_act is the level's Q8_K quantizer (vec_dot's activations)
        const size_t ab = pf.act_bytes(n);
        REQUIRE(ab == dtype_row_bytes(DType::Q8_K, n));
        for (int ntok : {1, 2, 3, 4, 5, 6, 9}) {
          CAPTURE(ntok);
          std::vector<uint8_t> act(ab * size_t(ntok)), want_act(ab);
          int differing = 0;
          for (int t = 0; t < ntok; ++t) {
            const auto f = uniform_floats(rng, n, -3.0f, 3.0f);
            pf.prepare_act(f.data(), n, act.data() + ab * size_t(t));
            kt.of(DType::Q8_K).from_float(f.data(), want_act.data(), n);
            differing += std::memcmp(want_act.data(), act.data() + ab * size_t(t), ab) != 0;
          }
          CHECK(differing == 0);
          std::vector<float> out(size_t(2 * ntok), NAN);
          pf.gemm(n, group.data(), act.data(), ntok, out.data(), 2);  // out_stride 2: only even slots written
          for (int t = 0; t < ntok; ++t) {
            const float want = dot(int(n), x.data(), act.data() + ab * size_t(t));
            CHECK(std::memcmp(&want, &out[size_t(2 * t)], sizeof want) == 0);
            CHECK(std::isnan(out[size_t(2 * t + 1)]));
          }
        }
      }
    }
  }
  if (EDGELLM_HAS_X86_KERNELS || EDGELLM_HAS_NEON) CHECK(levels > 0);
}

TEST_CASE("iq4_xs_t: the chunk order keeps every weight and the file's bytes, and every NEON table's GEMM gives each token its vec_dot, bit for bit") {
  std::mt19937 rng(50);
  const int64_t n = 16 * QK_K;
  const std::vector<uint8_t> x = random_iq_row(rng, DType::IQ4_XS, n);
  std::vector<uint8_t> t(FormIQ4_XS_T::group_bytes(n)), back(x.size());
  FormIQ4_XS_T::pack(x.data(), x.size(), 1, n, t.data());
  CHECK(std::memcmp(t.data(), x.data(), t.size()) != 0);  // the nibbles moved
  iq4_xs_t_to_file_row(t.data(), n, 0, back.data());
  CHECK(back == x);
  int differing = 0;
  for (int b = 0; b < int(n / QK_K); ++b) {
    int8_t qa[QK_K], qb[QK_K];
    unpack_iq4_xs(reinterpret_cast<const block_iq4_xs*>(x.data())[b], qa);
    unpack_iq4_xs_t(reinterpret_cast<const block_iq4_xs_t*>(t.data())[b], qb);
    differing += std::memcmp(qa, qb, QK_K) != 0;
  }
  CHECK(differing == 0);
  std::vector<float> fa(static_cast<size_t>(n)), fb(static_cast<size_t>(n));
  dequantize_row(DType::IQ4_XS, x.data(), fa.data(), n);
  dequantize_row_iq4_xs_t(reinterpret_cast<const block_iq4_xs_t*>(t.data()), fb.data(), n);
  CHECK(std::memcmp(fa.data(), fb.data(), sizeof(float) * size_t(n)) == 0);
  // the scalar oracle over the chunk-ordered activations is the file's reference dot
  const std::vector<uint8_t> a = q8_K_rows(rng, n, 2);
  std::vector<uint8_t> ap(a.size());
  for (int k = 0; k < 2; ++k)
    iq4_xs_t_act(a.data() + act_bytes_q8_K_rows(n) * size_t(k), n, ap.data() + act_bytes_q8_K_rows(n) * size_t(k));
  float out[2];
  FormIQ4_XS_T::gemm_ref(n, t.data(), ap.data(), 2, out, 1);
  for (int k = 0; k < 2; ++k) {
    const float want = vec_dot_iq4_xs_q8_K_ref(int(n), x.data(), a.data() + act_bytes_q8_K_rows(n) * size_t(k));
    CHECK(std::memcmp(&want, &out[k], sizeof want) == 0);
  }

  int levels = 0;
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    const PackedFormat& pf = kt.packed_of(DType::IQ4_XS);
    if (pf.rows != 1) {  // the scalar table reads the file's form, x86 interleaves rows (iq4_xsx16 / iq4_xsx8)
      CHECK((isa == Isa::Ref || !EDGELLM_HAS_NEON));
      continue;
    }
    ++levels;
    REQUIRE(pf.rows == 1);
    CHECK(std::string(pf.name) == "iq4_xs_t");
    CHECK(pf.resident_only);
    CHECK((pf.to_file_row == &iq4_xs_t_to_file_row));
    const VecDotFn dot = kt.of(DType::IQ4_XS).vec_dot;
    for (int64_t m : {256, 768, 2048}) {
      CAPTURE(m);
      const std::vector<uint8_t> w = random_iq_row(rng, DType::IQ4_XS, m);
      std::vector<uint8_t> group(pf.group_bytes(m));
      pf.pack(w.data(), w.size(), 1, m, group.data());
      const size_t ab = pf.act_bytes(m);
      for (int ntok : {1, 3, 5}) {  // NEON: tiles of 4 (dotprod) or 3 tokens, then single tokens
        CAPTURE(ntok);
        std::vector<uint8_t> act(ab * size_t(ntok)), natural(ab * size_t(ntok));
        for (int k = 0; k < ntok; ++k) {
          const auto f = uniform_floats(rng, m, -3.0f, 3.0f);
          pf.prepare_act(f.data(), m, act.data() + ab * size_t(k));
          kt.of(DType::Q8_K).from_float(f.data(), natural.data() + ab * size_t(k), m);
        }
        std::vector<float> got(size_t(2 * ntok), NAN);
        pf.gemm(m, group.data(), act.data(), ntok, got.data(), 2);
        for (int k = 0; k < ntok; ++k) {
          const float want = dot(int(m), w.data(), natural.data() + ab * size_t(k));
          CHECK(std::memcmp(&want, &got[size_t(2 * k)], sizeof want) == 0);
          CHECK(std::isnan(got[size_t(2 * k + 1)]));
        }
      }
    }
  }
  if (EDGELLM_HAS_NEON) CHECK(levels > 0);
}
