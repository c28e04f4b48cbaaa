// memory_plan.hpp: /proc/meminfo parsing, KV/scratch formulas equal to the cache's own, the fit
// verdict and its warning, and weight sizes from shapes equal to the shared quantized files.
#include <doctest/doctest.h>

#include <string>
#include <sys/stat.h>

#include "edgellm/engine/session.hpp"
#include "edgellm/kv/paged_kv_cache.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/model/memory_plan.hpp"

#include "test_util.hpp"

namespace {

constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;

bool shared_file(const std::string& rel, std::string& path) {
  path = edgellm_test::kData + "/" + rel;
  return edgellm_test::path_exists(path);
}

// Llama-2-7B's shape (MHA, 32 layers, head_dim 128).
edgellm::LlamaConfig llama2_7b() {
  edgellm::LlamaConfig c;
  c.n_vocab = 32000;
  c.n_embd = 4096;
  c.n_layer = 32;
  c.n_head = 32;
  c.n_head_kv = 32;
  c.head_dim = 128;
  c.n_rot = 128;
  c.n_ff = 11008;
  c.n_ctx_train = 4096;
  return c;
}

}  // namespace

TEST_CASE("parse_meminfo_total reads MemTotal in kB") {
  const char* text = "MemFree:          123 kB\nMemTotal:        3884596 kB\nMemAvailable:    2000000 kB\n";
  CHECK(edgellm::parse_meminfo_total(text) == uint64_t(3884596) * 1024);
  CHECK(edgellm::parse_meminfo_total("MemFree: 1 kB\n") == 0);
  CHECK(edgellm::parse_meminfo_total("") == 0);
  CHECK(edgellm::parse_meminfo_total("MemTotal:\t2048 kB") == 2048 * 1024);
}

TEST_CASE("machine_ram_bytes is MemTotal of this machine") {
  std::string dummy;
  struct stat st;
  if (::stat("/proc/meminfo", &st) != 0) EDGELLM_SKIP("no /proc/meminfo");
  const uint64_t ram = edgellm::machine_ram_bytes();
  CHECK(ram >= 64 * kMiB);
  CHECK(ram < (uint64_t(1) << 50));
}

TEST_CASE("KV bytes per token: 2 * n_layer * n_kv_head * head_dim * bytes per element") {
  const auto c = llama2_7b();
  CHECK(edgellm::kv_bytes_per_token(c, edgellm::DType::F32) == 2ull * 32 * 32 * 128 * 4);
  CHECK(edgellm::kv_bytes_per_token(c, edgellm::DType::F16) == 2ull * 32 * 32 * 128 * 2);
  CHECK(edgellm::kv_bytes_per_token(c, edgellm::DType::Q8_0) == 2ull * 32 * 32 * 128 * 34 / 32);
  edgellm::MemoryPlanParams p;
  p.kv_type = edgellm::DType::F16;
  p.n_ctx = 100;  // rounds up to 7 blocks of 16
  CHECK(edgellm::kv_bytes_at_ctx(c, p) == 112ull * 2 * 32 * 32 * 128 * 2);
  p.n_sequences = 3;
  CHECK(edgellm::kv_bytes_at_ctx(c, p) == 3ull * 112 * 2 * 32 * 32 * 128 * 2);
  p.n_sequences = 1;
  p.kv_recent_f32 = 8;
  CHECK(edgellm::kv_bytes_at_ctx(c, p) == 112ull * 2 * 32 * 32 * 128 * 2 + 8ull * 2 * 32 * 4096 * 4);
}

