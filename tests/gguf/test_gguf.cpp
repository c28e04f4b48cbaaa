// GGUF reader and writer: the shared model/vocab files, writer round trip, and hostile input
// (truncation at every byte, corrupted fields, absurd sizes) — each bad file must throw Error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <edgellm/gguf/reader.hpp>
#include <edgellm/gguf/writer.hpp>

#include "test_util.hpp"

using namespace edgellm_test;

using namespace edgellm;

namespace {


// A small valid file: every scalar type, string and numeric arrays, two tensors.
std::vector<uint8_t> small_file(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set_string("general.architecture", "llama");
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -5);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -7);
  w.set_u64("t.u64", 1ull << 40);
  w.set_i64("t.i64", -(1ll << 40));
  w.set_f32("t.f32", 1.5f);
  w.set_f64("t.f64", -2.25);
  w.set_bool("t.bool", true);
  w.set_array_string("t.strs", {"a", "", "ccc"});
  w.set_array_f32("t.floats", {1.f, 2.f, 3.f});
  w.set_array_i32("t.ints", {-1, 0, 7});
  static float f32[2 * 3] = {1, 2, 3, 4, 5, 6};
  static uint8_t q8[2 * 34];
  for (int i = 0; i < 68; ++i) q8[i] = uint8_t(i);
  w.add_tensor("a.weight", DType::F32, Shape{3, 2}, f32);
  w.add_tensor("b.weight", DType::Q8_0, Shape{32, 2}, q8);
  return w.to_bytes();
}

void check_throws_error(std::vector<uint8_t> bytes, const char* what) {
  CAPTURE(what);
  CHECK_THROWS_AS(GgufFile::from_bytes(std::move(bytes), "hostile.gguf"), Error);
}

}  // namespace

TEST_CASE("writer round trip: metadata of every type and tensors") {
  const GgufFile f = GgufFile::from_bytes(small_file(), "small.gguf");
  CHECK(f.version() == 3);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_int("t.u8") == 200);
  CHECK(f.get_int("t.i8") == -5);
  CHECK(f.get_int("t.u16") == 60000);
  CHECK(f.get_int("t.i16") == -30000);
  CHECK(f.get_int("t.u32") == 4000000000ll);
  CHECK(f.get_int("t.i32") == -7);
  CHECK(f.get_int("t.u64") == (1ll << 40));
  CHECK(f.get_int("t.i64") == -(1ll << 40));
  CHECK(f.get_float("t.f32") == 1.5);
  CHECK(f.get_float("t.f64") == -2.25);
  CHECK(f.get_bool("t.bool"));
  CHECK(f.get_string_array("t.strs") == std::vector<std::string>{"a", "", "ccc"});
  CHECK(f.get_float_array("t.floats") == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(f.get_int_array("t.ints") == std::vector<int64_t>{-1, 0, 7});
  CHECK(f.get_int_or("missing", 42) == 42);
  REQUIRE(f.tensors().size() == 2);
  const GgufTensorInfo& a = f.tensor("a.weight");
  CHECK(a.type == DType::F32);
  CHECK(a.ne[0] == 3);
  CHECK(a.ne[1] == 2);
  CHECK(a.nbytes == 24);
  CHECK(reinterpret_cast<uintptr_t>(a.data) % 32 == 0);
  float got[6];
  std::memcpy(got, a.data, 24);
  CHECK(got[5] == 6.f);
  const GgufTensorInfo& b = f.tensor("b.weight");
  CHECK(b.type == DType::Q8_0);
  CHECK(b.nbytes == 68);
  CHECK(b.data[67] == 67);
  CHECK(b.offset % 32 == 0);
  CHECK(f.find_tensor("nope") == nullptr);
}

TEST_CASE("writer honours general.alignment") {
  const GgufFile f = GgufFile::from_bytes(small_file(64), "a64.gguf");
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
}

