// LoadOptions::progress on the synthetic model (no shared data): fractions strictly increasing to
// 1, with repacking and without; returning false stops the load with Error "load cancelled".
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include <edgellm/model/llama.hpp>

#include "session_fixtures.hpp"

using namespace edgellm;

namespace {

std::vector<float> fractions_of_load(bool repack) {
  std::vector<float> seen;
  LoadOptions o;
  o.repack = repack;
  o.mem_budget = UINT64_MAX;
  o.progress = [&](float f) {
    seen.push_back(f);
    return true;
  };
  LlamaModel m(GgufFile::from_bytes(edgellm_test::synthetic_bytes(), "synthetic-tiny.gguf"), o);
  return seen;
}

}  // namespace

TEST_CASE("load progress: increasing fractions ending at 1, with and without repacking") {
  for (bool repack : {true, false}) {
    CAPTURE(repack);
    const std::vector<float> seen = fractions_of_load(repack);
    REQUIRE(seen.size() >= 5);  // a step per matrix (2 layers x 7 + output)
    for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] > seen[i - 1]);
    CHECK(seen.front() >= 0.0f);
    CHECK(seen.back() == 1.0f);
    CHECK(seen[seen.size() - 2] < 1.0f);
  }
}

TEST_CASE("load progress: false at half way stops the load with an Error") {
  std::vector<float> seen;
  LoadOptions o;
  o.mem_budget = UINT64_MAX;
  o.progress = [&](float f) {
    seen.push_back(f);
    return f < 0.5f;
  };
  CHECK_THROWS_WITH_AS(LlamaModel(GgufFile::from_bytes(edgellm_test::synthetic_bytes(), "synthetic-tiny.gguf"), o),
                       doctest::Contains("load cancelled"), Error);
  REQUIRE(!seen.empty());
  CHECK(seen.back() >= 0.5f);
  CHECK(seen.back() < 1.0f);
}
