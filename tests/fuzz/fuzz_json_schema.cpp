// libFuzzer target for JSON Schema -> GBNF: any JSON text. Bad JSON or unsupported schemas throw
// Error; a schema that converts must give GBNF that parses, and its matcher must start.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <edgellm/core/json.hpp>
#include <edgellm/grammar/gbnf.hpp>
#include <edgellm/grammar/json_schema.hpp>
#include <edgellm/grammar/matcher.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string gbnf;
  try {
    gbnf = edgellm::json_schema_to_gbnf(edgellm::Json::parse(in, /*max_depth=*/64));
  } catch (const edgellm::Error&) {
    return 0;
  }
  try {
    auto g = std::make_shared<const edgellm::Grammar>(edgellm::Grammar::parse(gbnf));
    edgellm::GrammarMatcher m(g);
    (void)m.accept_bytes("{\"a\": [1, \"x\"], \"b\": null}");
  } catch (const edgellm::Error& e) {
    const std::string what = e.what();
    // The matcher's bounds may stop a huge grammar; a grammar the converter wrote must parse.
    if (what.find("parse stack") != std::string::npos || what.find("too large") != std::string::npos ||
        what.find("expand to more than") != std::string::npos)
      return 0;
    std::fprintf(stderr, "fuzz_json_schema: %s\n--- grammar:\n%s\n", e.what(), gbnf.c_str());
    std::abort();
  }
  return 0;
}