TEST_CASE("typed getters name the key, the expected and the actual type") {
  const GgufFile f = GgufFile::from_bytes(small_file(), "small.gguf");
  try {
    (void)f.get_string("t.u32");
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("small.gguf") != std::string::npos);
    CHECK(m.find("t.u32") != std::string::npos);
    CHECK(m.find("expected string") != std::string::npos);
    CHECK(m.find("got uint32") != std::string::npos);
  }
  CHECK_THROWS_AS(f.get_int("t.f32"), Error);
  CHECK_THROWS_AS(f.get_float("t.i32"), Error);
  CHECK_THROWS_AS(f.get_string_array("t.ints"), Error);
  CHECK_THROWS_AS(f.get_int("missing.key"), Error);
  CHECK_THROWS_AS(f.tensor("missing.tensor"), Error);
}

TEST_CASE("truncation at every byte of the header region throws Error") {
  const std::vector<uint8_t> full = small_file();
  const GgufFile f = GgufFile::from_bytes(full, "x");
  const size_t header = static_cast<size_t>(f.data_offset());
  uint64_t data_end = 0;  // end of the last tensor's bytes (what follows is padding)
  for (const auto& t : f.tensors()) data_end = std::max<uint64_t>(data_end, header + t.offset + t.nbytes);
  REQUIRE(data_end < full.size());
  for (size_t n = 0; n < full.size(); ++n) {
    CAPTURE(n);
    std::vector<uint8_t> cut(full.begin(), full.begin() + n);
    if (n < data_end) {
      CHECK_THROWS_AS(GgufFile::from_bytes(std::move(cut), "cut.gguf"), Error);
    } else {
      CHECK_NOTHROW(GgufFile::from_bytes(std::move(cut), "cut.gguf"));  // only trailing padding lost
    }
  }
}

namespace {
// Offsets of fields in small_file(): magic 0, version 4, n_tensors 8, n_kv 16, first key length 24.
template <class T>
std::vector<uint8_t> patched(size_t at, T v) {
  std::vector<uint8_t> b = small_file();
  std::memcpy(b.data() + at, &v, sizeof(T));
  return b;
}
// Byte offset of the tensor info of the first tensor (its name length).
size_t first_tensor_info(const std::vector<uint8_t>& b) {
  const std::string name = "a.weight";
  for (size_t i = 8; i + name.size() <= b.size(); ++i)
    if (std::memcmp(b.data() + i, name.data(), name.size()) == 0) return i - 8;
  return 0;
}
}  // namespace

TEST_CASE("corrupted fields throw Error") {
  check_throws_error(patched<uint32_t>(0, 0x12345678u), "bad magic");
  check_throws_error(patched<uint32_t>(4, 1u), "version 1");
  check_throws_error(patched<uint32_t>(4, 4u), "version 4");
  check_throws_error(patched<uint32_t>(4, 0x03000000u), "big-endian version");
  check_throws_error(patched<uint64_t>(8, 1ull << 63), "absurd tensor count");
  check_throws_error(patched<uint64_t>(8, 3), "one tensor too many");
  check_throws_error(patched<uint64_t>(16, 1ull << 63), "absurd kv count");
  check_throws_error(patched<uint64_t>(16, 17), "one kv too many");
  check_throws_error(patched<uint64_t>(24, 1ull << 63), "absurd key length");
  check_throws_error(patched<uint64_t>(24, 0), "empty key");

  const std::vector<uint8_t> base = small_file();
  const size_t ti = first_tensor_info(base);
  REQUIRE(ti > 0);
  const size_t name_len = 8;  // "a.weight"
  const size_t n_dims_at = ti + 8 + name_len, dim0_at = n_dims_at + 4, type_at = dim0_at + 16,
               off_at = type_at + 4;
  check_throws_error(patched<uint32_t>(n_dims_at, 0u), "n_dims 0");
  check_throws_error(patched<uint32_t>(n_dims_at, 5u), "n_dims 5");
  check_throws_error(patched<uint64_t>(dim0_at, 1ull << 63), "dim 2^63");
  check_throws_error(patched<uint64_t>(dim0_at, (1ull << 62) + 1), "dims product overflows");
  check_throws_error(patched<uint64_t>(dim0_at, 1ull << 40), "tensor larger than the file");
  check_throws_error(patched<uint32_t>(type_at, 4u), "removed type id 4");
  check_throws_error(patched<uint32_t>(type_at, 1000u), "type id 1000");
  check_throws_error(patched<uint32_t>(type_at, static_cast<uint32_t>(DType::Q4_0)), "row not whole blocks");
  check_throws_error(patched<uint64_t>(off_at, 8), "non-aligned offset");
  check_throws_error(patched<uint64_t>(off_at, 1ull << 62), "offset past the end");
  check_throws_error(patched<uint64_t>(off_at, ~0ull - 31), "offset + size overflows");

  // Duplicate tensor name: rename b.weight to a.weight.
  std::vector<uint8_t> dup = base;
  for (size_t i = ti + 8 + name_len; i + 8 <= dup.size(); ++i)
    if (std::memcmp(dup.data() + i, "b.weight", 8) == 0) {
      dup[i] = 'a';
      break;
    }
  check_throws_error(dup, "duplicate tensor name");
}

