// matmul(): GEMV (one token) and tiled GEMM (several tokens), with and without a thread pool, for
// every ISA and weight type, against a naive matmul of the dequantized weights and activations.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "edgellm/kernels/matmul.hpp"
#include "edgellm/kernels/select.hpp"
#include "edgellm/quant/ref.hpp"
#include "../packed_stub.hpp"
#include "q8_1_float_model.hpp"

#include "../test_util.hpp"

using namespace edgellm;
using edgellm_test::uniform_floats;

namespace {

// |matmul - naive| / sum |w * a| per output: the naive product uses the same quantized
// activations, so only the float summation order differs.
constexpr double kMaxMatmulErr = 1e-5;

const DType kMatmulTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::F32,  DType::F16,  DType::BF16};

// y_ref[t, r] and sum |w * a| from dequantized weights and the ref-quantized activations (against
// Q8_1, with the min term from the activation's s: q8_1_float_model.hpp).
void naive_matmul(const KernelTable& ref, DType type, const std::vector<uint8_t>& w, size_t row_bytes, int64_t n_in,
                  int64_t n_out, const std::vector<float>& x, int64_t n_tok, std::vector<double>& y,
                  std::vector<double>& scale) {
  const DType act = ref.of(type).vec_dot_type;
  std::vector<float> wf(static_cast<size_t>(n_in * n_out)), xf(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) dequantize_row(type, w.data() + size_t(r) * row_bytes, wf.data() + r * n_in, n_in);
  std::vector<uint8_t> q(dtype_row_bytes(act, n_in));
  y.assign(static_cast<size_t>(n_tok * n_out), 0.0);
  scale.assign(y.size(), 0.0);
  for (int64_t t = 0; t < n_tok; ++t) {
    quantize_row(act, x.data() + t * n_in, q.data(), n_in);
    dequantize_row(act, q.data(), xf.data(), n_in);
    for (int64_t r = 0; r < n_out; ++r) {
      double s = 0.0, a = 0.0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double p = double(wf[size_t(r * n_in + i)]) * xf[size_t(i)];
        s += p;
        a += std::fabs(p);
      }
      y[size_t(t * n_out + r)] =
          s + edgellm_test::q8_1_min_correction(type, w.data() + size_t(r) * row_bytes, act, q.data(), xf.data(), n_in);
      scale[size_t(t * n_out + r)] = a;
    }
  }
}

}  // namespace

TEST_CASE("matmul matches a naive dequantized matmul for every ISA, type, token count and pool") {
  const KernelTable ref = make_kernel_table(Isa::Ref);
  std::mt19937 rng(2024);
  ThreadPool pool2(2), pool3(3);
  for (DType type : kMatmulTypes) {
    const std::string type_s = dtype_name(type);
    CAPTURE(type_s);
    const int64_t n_in = dtype_block_size(type) == 256 ? 512 : 96;
    const int64_t n_out = 37;  // not a multiple of any unroll or tile
    const size_t rb = dtype_row_bytes(type, n_in) + 8;  // padded rows: row_bytes is honoured
    std::vector<uint8_t> w(rb * size_t(n_out), 0xAB);
    for (int64_t r = 0; r < n_out; ++r) {
      const auto f = uniform_floats(rng, n_in, -1.0f, 1.0f);
      quantize_row(type, f.data(), w.data() + size_t(r) * rb, n_in);
    }
    const MatmulWeight mw{type, w.data(), n_in, n_out, rb};
    for (int64_t n_tok : {int64_t(1), int64_t(2), int64_t(5), int64_t(70)}) {
      CAPTURE(n_tok);
      const auto x = uniform_floats(rng, n_tok * n_in, -1.0f, 1.0f);
      std::vector<double> want, scale;
      naive_matmul(ref, type, w, rb, n_in, n_out, x, n_tok, want, scale);
      for (Isa isa : available_isas()) {
        const KernelTable kt = make_kernel_table(isa);
        const std::string isa_s = isa_name(isa);
        CAPTURE(isa_s);
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
          CAPTURE(pool ? pool->n_threads() : 0);
          std::vector<float> y(static_cast<size_t>(n_tok * n_out), NAN);
          matmul(kt, pool, mw, x.data(), n_tok, y.data());
          for (size_t i = 0; i < y.size(); ++i) CHECK(std::fabs(y[i] - want[i]) <= kMaxMatmulErr * scale[i] + 1e-30);
        }
      }
    }
  }
}

