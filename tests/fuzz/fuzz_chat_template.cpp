// libFuzzer target for chat templates: arbitrary template names, roles and message contents
// (invalid UTF-8, embedded markers such as "<|im_end|>" or "[INST]", empty and huge messages)
// through render_chat and detect_chat_template. Unknown names throw Error; nothing else may fail.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <edgellm/text/chat_template.hpp>

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_chat_template: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

// Splits the input at 0x00 bytes: field 0 picks the template, then (role, content) pairs.
std::vector<std::string> fields(const uint8_t* data, size_t size) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) out.emplace_back();
    else out.back().push_back(static_cast<char>(data[i]));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> names = edgellm::chat_template_names();
  static const char* const kRoles[] = {"system", "user", "assistant", "tool", ""};
  const std::vector<std::string> f = fields(data, size);

  // Field 0: one byte picks a known template (or, when it is past the table, the field itself
  // is the name, known or not); the next byte holds add_generation_prompt.
  const std::string& head = f[0];
  const size_t pick = head.empty() ? 0 : static_cast<uint8_t>(head[0]);
  const bool add_ass = head.size() > 1 && (head[1] & 1);
  const bool named = pick < names.size();
  const std::string name = named ? names[pick] : head;

  std::vector<edgellm::ChatMessage> msgs;
  for (size_t i = 1; i < f.size(); i += 2) {
    const std::string& r = f[i];
    // A one-byte role field picks a usual role; anything longer is the role itself.
    std::string role = r.size() == 1 ? kRoles[static_cast<uint8_t>(r[0]) % 5] : r;
    msgs.push_back({role, i + 1 < f.size() ? f[i + 1] : std::string()});
  }

  bool known = true;
  std::string out;
  try {
    out = edgellm::render_chat(name, msgs, add_ass);
  } catch (const edgellm::Error&) {
    known = false;
  }
  if (named && !known) fail("render_chat rejected a name from chat_template_names()");
  if (known) {
    // Rendering is a pure function of its input.
    if (edgellm::render_chat(name, msgs, add_ass) != out) fail("render_chat is not deterministic");
    // Markup is bounded per message: no template may blow up the text.
    size_t total = 0;
    for (const auto& m : msgs) total += m.content.size() + m.role.size();
    if (out.size() > 2 * total + 256 * (msgs.size() + 1)) fail("rendered text is out of proportion to the input");
  }
  // Detection over arbitrary Jinja-like source: returns "" or a name render_chat knows.
  const std::string detected = edgellm::detect_chat_template(head);
  if (!detected.empty()) {
    try {
      (void)edgellm::render_chat(detected, msgs, add_ass);
    } catch (const edgellm::Error&) {
      fail("detect_chat_template returned a name render_chat does not know");
    }
  }
  return 0;
}
