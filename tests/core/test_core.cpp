// core/: DType traits for every GGUF type id, Shape/TensorView (rows, strides, slices),
// Tensor<T>, MappedFile and Error.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <edgellm/core/dtype.hpp>
#include <edgellm/core/memory.hpp>
#include <edgellm/core/tensor.hpp>

using namespace edgellm;

TEST_CASE("DType: every ggml type id has a name, block size and bytes per block") {
  struct E {
    DType t;
    const char* name;
    uint32_t bs, bytes;
  };
  const E cases[] = {
      {DType::F32, "f32", 1, 4},        {DType::F16, "f16", 1, 2},         {DType::BF16, "bf16", 1, 2},
      {DType::Q4_0, "q4_0", 32, 18},    {DType::Q4_1, "q4_1", 32, 20},     {DType::Q5_0, "q5_0", 32, 22},
      {DType::Q5_1, "q5_1", 32, 24},    {DType::Q8_0, "q8_0", 32, 34},     {DType::Q8_1, "q8_1", 32, 36},
      {DType::Q2_K, "q2_K", 256, 84},   {DType::Q3_K, "q3_K", 256, 110},   {DType::Q4_K, "q4_K", 256, 144},
      {DType::Q5_K, "q5_K", 256, 176},  {DType::Q6_K, "q6_K", 256, 210},   {DType::Q8_K, "q8_K", 256, 292},
      {DType::IQ2_XXS, "iq2_xxs", 256, 66}, {DType::IQ2_XS, "iq2_xs", 256, 74}, {DType::IQ3_XXS, "iq3_xxs", 256, 98},
      {DType::IQ1_S, "iq1_s", 256, 50}, {DType::IQ4_NL, "iq4_nl", 32, 18}, {DType::IQ3_S, "iq3_s", 256, 110},
      {DType::IQ2_S, "iq2_s", 256, 82}, {DType::IQ4_XS, "iq4_xs", 256, 136}, {DType::I8, "i8", 1, 1},
      {DType::I16, "i16", 1, 2},        {DType::I32, "i32", 1, 4},         {DType::I64, "i64", 1, 8},
      {DType::F64, "f64", 1, 8},        {DType::IQ1_M, "iq1_m", 256, 56},  {DType::TQ1_0, "tq1_0", 256, 54},
      {DType::TQ2_0, "tq2_0", 256, 66}, {DType::MXFP4, "mxfp4", 32, 17},
  };
  for (const E& e : cases) {
    CAPTURE(e.name);
    CHECK(dtype_valid(static_cast<uint32_t>(e.t)));
    CHECK(std::string(dtype_name(e.t)) == e.name);
    CHECK(dtype_block_size(e.t) == e.bs);
    CHECK(dtype_block_bytes(e.t) == e.bytes);
    DType parsed;
    REQUIRE(dtype_from_name(dtype_upper_name(e.t), &parsed));
    CHECK(parsed == e.t);
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) CHECK_FALSE(dtype_valid(removed));
  CHECK(dtype_upper_name(DType::Q4_K) == "Q4_K");
  DType d;
  CHECK_FALSE(dtype_from_name("q9_9", &d));
  CHECK(dtype_row_bytes(DType::Q4_K, 512) == 288);
  CHECK_THROWS_AS(dtype_row_bytes(DType::Q4_K, 100), Error);
}

TEST_CASE("TensorView: rows over dims 1..3, strides, slices, typed access") {
  std::vector<float> data(4 * 3 * 2);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i);
  const TensorView v(DType::F32, data.data(), Shape{4, 3, 2});
  CHECK(v.n_dims() == 3);
  CHECK(v.n_elements() == 24);
  CHECK(v.n_rows() == 6);
  CHECK(v.nb(0) == 4);
  CHECK(v.nb(1) == 16);
  CHECK(v.nb(2) == 48);
  CHECK(v.contiguous());
  CHECK(reinterpret_cast<const float*>(v.row(4))[1] == 17.f);  // row 4 = (i1 = 1, i2 = 1)
  const TensorView s = v.slice(1, 1);                          // second matrix
  CHECK(s.ne(2) == 1);
  CHECK(reinterpret_cast<const float*>(s.row(0))[0] == 12.f);
  CHECK_THROWS_AS(v.slice(1, 2), Error);
  CHECK(v.as<float>()[5] == 5.f);
  CHECK_THROWS_AS(v.as<double>(), Error);
  const TensorView q(DType::Q8_0, data.data(), Shape{64, 1});
  CHECK(q.row_bytes() == 68);
  CHECK_THROWS_AS(q.as<float>(), Error);
  CHECK_THROWS_AS(TensorView(DType::Q4_0, data.data(), Shape{10}), Error);  // not whole blocks
  CHECK_THROWS_AS((Shape{1, 2, 3, 4, 5}), Error);
  CHECK_THROWS_AS((Shape{-1}), Error);
}

TEST_CASE("Tensor<T>: owning, aligned, zeroed, rows and views") {
  Tensor<float> t(Shape{8, 3});
  CHECK(t.size() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % kDefaultAlignment == 0);
  for (int64_t i = 0; i < t.size(); ++i) CHECK(t[i] == 0.f);
  t.row(2)[7] = 5.f;
  CHECK(t[23] == 5.f);
  const TensorView v = t.view();
  CHECK(v.type() == DType::F32);
  CHECK(reinterpret_cast<const float*>(v.row(2))[7] == 5.f);
  Tensor<int32_t> e(Shape{0});
  CHECK(e.size() == 0);
}

TEST_CASE("MappedFile: mapped and read modes agree - errors name the path") {
  const std::string p = std::string(EDGELLM_BINARY_DIR) + "/test_core_mapped.bin";
  {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f);
    for (int i = 0; i < 10000; ++i) std::fputc(i & 0xff, f);
    std::fclose(f);
  }
  const MappedFile a(p, MappedFile::Mode::Mmap), b(p, MappedFile::Mode::Read);
  CHECK(a.mapped());
  CHECK_FALSE(b.mapped());
  REQUIRE(a.size() == 10000);
  REQUIRE(b.size() == 10000);
  CHECK(a.data()[9999] == b.data()[9999]);
  CHECK(reinterpret_cast<uintptr_t>(b.data()) % kPageAlignment == 0);
  MappedFile moved = MappedFile(p);
  CHECK(moved.size() == 10000);
  std::remove(p.c_str());
  try {
    MappedFile missing("/no/such/file.gguf");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("/no/such/file.gguf") != std::string::npos);
  }
  const MappedFile mem = MappedFile::from_bytes({1, 2, 3}, "mem");
  CHECK(mem.size() == 3);
  CHECK(mem.data()[2] == 3);
}