TEST_CASE("matmul with an explicit scratch gives the same result as the thread-local one") {
  const KernelTable& kt = kernels();
  std::mt19937 rng(3);
  const int64_t n_in = 256, n_out = 9, n_tok = 3;
  std::vector<uint8_t> w(dtype_row_bytes(DType::Q4_K, n_in) * n_out);
  for (int64_t r = 0; r < n_out; ++r) {
    const auto f = uniform_floats(rng, n_in, -1.0f, 1.0f);
    quantize_row(DType::Q4_K, f.data(), w.data() + size_t(r) * dtype_row_bytes(DType::Q4_K, n_in), n_in);
  }
  const MatmulWeight mw{DType::Q4_K, w.data(), n_in, n_out, dtype_row_bytes(DType::Q4_K, n_in)};
  const auto x = uniform_floats(rng, n_tok * n_in, -1.0f, 1.0f);
  std::vector<float> y1(size_t(n_tok * n_out)), y2(size_t(n_tok * n_out));
  MatmulScratch scratch;
  matmul(kt, nullptr, mw, x.data(), n_tok, y1.data(), scratch);
  matmul(kt, nullptr, mw, x.data(), n_tok, y2.data());
  CHECK(y1 == y2);
}

TEST_CASE("matmul throws for a type without a kernel and for bad shapes") {
  const KernelTable& kt = kernels();
  std::vector<uint8_t> w(4096);
  std::vector<float> x(512), y(64);
  CHECK_THROWS_AS(matmul(kt, nullptr, MatmulWeight{DType::MXFP4, w.data(), 256, 1, 136}, x.data(), 1, y.data()),
                  Error);
  CHECK_THROWS_AS(matmul(kt, nullptr, MatmulWeight{DType::Q4_0, w.data(), 48, 1, 18}, x.data(), 1, y.data()), Error);
  CHECK_THROWS_AS(matmul(kt, nullptr, MatmulWeight{DType::Q4_0, w.data(), 64, 1, 18}, x.data(), 1, y.data()), Error);
  CHECK_NOTHROW(matmul(kt, nullptr, MatmulWeight{DType::Q4_0, w.data(), 64, 2, 36}, x.data(), 0, y.data()));
}

namespace {

// Packs w (rows of row_bytes) with pf the way LlamaWeights::repack_matrices does.
std::vector<uint8_t> pack_matrix(const PackedFormat& pf, const std::vector<uint8_t>& w, size_t row_bytes, int64_t n_in,
                                 int64_t n_out) {
  const size_t gb = pf.group_bytes(n_in);
  std::vector<uint8_t> p(gb * size_t((n_out + pf.rows - 1) / pf.rows));
  for (int64_t r0 = 0, g = 0; r0 < n_out; r0 += pf.rows, ++g)
    pf.pack(w.data() + size_t(r0) * row_bytes, row_bytes, int(std::min<int64_t>(pf.rows, n_out - r0)), n_in,
            p.data() + size_t(g) * gb);
  return p;
}

// A weight row of n_in floats quantized, or for a type without a quantizer of its own (IQ2_XXS
// needs an importance matrix) random bytes (valid blocks of the i-quants) with a finite d first in
// each block.
void fill_weight_row(std::mt19937& rng, DType type, int64_t n_in, uint8_t* row) {
  if (can_quantize(type)) {
    const auto f = uniform_floats(rng, n_in, -1.0f, 1.0f);
    quantize_row(type, f.data(), row, n_in);
    return;
  }
  const size_t rb = dtype_row_bytes(type, n_in), bb = dtype_row_bytes(type, dtype_block_size(type));
  for (size_t i = 0; i < rb; ++i) row[i] = uint8_t(rng());
  const uint16_t d = fp32_to_fp16_ref(0.01f);
  for (size_t o = 0; o < rb; o += bb) std::memcpy(row + o, &d, 2);
}

}  // namespace

