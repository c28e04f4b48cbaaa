// The residency planner (model/residency.hpp) on made-up matrices: what stays resident and what
// streams under a memory budget. (A model loaded, planned and streamed: test_arch.cpp, test_weight_stream.cpp.)
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "edgellm/model/llama.hpp"
#include "edgellm/model/residency.hpp"

using namespace edgellm;

namespace {

// A matrix of n_out rows of `row` bytes in unit `key` (-1: the output), in the file's form.
PlannedMatrix planned(int key, int64_t n_out, size_t row) {
  PlannedMatrix m;
  m.unit_key = key;
  m.n_out = n_out;
  m.row_bytes = row;
  m.form_group_bytes = row;
  return m;
}

LoadOptions plan_opts(uint64_t b) {
  LoadOptions o;
  o.mem_budget = b;
  return o;
}

}  // namespace

TEST_CASE("residency plan: everything resident without a budget or when it fits, the minimum, output first then largest") {
  // Eight layers of 256 KiB: unit 0 = two matrices of 64 KiB, unit 3 = one of 128 KiB; output 256 KiB.
  std::vector<PlannedMatrix> mats;
  for (int l = 0; l < 8; ++l) {
    mats.push_back(planned(l * kUnitsPerLayer + kUnitQKV, 64, 1024));
    mats.push_back(planned(l * kUnitsPerLayer + kUnitQKV, 64, 1024));
    mats.push_back(planned(l * kUnitsPerLayer + kUnitDown, 128, 1024));
  }
  mats.push_back(planned(-1, 256, 1024));
  const uint64_t kv = 100000, scratch = 50000, weights = (8 * 256 + 256) * 1024;
  const ResidencyPlan none = plan_residency(mats, kv, scratch, 16, plan_opts(UINT64_MAX));
  CHECK_FALSE(none.streaming);
  CHECK(none.weights == weights);
  CHECK(none.resident == weights);
  const ResidencyPlan fits = plan_residency(mats, kv, scratch, 16, plan_opts(kv + scratch + weights));
  CHECK_FALSE(fits.streaming);
  CHECK(fits.budget == kv + scratch + weights);

  // At the minimum: ring of kStreamSlots x the largest unit (128 KiB: units 0 and 3 tie, and
  // 64 output rows are 64 KiB), read buffers of the largest read (256 KiB, under kStreamReadBytes).
  const uint64_t unit = 128 * 1024;
  const uint64_t staging = uint64_t(kStreamReadBuffers) * FileReader::staging_for(256 * 1024);
  const uint64_t minimum = kv + scratch + staging + uint64_t(kStreamSlots) * unit;
  const ResidencyPlan at_min = plan_residency(mats, kv, scratch, 16, plan_opts(minimum));
  CHECK(at_min.streaming);
  CHECK(at_min.minimum == minimum);
  CHECK(at_min.read_chunk == 256 * 1024);
  CHECK(at_min.staging == staging);
  CHECK(at_min.resident == 0);
  CHECK(at_min.streamed == weights);
  CHECK(at_min.output_chunk_rows == 128);  // a 128 KiB slot holds 128 output rows
  try {
    plan_residency(mats, kv, scratch, 16, plan_opts(minimum - 1));
    FAIL("a budget below the minimum was planned");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("minimum of") != std::string::npos);
  }
  // 256 KiB more: the output matrix first.
  const ResidencyPlan out_first = plan_residency(mats, kv, scratch, 16, plan_opts(minimum + 256 * 1024));
  REQUIRE(out_first.streaming);
  CHECK(out_first.resident_matrix.back());
  CHECK(out_first.resident == 256 * 1024);
  CHECK(out_first.output_chunk_rows == 0);
  // 128 KiB more than that: then the largest layer matrix (the first of them: layer 0's unit 3).
  const ResidencyPlan more = plan_residency(mats, kv, scratch, 16, plan_opts(minimum + 384 * 1024));
  REQUIRE(more.streaming);
  CHECK(more.resident_matrix[2]);
  CHECK(more.resident == 384 * 1024);
  CHECK(more.resident + more.streamed == weights);
  CHECK(more.kv + more.scratch + more.resident + more.ring + more.staging <= more.budget);
  CHECK_THROWS_AS(plan_residency({planned(-1, 4, 64), planned(0, 4, 64)}, kv, scratch, 16, plan_opts(UINT64_MAX)), Error);
}

TEST_CASE("residency plan: a resident-only form counts its own size resident and the file's in the ring") {
  // 64 layers of one 128-row matrix of 1024-byte rows whose resident form takes 1536 per row (a
  // transcoded i-quant), streamed as the file's rows or (for comparison) in that form; output 64 KiB.
  auto mats_of = [](bool file_form) {
    std::vector<PlannedMatrix> mats;
    for (int l = 0; l < 64; ++l) {
      PlannedMatrix m = planned(l * kUnitsPerLayer + kUnitQKV, 128, 1024);
      m.form_group_bytes = 1536;
      m.streams_file_form = file_form;
      mats.push_back(m);
    }
    mats.push_back(planned(-1, 64, 1024));
    return mats;
  };
  const uint64_t kv = 100000, scratch = 50000, budget = kv + scratch + (uint64_t(4) << 20);
  const ResidencyPlan file_form = plan_residency(mats_of(true), kv, scratch, 16, plan_opts(budget));
  const ResidencyPlan own_form = plan_residency(mats_of(false), kv, scratch, 16, plan_opts(budget));
  CHECK(file_form.weights == 64 * 128 * 1536 + 64 * 1024);
  REQUIRE(file_form.streaming);
  REQUIRE(own_form.streaming);
  // the ring's slots hold a unit's file bytes: 128 x 512 bytes less per slot
  CHECK(own_form.minimum - file_form.minimum == uint64_t(own_form.n_slots) * 128 * 512);
  CHECK(file_form.slot_bytes == 128 * 1024);
}