TEST_CASE("the plan's KV figures equal PagedKvCache's for every storage type") {
  edgellm::LlamaConfig c = llama2_7b();
  c.n_layer = 2;  // a small cache is enough to compare the formulas
  for (auto t : {edgellm::DType::F32, edgellm::DType::F16, edgellm::DType::Q8_0}) {
    edgellm::KvCacheParams kp;
    kp.n_layer = c.n_layer;
    kp.n_kv_head = c.n_head_kv;
    kp.head_dim = c.head_dim;
    kp.block_size = 16;
    kp.max_tokens = 64;
    kp.type = t;
    const edgellm::PagedKvCache cache(kp);
    CAPTURE(edgellm::dtype_name(t));
    CHECK(edgellm::kv_bytes_per_token(c, t) == cache.bytes_per_token());
  }
}

TEST_CASE("fits: total plus headroom against RAM - the warning names the numbers") {
  const auto c = llama2_7b();
  edgellm::MemoryPlanParams p;
  p.n_ctx = 4096;
  p.n_threads = 4;
  p.kv_type = edgellm::DType::F16;
  const uint64_t weights = uint64_t(3825) * kMiB;  // about a Q4_0 file
  const auto big = edgellm::plan_memory(c, weights, p, 8 * kGiB);
  CHECK(big.fits);
  CHECK(big.kv_at_ctx == 2 * kGiB);
  CHECK(big.total == big.weights + big.kv_at_ctx + big.scratch);
  CHECK(big.headroom == 8 * kGiB / 5);
  CHECK(big.scratch > 64 * kMiB);  // 512-token activations of a 4096-wide model
  CHECK(big.scratch < 512 * kMiB);
  CHECK(edgellm::format_memory_plan(big).find("warning") == std::string::npos);

  const auto small = edgellm::plan_memory(c, weights, p, 4 * kGiB);
  CHECK_FALSE(small.fits);
  const std::string s = edgellm::format_memory_plan(small);
  CHECK(s.find("memory plan: weights 3.74 GiB (mapped)") == 0);
  CHECK(s.find("warning: the model does not fit") != std::string::npos);
  CHECK(s.find("KV 2.00 GiB at -c 4096") != std::string::npos);
  CHECK(s.find("RAM 4.00 GiB") != std::string::npos);

  const auto unknown = edgellm::plan_memory(c, weights, p, 0);
  CHECK(unknown.fits);
  CHECK(edgellm::format_memory_plan(unknown).find("RAM unknown") != std::string::npos);
  CHECK(edgellm::memory_headroom_bytes(kGiB) == edgellm::kMemoryPlanMinHeadroomBytes);
}

TEST_CASE("max_context_that_fits is the largest fitting whole-block context") {
  const auto c = llama2_7b();
  edgellm::MemoryPlanParams p;
  p.n_threads = 4;
  p.kv_type = edgellm::DType::Q8_0;
  const uint64_t weights = uint64_t(2600) * kMiB;
  const uint64_t ram = 4 * kGiB;
  const int n = edgellm::max_context_that_fits(c, weights, p, ram);
  REQUIRE(n > 0);
  CHECK(n % p.kv_block_size == 0);
  CHECK(n <= c.n_ctx_train);
  p.n_ctx = n;
  CHECK(edgellm::plan_memory(c, weights, p, ram).fits);
  if (n < c.n_ctx_train) {
    p.n_ctx = n + p.kv_block_size;
    CHECK_FALSE(edgellm::plan_memory(c, weights, p, ram).fits);
  }
  CHECK(edgellm::max_context_that_fits(c, 16 * kGiB, p, ram) == 0);
}