TEST_CASE("hostile metadata: bad value types, absurd arrays, bad alignment") {
  // Build single-key files by hand.
  auto one_kv = [](const std::vector<uint8_t>& kv) {
    std::vector<uint8_t> b;
    auto put32 = [&](uint32_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); };
    auto put64 = [&](uint64_t v) { b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8); };
    put32(kGgufMagic);
    put32(3);
    put64(0);
    put64(1);
    b.insert(b.end(), kv.begin(), kv.end());
    return b;
  };
  auto kv = [](const std::string& key, uint32_t type, std::vector<uint8_t> payload) {
    std::vector<uint8_t> b;
    uint64_t n = key.size();
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&n), reinterpret_cast<uint8_t*>(&n) + 8);
    b.insert(b.end(), key.begin(), key.end());
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&type), reinterpret_cast<uint8_t*>(&type) + 4);
    b.insert(b.end(), payload.begin(), payload.end());
    return b;
  };
  auto bytes = [](std::initializer_list<uint64_t> parts, std::initializer_list<int> sizes) {
    std::vector<uint8_t> b;
    auto s = sizes.begin();
    for (uint64_t v : parts) {
      b.insert(b.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + *s);
      ++s;
    }
    return b;
  };
  CHECK_NOTHROW(GgufFile::from_bytes(one_kv(kv("k", 4, bytes({7}, {4}))), "ok.gguf"));
  check_throws_error(one_kv(kv("k", 13, bytes({7}, {4}))), "value type 13");
  check_throws_error(one_kv(kv("k", 9, bytes({4, 1ull << 62}, {4, 8}))), "array of 2^62 uint32");
  check_throws_error(one_kv(kv("k", 9, bytes({8, 1ull << 62}, {4, 8}))), "array of 2^62 strings");
  check_throws_error(one_kv(kv("k", 9, bytes({9, 1}, {4, 8}))), "nested array");
  check_throws_error(one_kv(kv("k", 9, bytes({77, 1}, {4, 8}))), "array of type 77");
  check_throws_error(one_kv(kv("k", 8, bytes({1ull << 63}, {8}))), "string of 2^63 bytes");
  check_throws_error(one_kv(kv("general.alignment", 4, bytes({0}, {4}))), "alignment 0");
  check_throws_error(one_kv(kv("general.alignment", 4, bytes({48}, {4}))), "alignment 48");
  check_throws_error(one_kv(kv("general.alignment", 5, bytes({32}, {4}))), "alignment of type int32");
  std::vector<uint8_t> two = one_kv(kv("k", 4, bytes({7}, {4})));
  two[16] = 2;  // two keys
  auto again = kv("k", 4, bytes({8}, {4}));
  two.insert(two.end(), again.begin(), again.end());
  check_throws_error(two, "duplicate key");
}