TEST_CASE("matmul and matmul_multi over packed weights equal the unpacked matmul") {
  std::mt19937 rng(77);
  ThreadPool pool2(2);
  for (Isa isa : available_isas()) {
    KernelTable kt = make_kernel_table(isa);
    const std::string isa_s = isa_name(isa);
    CAPTURE(isa_s);
    // The table's own packed forms (if any) and the trivial one standing in for Q8_0's.
    std::vector<std::pair<DType, PackedFormat>> forms;
    for (uint32_t id = 0; id < kDTypeCount; ++id)
      if (kt.packed[id].rows > 0) forms.emplace_back(DType(id), kt.packed[id]);
    forms.emplace_back(DType::Q8_0, test_stub::stub_format(kt));
    for (const auto& [type, pf] : forms) {
      const std::string form_s = pf.name;
      CAPTURE(form_s);
      const int64_t n_in = pf.gemm == test_stub::gemm ? 96 : 256;
      const int64_t n_out = 2 * pf.rows + 3;  // a partial last group
      const size_t rb = dtype_row_bytes(type, n_in);
      std::vector<uint8_t> w(rb * size_t(n_out));
      for (int64_t r = 0; r < n_out; ++r) fill_weight_row(rng, type, n_in, w.data() + size_t(r) * rb);
      const std::vector<uint8_t> packed = pack_matrix(pf, w, rb, n_in, n_out);
      const MatmulWeight plain{type, w.data(), n_in, n_out, rb};
      MatmulWeight mw = plain;
      mw.packed = packed.data();
      mw.pf = &pf;
      for (int64_t n_tok : {int64_t(1), int64_t(3), int64_t(70)}) {
        CAPTURE(n_tok);
        const auto x = uniform_floats(rng, n_tok * n_in, -1.0f, 1.0f);
        std::vector<double> want, scale;
        naive_matmul(make_kernel_table(Isa::Ref), type, w, rb, n_in, n_out, x, n_tok, want, scale);
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
          std::vector<float> y(size_t(n_tok * n_out), NAN);
          matmul(kt, pool, mw, x.data(), n_tok, y.data());
          for (size_t i = 0; i < y.size(); ++i) CHECK(std::fabs(y[i] - want[i]) <= kMaxMatmulErr * scale[i] + 1e-30);
        }
      }
      // Fused decode of two packed matrices (Q/K/V-like) and of a packed + a plain one (not fused).
      const auto x = uniform_floats(rng, n_in, -1.0f, 1.0f);
      std::vector<float> y_ref(static_cast<size_t>(n_out)), y1(static_cast<size_t>(n_out), NAN), y2(static_cast<size_t>(n_out), NAN);
      matmul(kt, nullptr, plain, x.data(), 1, y_ref.data());
      for (const MatmulWeight* second : {static_cast<const MatmulWeight*>(&mw), &plain}) {
        const MatmulTask tasks[2] = {{&mw, y1.data()}, {second, y2.data()}};
        MatmulScratch scratch;
        matmul_multi(kt, &pool2, tasks, 2, x.data(), 1, scratch);
        for (int64_t r = 0; r < n_out; ++r) {
          CHECK(y1[size_t(r)] == doctest::Approx(y_ref[size_t(r)]).epsilon(1e-4));
          CHECK(y2[size_t(r)] == doctest::Approx(y_ref[size_t(r)]).epsilon(1e-4));
        }
      }
    }
  }
}

