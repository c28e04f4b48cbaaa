// libFuzzer target for the JSON parser (include/edgellm/core/json.hpp) with the caps the server
// puts on request bodies (depth 64, members per object, values in all), on inputs up to the
// server's body cap (.ci/run gives this target -max_len=1048576): every input either parses or
// throws edgellm::Error; a parsed value has no duplicate keys, writes and reads back to itself,
// and is what the uncapped parser reads too.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "edgellm/core/json.hpp"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_json: %s\n", what);
  std::abort();
}

void check_keys(const edgellm::Json& v, int depth) {
  if (depth > 64) fail("nesting beyond the cap");
  if (v.is_array())
    for (const auto& e : v.as_array()) check_keys(e, depth + 1);
  if (!v.is_object()) return;
  if (v.size() > 4096) fail("an object beyond the member cap");
  std::set<std::string> keys;
  for (const auto& kv : v.as_object()) {
    if (!keys.insert(kv.first).second) fail("a duplicate key was accepted");
    check_keys(kv.second, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  edgellm::JsonLimits lim;  // as the server's ApiLimits
  lim.max_depth = 64;
  lim.max_members = 4096;
  lim.max_values = 1 << 17;
  edgellm::Json v;
  try {
    v = edgellm::Json::parse(text, lim);
  } catch (const edgellm::JsonLimitError&) {
    return 0;
  } catch (const edgellm::Error&) {
    // Malformed: the uncapped parser must refuse it too (limits never make a document valid).
    try {
      (void)edgellm::Json::parse(text, 64);
    } catch (const edgellm::Error&) {
      return 0;
    }
    fail("refused with caps, accepted without");
  }
  check_keys(v, 0);
  if (edgellm::Json::parse(text, 64) != v) fail("the capped and uncapped parsers disagree");
  const std::string out = v.dump();
  try {
    if (edgellm::Json::parse(out, 128) != v) fail("dump does not read back to the same value");
  } catch (const edgellm::Error&) {
    fail("dump is not valid JSON");
  }
  return 0;
}
