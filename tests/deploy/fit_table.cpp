// Prints DEPLOY.md's "what fits" tables: weight bytes of known LLaMA shapes at common mixes (the
// per-tensor rules of edgellm-quantize) and the largest context that fits a 2 GB and a 4 GB board
// by the plan edgellm-cli -v prints (model/memory_plan.hpp), and what streams under a budget by the
// loader's own residency plan (model/residency.hpp project_residency). No model files needed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "edgellm/model/memory_plan.hpp"
#include "edgellm/model/residency.hpp"
#include "edgellm/tools/synthetic.hpp"

namespace {

struct Shape {
  const char* name;
  int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train;
  bool tied;
};

edgellm::LlamaConfig config_of(const Shape& s) {
  edgellm::SyntheticSpec spec{s.name, s.n_vocab, s.n_embd, s.n_layer, s.n_head, s.n_head_kv, s.n_ff, s.n_ctx_train, 10000.f, s.tied};
  spec.head_dim = s.head_dim;
  return edgellm::synthetic_config(spec);
}

std::string gib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", double(b) / double(uint64_t(1) << 30));
  return s;
}

// The loader's options of the stream tables: budget b, the run q, the file's matrix forms (no repack:
// the same figures on every machine).
edgellm::LoadOptions budget_options(const edgellm::MemoryPlanParams& q, uint64_t b) {
  edgellm::LoadOptions o;
  o.repack = false;
  o.mem_budget = b;
  o.plan = q;
  return o;
}

std::string ctx_cell(int n) { return n == 0 ? std::string("—") : std::to_string(n); }

}  // namespace