TEST_CASE("a missing file and a directory give Error naming the path") {
  try {
    (void)GgufFile::open("/nonexistent/model.gguf");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent/model.gguf") != std::string::npos);
  }
  CHECK_THROWS_AS(GgufFile::open("/"), Error);
}

TEST_CASE("mmap and plain read give the same file") {
  const std::string p = std::string(EDGELLM_BINARY_DIR) + "/test_gguf_rw.gguf";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  static float v[64];
  for (int i = 0; i < 64; ++i) v[i] = float(i);
  w.add_tensor("t", DType::F32, Shape{64}, v);
  w.write(p);
  const GgufFile a = GgufFile::open(p, MappedFile::Mode::Mmap);
  const GgufFile b = GgufFile::open(p, MappedFile::Mode::Read);
  CHECK(a.mapped());
  CHECK(!b.mapped());
  REQUIRE(a.tensors().size() == 1);
  CHECK(std::memcmp(a.tensors()[0].data, b.tensors()[0].data, 256) == 0);
  std::remove(p.c_str());
}

TEST_CASE("streamed tensor data (provider) equals in-memory data") {
  GgufWriter w;
  w.set_string("general.architecture", "test");
  w.add_tensor("x", DType::F16, Shape{16, 3});
  w.add_tensor("y", DType::I32, Shape{5});
  const auto bytes = w.to_bytes([](size_t i, std::vector<uint8_t>& out) {
    out.assign(i == 0 ? 96 : 20, static_cast<uint8_t>(i + 1));
  });
  const GgufFile f = GgufFile::from_bytes(bytes, "streamed.gguf");
  CHECK(f.tensor("x").data[95] == 1);
  CHECK(f.tensor("y").data[19] == 2);
  CHECK_THROWS_AS(w.to_bytes([](size_t, std::vector<uint8_t>& out) { out.assign(3, 0); }), Error);
}

TEST_CASE("shared models: architecture, counts, tensor types and shapes") {
  EDGELLM_SKIP_WITHOUT(kData + "/models");
  struct Expect {
    const char* file;
    int64_t dim, layers, heads, kv_heads, ffn;
    size_t n_tensors;
    DType ffn_gate_type;
  };
  const Expect cases[] = {
      {"stories260K.gguf", 64, 5, 8, 4, 172, 48, DType::F32},
      {"tiny-llama-256-f32.gguf", 256, 2, 4, 2, 768, 21, DType::F32},
      {"tiny-llama-256-F16.gguf", 256, 2, 4, 2, 768, 21, DType::F16},
      {"tiny-llama-256-Q8_0.gguf", 256, 2, 4, 2, 768, 21, DType::Q8_0},
      {"tiny-llama-256-Q4_0.gguf", 256, 2, 4, 2, 768, 21, DType::Q4_0},
      {"tiny-llama-256-Q4_1.gguf", 256, 2, 4, 2, 768, 21, DType::Q4_1},
      {"tiny-llama-256-Q5_0.gguf", 256, 2, 4, 2, 768, 21, DType::Q5_0},
      {"tiny-llama-256-Q5_1.gguf", 256, 2, 4, 2, 768, 21, DType::Q5_1},
      {"tiny-llama-256-Q2_K.gguf", 256, 2, 4, 2, 768, 21, DType::Q2_K},
      {"tiny-llama-256-Q3_K_M.gguf", 256, 2, 4, 2, 768, 21, DType::Q3_K},
      {"tiny-llama-256-Q4_K_M.gguf", 256, 2, 4, 2, 768, 21, DType::Q4_K},
      {"tiny-llama-256-Q5_K_M.gguf", 256, 2, 4, 2, 768, 21, DType::Q5_K},
      {"tiny-llama-256-Q6_K.gguf", 256, 2, 4, 2, 768, 21, DType::Q6_K},
  };
  for (const Expect& e : cases) {
    CAPTURE(e.file);
    const GgufFile f = GgufFile::open(kData + "/models/" + e.file);
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.get_int("llama.embedding_length") == e.dim);
    CHECK(f.get_int("llama.block_count") == e.layers);
    CHECK(f.get_int("llama.attention.head_count") == e.heads);
    CHECK(f.get_int("llama.attention.head_count_kv") == e.kv_heads);
    CHECK(f.get_int("llama.feed_forward_length") == e.ffn);
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
    CHECK(f.get_string_array("tokenizer.ggml.tokens").size() == 512);
    CHECK(f.tensors().size() == e.n_tensors);
    const GgufTensorInfo& emb = f.tensor("token_embd.weight");
    CHECK(emb.ne[0] == e.dim);
    CHECK(emb.ne[1] == 512);
    const GgufTensorInfo& gate = f.tensor("blk.0.ffn_gate.weight");
    CHECK(gate.type == e.ffn_gate_type);
    CHECK(gate.ne[0] == e.dim);
    CHECK(gate.ne[1] == e.ffn);
    const GgufTensorInfo& down = f.tensor("blk.0.ffn_down.weight");
    CHECK(down.ne[0] == e.ffn);
    CHECK(down.ne[1] == e.dim);
    CHECK(f.tensor("blk.0.attn_k.weight").ne[1] == e.dim / e.heads * e.kv_heads);
    CHECK(f.tensor("output_norm.weight").type == DType::F32);
    uint64_t total = 0;
    for (const auto& t : f.tensors()) total += t.nbytes;
    CHECK(total <= f.file_size());
  }
}

