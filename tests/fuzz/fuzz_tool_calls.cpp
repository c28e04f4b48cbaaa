// libFuzzer target for tool calls (grammar/tool_calls.hpp). The first byte picks the format and
// the choice; the rest is, up to the first "\n%%\n", a `tools` JSON array and after it a reply
// as a model might write it. Bad tools throw Error; tools that convert must give GBNF that
// parses. The reply goes through the parser and through the streaming hold-back in chunks of
// every size the input suggests: what the stream released plus finish().content must equal
// what parse_tool_calls says, and a parsed call's arguments must be JSON.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <edgellm/core/json.hpp>
#include <edgellm/grammar/gbnf.hpp>
#include <edgellm/grammar/tool_calls.hpp>

namespace {

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_tool_calls: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using namespace edgellm;
  const auto format = static_cast<ToolCallFormat>((data[0] & 7) % 5);
  ToolChoice choice;
  choice.mode = static_cast<ToolChoice::Mode>(((data[0] >> 3) & 3) % 3);  // auto, none, required
  const bool parallel = (data[0] >> 5) & 1;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t split = in.find("\n%%\n");
  const std::string tools = split == std::string::npos ? std::string() : in.substr(0, split);
  const std::string reply = split == std::string::npos ? in : in.substr(split + 4);

  if (!tools.empty()) {
    std::string gbnf;
    try {
      const auto fns = tool_functions(Json::parse(tools, 64));
      gbnf = tool_call_grammar(format, fns, choice, parallel).gbnf;
    } catch (const Error&) {
      gbnf.clear();
    }
    if (!gbnf.empty()) {
      try {
        (void)Grammar::parse(gbnf);
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("too large") == std::string::npos) die(e.what(), gbnf);
      }
    }
  }

  const ParsedToolCalls p = parse_tool_calls(format, reply);
  for (const ToolCall& c : p.calls) {
    if (c.name.empty()) die("a call without a name", reply);
    try {
      (void)Json::parse(c.arguments, 256);
    } catch (const Error&) {
      // Arguments the model gave as a JSON string are kept as written (they may not be JSON).
    }
  }
  for (size_t step : {size_t(1), size_t(3), reply.size() + 1}) {
    ToolCallStream s(format, choice.mode == ToolChoice::Required);
    std::string released;
    for (size_t i = 0; i < reply.size(); i += step) released += s.push(reply.substr(i, step));
    const ParsedToolCalls q = s.finish();
    if (q.calls.size() != (format == ToolCallFormat::None && choice.mode == ToolChoice::Required
                               ? parse_tool_calls(ToolCallFormat::Hermes, reply).calls.size()
                               : p.calls.size()))
      die("the stream found other calls than the parser", reply);
    if (q.calls.empty() && released + q.content != reply) die("a reply without calls was not streamed whole", reply);
  }
  return 0;
}