int main() {
  const std::vector<Shape> shapes = {
      {"Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, 131072, true},
      {"TinyLlama-1.1B", 22, 2048, 32, 4, 64, 5632, 32000, 2048, false},
      {"Llama-2-7B", 32, 4096, 32, 32, 128, 11008, 32000, 4096, false},
      {"Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, 131072, false},
  };
  const Shape s8b = shapes.back();
  const char* mixes[] = {"Q2_K", "Q4_0", "Q4_K_M", "Q8_0"};
  // MemTotal of a "2 GB" / "4 GB" board: the nominal size less ~5% kept by firmware and kernel.
  const uint64_t ram2 = uint64_t(0.95 * double(uint64_t(2) << 30));
  const uint64_t ram4 = uint64_t(0.95 * double(uint64_t(4) << 30));
  edgellm::MemoryPlanParams p;
  p.n_threads = 4;
  p.n_batch = 512;

  std::printf("| model | KV F32 / token | KV F16 / token | KV Q8_0 / token |\n| --- | --- | --- | --- |\n");
  for (const auto& s : shapes) {
    const auto c = config_of(s);
    std::printf("| %s | %s | %s | %s |\n", s.name,
                edgellm::format_bytes(edgellm::kv_bytes_per_token(c, edgellm::DType::F32)).c_str(),
                edgellm::format_bytes(edgellm::kv_bytes_per_token(c, edgellm::DType::F16)).c_str(),
                edgellm::format_bytes(edgellm::kv_bytes_per_token(c, edgellm::DType::Q8_0)).c_str());
  }
  std::printf("\nRAM (MemTotal) assumed: 2 GB board %s GiB, 4 GB board %s GiB; kept free: %s / %s; "
              "4 threads, -b 512. Context = largest fitting -c (whole 16-token KV blocks, at most the "
              "training context); — = the weights alone do not fit.\n\n",
              gib(ram2).c_str(), gib(ram4).c_str(), edgellm::format_bytes(edgellm::memory_headroom_bytes(ram2)).c_str(),
              edgellm::format_bytes(edgellm::memory_headroom_bytes(ram4)).c_str());
  std::printf("| model | quant | weights GiB | scratch at -c 2048 | 2 GB: ctx, KV F16 | 2 GB: ctx, KV Q8_0 | "
              "4 GB: ctx, KV F16 | 4 GB: ctx, KV Q8_0 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& s : shapes) {
    const auto c = config_of(s);
    for (const char* m : mixes) {
      const uint64_t w = edgellm::llama_weight_bytes(c, edgellm::quant_mix(m));
      auto fit = [&](uint64_t ram, edgellm::DType kv) {
        edgellm::MemoryPlanParams q = p;
        q.kv_type = kv;
        return ctx_cell(edgellm::max_context_that_fits(c, w, q, ram));
      };
      edgellm::MemoryPlanParams q = p;
      q.n_ctx = 2048;
      std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.name, m, gib(w).c_str(),
                  edgellm::format_bytes(edgellm::scratch_bytes(c, q)).c_str(), fit(ram2, edgellm::DType::F16).c_str(),
                  fit(ram2, edgellm::DType::Q8_0).c_str(), fit(ram4, edgellm::DType::F16).c_str(),
                  fit(ram4, edgellm::DType::Q8_0).c_str());
    }
  }

  // When it does not fit: the weights streamed from storage per token (edgellm --mem-budget),
  // at the budgets of the board study (1400 MiB for the app on a 2 GB DAYU200) and of a 4 GB board
  // (3000 MiB), -c 2048 with a KV F16 cache, at the DAYU200's eMMC rate.
  const double emmc = 165e6;
  const uint64_t budgets[2] = {uint64_t(1400) << 20, uint64_t(3000) << 20};
  auto stream_params = [&](const Shape& s) {  // -c 2048 (at most the training context), KV F16
    edgellm::MemoryPlanParams q = p;
    q.n_ctx = std::min(2048, s.n_ctx_train);
    q.kv_type = edgellm::DType::F16;
    return q;
  };
  // "streamed | s/token |" at each budget ("fits | — |" when nothing streams); *any: something streams.
  auto stream_cells = [&](const edgellm::LlamaConfig& c, const char* m, const edgellm::MemoryPlanParams& q, bool* any) {
    std::string cells;
    for (uint64_t b : budgets) {
      char cell[96];
      edgellm::ResidencyPlan pr;
      try {
        pr = edgellm::project_residency(c, edgellm::quant_mix(m), budget_options(q, b));
      } catch (const edgellm::Error&) {  // the load would stop: name the minimum budget
        pr = edgellm::project_residency(c, edgellm::quant_mix(m), budget_options(q, UINT64_MAX - 1));
        if (any) *any = true;
        std::snprintf(cell, sizeof cell, " below the minimum %s | — |", edgellm::format_bytes(pr.minimum).c_str());
        cells += cell;
        continue;
      }
      if (any) *any |= pr.streamed > 0;
      if (pr.streamed == 0) std::snprintf(cell, sizeof cell, " fits | — |");
      else std::snprintf(cell, sizeof cell, " %s | %.1f |", edgellm::format_bytes(pr.streamed).c_str(), double(pr.streamed) / emmc);
      cells += cell;
    }
    return cells;
  };
  std::printf("\nWhen the model does not fit: memory budget 1400 MiB (2 GB board) / 3000 MiB (4 GB board), -c 2048, "
              "KV F16, -b 512; streamed = bytes read from storage per token; s/token = streamed / 165 MB/s (eMMC), "
              "the storage limit (compute adds where it is slower); llama.cpp re-reads the whole file per token "
              "(last column).\n\n");
  std::printf("| model | quant | matrices GiB | 1400 MiB: streamed / token | 1400 MiB: s/token | 3000 MiB: streamed / token | "
              "3000 MiB: s/token | whole file / 165 MB/s |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& s : shapes) {
    const auto c = config_of(s);
    for (const char* m : mixes) {
      const edgellm::MemoryPlanParams q = stream_params(s);
      const uint64_t w = edgellm::llama_weight_bytes(c, edgellm::quant_mix(m));
      bool any = false;
      const std::string cells = stream_cells(c, m, q, &any);
      if (!any) continue;
      const uint64_t mats = edgellm::project_residency(c, edgellm::quant_mix(m), budget_options(q, UINT64_MAX)).weights;
      std::printf("| %s | %s | %s |%s %.1f |\n", s.name, m, gib(mats).c_str(), cells.c_str(), double(w) / emmc);
    }
  }

  // The i-quant and ternary mixes (and Q2_K / Q4_K_M for comparison) of a 1.5B, a 3B and an 8B
  // model: file tensor bytes and the same storage-limit projection at both budgets.
  const std::vector<Shape> iq_shapes = {
      {"Qwen2.5-1.5B", 28, 1536, 12, 2, 128, 8960, 151936, 32768, true},
      {"Llama-3.2-3B", 28, 3072, 24, 8, 128, 8192, 128256, 131072, true},
      s8b,
  };
  const char* iq_mixes[] = {"IQ1_S", "IQ1_M", "TQ1_0", "IQ2_XXS", "TQ2_0", "IQ2_XS", "IQ2_S", "IQ2_M", "Q2_K_S", "Q2_K",
                            "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_XS", "IQ4_NL", "Q4_K_M"};
  std::printf("\nI-quant and ternary mixes (llama-quantize's per-tensor rules; Q2_K and Q4_K_M for comparison): "
              "same budgets, -c 2048, KV F16; s/token = streamed / 165 MB/s, the storage limit.\n\n");
  std::printf("| model | quant | weights GiB | 1400 MiB: streamed / token | 1400 MiB: s/token | 3000 MiB: streamed / token | "
              "3000 MiB: s/token |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& s : iq_shapes) {
    const auto c = config_of(s);
    for (const char* m : iq_mixes) {
      const edgellm::MemoryPlanParams q = stream_params(s);
      const std::string cells = stream_cells(c, m, q, nullptr);
      std::printf("| %s | %s | %s |%s\n", s.name, m, gib(edgellm::llama_weight_bytes(c, edgellm::quant_mix(m))).c_str(),
                  cells.c_str());
    }
  }
  return 0;
}
