// libFuzzer target for the server's request parsers (examples/server/openai.hpp, operator_api.hpp):
// arbitrary bytes as a /v1/chat/completions or /v1/completions body (the first byte picks which),
// or as a POST /slots/{id}?action= request. Every input either parses into a request whose values
// are in range and whose prompt renders, or is refused with an ApiError whose error object is
// valid JSON; nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "openai.hpp"  // examples/server/
#include "operator_api.hpp"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_openai_request: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

// POST /slots/{id}?action=...: the input's first line is the path and query, the rest the body.
// Parsed: a known action, a file name that stays in the folder; else a 400 / 404 / 413 ApiError.
void slot_request(std::string_view in) {
  const size_t nl = std::min(in.find('\n'), in.size());
  const std::string_view target = in.substr(0, nl), body = in.substr(std::min(nl + 1, in.size()));
  const size_t q = std::min(target.find('?'), target.size());
  try {
    const edgellm::ops::SlotRequest r =
        edgellm::ops::parse_slot_request(target.substr(0, q), target.substr(std::min(q + 1, target.size())), body, {});
    if (r.id < 0) fail("a negative slot id");
    if (r.action != "erase" && (!edgellm::ops::slot_filename_ok(r.filename) || r.filename.find('/') != std::string::npos ||
                                r.filename.find("..") == 0))
      fail("a slot file name that can leave the folder");
  } catch (const edgellm::openai::ApiError& e) {
    if (e.status() != 400 && e.status() != 404 && e.status() != 413) fail("a slot request refused with another status");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using namespace edgellm::openai;
  if (data[0] & 4) {  // (bit 2) the /slots request parser
    slot_request(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    return 0;
  }
  const Endpoint ep = (data[0] & 2) ? Endpoint::ApplyTemplate : (data[0] & 1) ? Endpoint::Chat : Endpoint::Completion;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  ApiLimits lim;
  lim.model_id = "m";
  lim.n_ctx = 512;
  try {
    const ApiRequest r = parse_request(body, ep, lim);
    if (r.gp.max_tokens < -1 || r.gp.max_tokens >= lim.n_ctx) fail("max_tokens out of range");
    if (r.n_probs < 0 || r.n_probs > lim.max_n_probs) fail("n_probs out of range");
    if (r.gp.stop.size() > static_cast<size_t>(lim.max_stop)) fail("too many stop strings");
    if (!(r.gp.deadline_ms >= 0)) fail("negative deadline");
    edgellm::Sampler::validate(r.gp.sampler);
    if (ep != Endpoint::Completion && r.messages.empty()) fail("chat without messages");
    if (ep == Endpoint::Completion && r.prompt.empty()) fail("empty prompt accepted");
    // Built-in formats, and a Jinja template reading every member a message may carry.
    static const edgellm::ChatTemplate kJinja = edgellm::ChatTemplate::jinja(
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content if m.content is string else m.content|tojson }}"
        "{% for c in m.tool_calls|default([]) %}{{ c.function.name }}{{ c.function.arguments|tojson }}{% endfor %}"
        "{{ m.reasoning_content|default('') }}{% endfor %}{% if tools %}{{ tools|tojson }}{% endif %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        "<s>", "</s>");
    try {
      (void)prompt_text(r, kJinja);
    } catch (const edgellm::Error&) {  // a template that refuses these messages says so
    }
    for (const char* t : {"chatml", "llama3", "gemma"}) {
      try {
        (void)prompt_text(r, edgellm::ChatTemplate::builtin(t));
      } catch (const edgellm::Error&) {  // a format that cannot hold these roles says so
      }
    }
  } catch (const ApiError& e) {
    if (e.status() != 400 && e.status() != 413) fail("a parse error that is not 400 (413: the JSON caps)");
    try {
      const edgellm::Json j = edgellm::Json::parse(error_body(e));
      if (j["error"]["message"].as_string() != e.what()) fail("error object does not carry the message");
    } catch (const edgellm::Error&) {
      fail("error object is not valid JSON");
    }
  }
  return 0;
}
