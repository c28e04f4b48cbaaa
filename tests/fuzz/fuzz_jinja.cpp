// libFuzzer target for jinja/: the input is a template (parsed, then rendered against a chat
// context with messages, tools and tool calls) — any outcome but a crash, a hang, a leak or an
// exception other than TemplateError is a failure. Bounds are tightened so that every input ends
// quickly. Seeds (.ci/run): the shared chat templates.
#include <cstddef>
#include <cstdint>
#include <string>

#include "edgellm/core/json.hpp"
#include "edgellm/jinja/template.hpp"

namespace {

const edgellm::Json& context() {
  static const edgellm::Json kCtx = edgellm::Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris? <|im_end|>"}]},
      {"role": "assistant", "content": "", "reasoning_content": "Check the tool.",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": [1, 2.5, null, true]}}}]},
      {"role": "tool", "name": "get_weather", "tool_call_id": "c1", "content": "{\"t\": 21}"},
      {"role": "assistant", "content": "<think>warm</think>It is 21 \u00b0C."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  return kCtx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  edgellm::jinja::Limits lim;
  lim.max_steps = 200000;
  lim.max_output = 1 << 20;
  lim.max_range = 10000;
  edgellm::jinja::RenderOptions opt;
  opt.strftime_now = [](const std::string& fmt) { return fmt; };  // no clock: reproducible runs
  try {
    const edgellm::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size), lim);
    (void)t.render(context(), opt);
  } catch (const edgellm::jinja::TemplateError&) {
  }
  return 0;
}
