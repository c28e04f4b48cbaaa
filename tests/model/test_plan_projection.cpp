// One residency planner: the plan DEPLOY.md's stream tables print for a shape without a file
// (project_residency) is the plan LlamaModel makes when it loads a file of that shape and mix,
// matrix by matrix; and LoadOptions::reserved_bytes, left free by the planner out of a given or a
// detected budget. Synthetic files only (no shared data).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/kernels/select.hpp"
#include "edgellm/model/llama.hpp"
#include "edgellm/model/residency.hpp"
#include "edgellm/tools/synthetic.hpp"

using namespace edgellm;

namespace {

void check_same_plan(const ResidencyPlan& want, const ResidencyPlan& got) {
  CHECK(got.streaming == want.streaming);
  CHECK(got.budget == want.budget);
  CHECK(got.reserved == want.reserved);
  CHECK(got.kv == want.kv);
  CHECK(got.scratch == want.scratch);
  CHECK(got.weights == want.weights);
  CHECK(got.resident == want.resident);
  CHECK(got.streamed == want.streamed);
  CHECK(got.ring == want.ring);
  CHECK(got.staging == want.staging);
  CHECK(got.read_chunk == want.read_chunk);
  CHECK(got.minimum == want.minimum);
  CHECK(got.n_slots == want.n_slots);
  CHECK(got.slot_bytes == want.slot_bytes);
  CHECK(got.output_chunk_rows == want.output_chunk_rows);
  CHECK(got.resident_matrix == want.resident_matrix);
  CHECK(got.n_ctx == want.n_ctx);
}

LoadOptions projection_options(uint64_t budget, bool repack) {
  LoadOptions o;
  o.mem_budget = budget;
  o.repack = repack;
  o.kernels = &kernels();
  o.plan.n_ctx = 64;
  o.plan.n_batch = 16;
  o.plan.n_threads = 2;
  o.plan.kv_type = DType::F16;
  return o;
}

}  // namespace

TEST_CASE("residency projection: the plan of a shape without a file is the loader's plan of that file") {
  SyntheticSpec untied = synthetic_preset("tiny-256");
  untied.n_layer = 3;
  SyntheticSpec tied = untied;
  tied.tied = true;
  for (const SyntheticSpec& spec : {untied, tied})
    for (const char* mix : {"Q4_K_M", "Q4_0", "Q8_0"}) {
      const bool is_tied = spec.tied;
      const std::string mix_name = mix;
      CAPTURE(is_tied);
      CAPTURE(mix_name);
      const std::vector<uint8_t> bytes = build_synthetic_gguf(spec, quant_mix(mix));
      const LlamaConfig c = synthetic_config(spec);
      for (const bool repack : {false, true}) {
        CAPTURE(repack);
        const ResidencyPlan all = project_residency(c, quant_mix(mix), projection_options(uint64_t(1) << 50, repack));
        REQUIRE_FALSE(all.streaming);
        REQUIRE(all.minimum > 0);
        // No budget, a budget that holds everything, the minimum, and budgets between.
        const uint64_t fits = all.kv + all.scratch + all.weights;
        for (const uint64_t b : {UINT64_MAX, fits, all.minimum, all.minimum + all.weights / 3, all.minimum + all.weights / 2}) {
          CAPTURE(b);
          const LoadOptions o = projection_options(b, repack);
          const ResidencyPlan want = project_residency(c, quant_mix(mix), o);
          const LlamaModel m(GgufFile::from_bytes(bytes, "projection.gguf"), o);
          check_same_plan(want, m.residency());
        }
      }
    }
}

namespace {

// Sixteen layers of one 256 KiB unit, an output matrix of 256 KiB; file forms.
std::vector<PlannedMatrix> reserved_test_matrices() {
  std::vector<PlannedMatrix> mats;
  for (int l = 0; l <= 16; ++l) {
    PlannedMatrix m;
    m.unit_key = l < 16 ? l * kUnitsPerLayer : -1;
    m.n_out = 256;
    m.row_bytes = 1024;
    m.form_group_bytes = 1024;
    mats.push_back(m);
  }
  return mats;
}

}  // namespace

TEST_CASE("residency plan: reserved bytes are left free out of a given and a detected budget") {
  const std::vector<PlannedMatrix> mats = reserved_test_matrices();
  const uint64_t kv = 10000, scratch = 5000, weights = 17 * 256 * 1024;
  LoadOptions o;
  o.mem_budget = kv + scratch + weights;
  const ResidencyPlan fits = plan_residency(mats, kv, scratch, 16, o);
  CHECK_FALSE(fits.streaming);
  CHECK(fits.reserved == 0);
  // The same budget with 128 KiB reserved: something streams.
  o.reserved_bytes = 128 * 1024;
  const ResidencyPlan less = plan_residency(mats, kv, scratch, 16, o);
  REQUIRE(less.streaming);
  CHECK(less.reserved == 128 * 1024);
  CHECK(less.minimum == fits.minimum + 128 * 1024);
  CHECK(less.reserved + less.kv + less.scratch + less.resident + less.ring + less.staging <= less.budget);
  CHECK(less.streamed > 0);
  CHECK(describe_residency(less, false, 0, 0, false).find("reserved 128.0 KiB") != std::string::npos);
  // Below the minimum because of what is reserved: the Error names it.
  o.reserved_bytes = o.mem_budget;
  CHECK_THROWS_WITH_AS(plan_residency(mats, kv, scratch, 16, o), doctest::Contains("reserved"), Error);
  // Without a budget nothing is reserved.
  o.mem_budget = UINT64_MAX;
  CHECK_FALSE(plan_residency(mats, kv, scratch, 16, o).streaming);
  // A detected budget (where this machine tells one) is reduced the same way.
  o.mem_budget = 0;
  o.reserved_bytes = 0;
  const ResidencyPlan detected = plan_residency(mats, kv, scratch, 16, o);
  if (detected.budget_detected) {
    o.reserved_bytes = detected.budget;
    CHECK_THROWS_WITH_AS(plan_residency(mats, kv, scratch, 16, o), doctest::Contains("(detected) is below the minimum"), Error);
    o.reserved_bytes = detected.budget - (kv + scratch + weights - 512 * 1024);
    const ResidencyPlan part = plan_residency(mats, kv, scratch, 16, o);
    CHECK(part.budget_detected);
    CHECK(part.reserved == o.reserved_bytes);
    CHECK(part.streaming);
  }
}