TEST_CASE("shared vocab files: tokenizer metadata") {
  EDGELLM_SKIP_WITHOUT(kData + "/vocab");
  const GgufFile spm = GgufFile::open(kData + "/vocab/ggml-vocab-llama-spm.gguf");
  CHECK(spm.get_string("tokenizer.ggml.model") == "llama");
  CHECK(spm.get_string_array("tokenizer.ggml.tokens").size() == 32000);
  CHECK(spm.tensors().empty());
  for (const char* name : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-llama3pre.gguf"}) {
    CAPTURE(name);
    const GgufFile bpe = GgufFile::open(kData + "/vocab/" + name);
    CHECK(bpe.get_string("tokenizer.ggml.model") == "gpt2");
    CHECK(bpe.get_string_array("tokenizer.ggml.tokens").size() == 50257);
    CHECK(bpe.get_string_array("tokenizer.ggml.merges").size() > 10000);
  }
  CHECK(GgufFile::open(kData + "/vocab/ggml-vocab-gpt-2-llama3pre.gguf").get_string("tokenizer.ggml.pre") ==
        "llama-bpe");
}

TEST_CASE("writer copies a real file's metadata and tensors so the reader sees the same file") {
  EDGELLM_SKIP_WITHOUT(kData + "/models");
  const GgufFile src = GgufFile::open(kData + "/models/stories260K.gguf");
  GgufWriter w;
  w.copy_metadata(src);
  for (const auto& t : src.tensors()) w.add_tensor(t.name, t.type, t.shape(), t.data);
  const GgufFile dst = GgufFile::from_bytes(w.to_bytes(), "copy.gguf");
  REQUIRE(dst.metadata().size() == src.metadata().size());
  for (size_t i = 0; i < src.metadata().size(); ++i) {
    CHECK(dst.metadata()[i].key == src.metadata()[i].key);
    CHECK(dst.metadata()[i].value.to_display(1000000) == src.metadata()[i].value.to_display(1000000));
  }
  REQUIRE(dst.tensors().size() == src.tensors().size());
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const auto &a = src.tensors()[i], &b = dst.tensors()[i];
    CHECK(a.name == b.name);
    CHECK(a.nbytes == b.nbytes);
    CHECK(std::memcmp(a.data, b.data, a.nbytes) == 0);
  }
}