TEST_CASE("weight bytes from the shape equal the tensor bytes of the shared quantized files") {
  std::string f16_path;
  if (!shared_file("models/tiny-llama-256-F16.gguf", f16_path)) EDGELLM_SKIP("no shared data at ", edgellm_test::kData);
  const auto f16 = edgellm::GgufFile::open(f16_path);
  const auto cfg = edgellm::LlamaConfig::from_gguf(f16);
  // The shape alone gives the F16 file's tensor list (names and row lengths).
  const auto list = edgellm::llama_tensor_list(cfg);
  uint64_t f16_bytes = 0;
  for (const auto& t : f16.tensors()) f16_bytes += t.nbytes;
  CHECK(list.size() == f16.tensors().size());
  CHECK(edgellm::llama_weight_bytes(cfg, edgellm::quant_mix("F16")) == f16_bytes);
  for (const char* mix : {"Q2_K", "Q3_K_M", "Q4_0", "Q4_1", "Q4_K_M", "Q5_0", "Q5_1", "Q5_K_M", "Q6_K", "Q8_0"}) {
    std::string path;
    if (!shared_file(std::string("models/tiny-llama-256-") + mix + ".gguf", path)) continue;
    const auto q = edgellm::GgufFile::open(path);
    uint64_t bytes = 0;
    for (const auto& t : q.tensors()) bytes += t.nbytes;
    CAPTURE(mix);
    CHECK(edgellm::mix_tensor_bytes(f16.tensors(), cfg, edgellm::quant_mix(mix)) == bytes);
    CHECK(edgellm::llama_weight_bytes(cfg, edgellm::quant_mix(mix)) == bytes);
  }
}

TEST_CASE("qwen: the projected tensor list and bytes of the qwen2 / qwen3 shapes equal llama-quantize's files") {
  for (const char* arch : {"qwen2", "qwen3"}) {
    std::string f32_path;
    if (!shared_file(std::string("qwen/models/tiny-") + arch + "-256-f32.gguf", f32_path))
      EDGELLM_SKIP("no shared qwen data at ", edgellm_test::kData, "/qwen");
    const auto f32 = edgellm::GgufFile::open(f32_path);
    const auto cfg = edgellm::LlamaConfig::from_gguf(f32);
    CHECK(edgellm::llama_tensor_list(cfg).size() == f32.tensors().size());  // biases / Q-K norms included
    for (const char* mix : {"Q8_0", "Q4_K_M"}) {
      std::string path;
      if (!shared_file(std::string("qwen/models/tiny-") + arch + "-256-" + mix + ".gguf", path)) continue;
      const auto q = edgellm::GgufFile::open(path);
      uint64_t bytes = 0;
      for (const auto& t : q.tensors()) bytes += t.nbytes;
      CAPTURE(arch);
      CAPTURE(mix);
      CHECK(edgellm::llama_weight_bytes(cfg, edgellm::quant_mix(mix)) == bytes);
    }
  }
}

TEST_CASE("plan of a real model: weights = file size, KV = the model's cache") {
  std::string path;
  if (!shared_file("models/stories260K.gguf", path)) EDGELLM_SKIP("no shared data at ", edgellm_test::kData);
  const auto model = edgellm::LlamaModel::load(path);
  edgellm::MemoryPlanParams p;
  p.n_ctx = 256;
  p.kv_type = edgellm::DType::F16;
  const auto plan = edgellm::plan_memory(model->config(), model->file().file_size(), p, 2 * kGiB);
  const edgellm::PagedKvCache cache(model->kv_params(p.n_ctx, p.kv_block_size, 0, p.kv_type));
  CHECK(plan.weights == model->file().file_size());
  CHECK(plan.kv_per_token == cache.bytes_per_token());
  CHECK(plan.kv_at_ctx == cache.bytes_per_token() * 256);
  CHECK(plan.fits);
}

TEST_CASE("memory_plan_params takes SessionParams as the CLI holds them") {
  edgellm::SessionParams sp;
  sp.n_ctx = 3000;
  sp.n_batch = 64;
  sp.n_threads = 4;
  sp.kv_type = edgellm::DType::Q8_0;
  sp.kv_block_size = 32;
  sp.kv_recent_f32 = 16;
  const auto p = edgellm::memory_plan_params(sp, 2);
  CHECK(p.n_ctx == 3000);
  CHECK(p.n_batch == 64);
  CHECK(p.n_threads == 4);
  CHECK(p.kv_type == edgellm::DType::Q8_0);
  CHECK(p.kv_block_size == 32);
  CHECK(p.kv_recent_f32 == 16);
  CHECK(p.n_sequences == 2);
}