// A Q4_K_M layer's Q/K/V mixes q4_K and q6_K: their packed forms read the same activation form, so
// matmul_multi runs them in one pass; each output must equal that matrix's own matmul.
TEST_CASE("matmul_multi fuses packed matrices of different types that share the activation form") {
  std::mt19937 rng(91);
  ThreadPool pool2(2);
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    const PackedFormat &p4 = kt.packed_of(DType::Q4_K), &p6 = kt.packed_of(DType::Q6_K);
    if (p4.rows == 0 || p6.rows == 0) continue;  // this ISA has no packed K-quant forms
    CHECK(detail::decode_compatible(MatmulWeight{DType::Q4_K, nullptr, 512, 1, 0, &p4, &p4},
                                    MatmulWeight{DType::Q6_K, nullptr, 512, 1, 0, &p6, &p6}));
    const int64_t n_in = 512;
    const int64_t n_out[3] = {2 * p4.rows + 5, p6.rows, p4.rows - 3};
    const DType types[3] = {DType::Q4_K, DType::Q6_K, DType::Q4_K};
    std::vector<std::vector<uint8_t>> raw(3), packed(3);
    std::vector<MatmulWeight> mw(3);
    for (int i = 0; i < 3; ++i) {
      const size_t rb = dtype_row_bytes(types[i], n_in);
      raw[size_t(i)].resize(rb * size_t(n_out[i]));
      for (int64_t r = 0; r < n_out[i]; ++r) {
        const auto f = uniform_floats(rng, n_in, -1.0f, 1.0f);
        quantize_row(types[i], f.data(), raw[size_t(i)].data() + size_t(r) * rb, n_in);
      }
      const PackedFormat& pf = kt.packed_of(types[i]);
      packed[size_t(i)] = pack_matrix(pf, raw[size_t(i)], rb, n_in, n_out[i]);
      mw[size_t(i)] = MatmulWeight{types[i], raw[size_t(i)].data(), n_in, n_out[i], rb, packed[size_t(i)].data(), &pf};
    }
    const auto x = uniform_floats(rng, n_in, -1.0f, 1.0f);
    std::vector<std::vector<float>> fused(3), alone(3);
    MatmulTask tasks[3];
    for (int i = 0; i < 3; ++i) {
      fused[size_t(i)].assign(size_t(n_out[i]), NAN);
      alone[size_t(i)].assign(size_t(n_out[i]), NAN);
      tasks[i] = {&mw[size_t(i)], fused[size_t(i)].data()};
      matmul(kt, nullptr, mw[size_t(i)], x.data(), 1, alone[size_t(i)].data());
    }
    MatmulScratch scratch;
    matmul_multi(kt, &pool2, tasks, 3, x.data(), 1, scratch);
    for (int i = 0; i < 3; ++i) CHECK(fused[size_t(i)] == alone[size_t(i)]);  // same kernels, same activation
  }
}

// matmul's n_decode: a row's outputs depend on its role (decoded or prefilled) and its values only,
// bit for bit, never on the rows it comes with or their number: what lets a request batched with
// others (engine/batch_scheduler.hpp) get the tokens it gets alone. Every ISA, type and packed form.
TEST_CASE("matmul by role: each row's outputs are bit-identical whatever rows come with it") {
  std::mt19937 rng(91);
  ThreadPool pool2(2);
  for (Isa isa : available_isas()) {
    const KernelTable kt = make_kernel_table(isa);
    for (DType type : kMatmulTypes) {
      const bool packs = kt.packed[static_cast<uint32_t>(type)].rows > 0;
      for (bool use_packed : {false, true}) {
        if (use_packed && !packs) continue;
        const std::string what = std::string(isa_name(isa)) + " " + dtype_name(type) + (use_packed ? " packed" : "");
        CAPTURE(what);
        const int64_t n_in = 512, n_out = 37, n_dec = 3, n_pre = 9, n_tok = n_dec + n_pre;
        const size_t rb = dtype_row_bytes(type, n_in);
        std::vector<uint8_t> w(rb * size_t(n_out));
        for (int64_t r = 0; r < n_out; ++r) {
          const auto f = uniform_floats(rng, n_in, -1.0f, 1.0f);
          quantize_row(type, f.data(), w.data() + size_t(r) * rb, n_in);
        }
        MatmulWeight mw{type, w.data(), n_in, n_out, rb};
        std::vector<uint8_t> packed;
        if (use_packed) {
          const PackedFormat& pf = kt.packed[static_cast<uint32_t>(type)];
          packed = pack_matrix(pf, w, rb, n_in, n_out);
          mw.packed = packed.data();
          mw.pf = &pf;
        }
        const auto x = uniform_floats(rng, n_tok * n_in, -1.0f, 1.0f);
        auto rows_of = [&](const std::vector<float>& y, int64_t t0, int64_t n) {
          return std::vector<float>(y.begin() + t0 * n_out, y.begin() + (t0 + n) * n_out);
        };
        // References: each decode row alone (by count and by role agree), the prompt rows in one call.
        std::vector<float> dec_alone(size_t(n_dec * n_out)), y1(static_cast<size_t>(n_out));
        for (int64_t t = 0; t < n_dec; ++t) {
          matmul(kt, nullptr, mw, x.data() + t * n_in, 1, dec_alone.data() + t * n_out);
          MatmulScratch s;
          matmul(kt, nullptr, mw, x.data() + t * n_in, 1, y1.data(), s, 1);
          CHECK(y1 == rows_of(dec_alone, t, 1));
        }
        std::vector<float> pre_all(size_t(n_pre * n_out));
        {
          MatmulScratch s;
          matmul(kt, nullptr, mw, x.data() + n_dec * n_in, n_pre, pre_all.data(), s, 0);
        }
        for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
          // Decode rows batched together, and with the prompt rows after them.
          MatmulScratch s;
          std::vector<float> y(size_t(n_tok * n_out), NAN);
          matmul(kt, pool, mw, x.data(), n_dec, y.data(), s, n_dec);
          CHECK(rows_of(y, 0, n_dec) == dec_alone);
          std::fill(y.begin(), y.end(), NAN);
          matmul(kt, pool, mw, x.data(), n_tok, y.data(), s, n_dec);
          CHECK(rows_of(y, 0, n_dec) == dec_alone);
          CHECK(rows_of(y, n_dec, n_pre) == pre_all);
          // Prompt rows in chunks of 1, 2, 4 and 2: the same as in one call.
          int64_t t0 = 0;
          for (int64_t n : {1, 2, 4, 2}) {
            std::vector<float> part(size_t(n * n_out), NAN);
            matmul(kt, pool, mw, x.data() + (n_dec + t0) * n_in, n, part.data(), s, 0);
            CHECK(part == rows_of(pre_all, t0, n));
            t0 += n;
          }
          REQUIRE(t0 == n_pre);
          // matmul_multi by role: each matrix as its own matmul.
          std::vector<float> a(size_t(n_tok * n_out), NAN), b(size_t(n_tok * n_out), NAN);
          const MatmulTask tasks[2] = {{&mw, a.data()}, {&mw, b.data()}};
          matmul_multi(kt, pool, tasks, 2, x.data(), n_tok, s, n_dec);
          CHECK(rows_of(a, 0, n_dec) == dec_alone);
          CHECK(rows_of(b, n_dec, n_pre) == pre_all);
          matmul_multi(kt, pool, tasks, 2, x.data(), 1, s, 1);  // fused decode
          CHECK(rows_of(a, 0, 1) == rows_of(dec_alone, 0, 1));
          CHECK(rows_of(b, 0, 1) == rows_of(dec_alone, 0, 1));
        }
      }
    }
  }
}
