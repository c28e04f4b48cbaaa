// Tests for text/chat_template.hpp: the 72 llama.cpp renderings of the shared data byte for byte,
// template recognition from Jinja sources, names and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "edgellm/tools/json.hpp"
#include "edgellm/text/chat_template.hpp"

#include "test_util.hpp"

using edgellm::ChatMessage;
using edgellm::Error;
using edgellm::Json;

namespace {
constexpr size_t kExpectedRenderings = 72;  // 12 templates x 3 conversations x 2
}  // namespace

TEST_CASE("chat templates: byte-identical to llama.cpp (shared data)") {
  const std::string path = std::string(EDGELLM_SHARED_DATA) + "/chat_templates.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) EDGELLM_SKIP(path, " not found");
  std::stringstream ss;
  ss << f.rdbuf();
  const Json cases = Json::parse(ss.str());
  REQUIRE(cases.size() == kExpectedRenderings);
  std::set<std::string> seen;
  size_t matched = 0;
  for (const Json& c : cases.as_array()) {
    std::vector<ChatMessage> msgs;
    for (const Json& m : c["messages"].as_array()) msgs.push_back({m["role"].as_string(), m["content"].as_string()});
    const std::string& name = c["template"].as_string();
    const bool add_gp = c["add_generation_prompt"].as_bool();
    seen.insert(name);
    const std::string got = edgellm::render_chat(name, msgs, add_gp);
    INFO("template ", name, ", ", msgs.size(), " messages, add_generation_prompt=", add_gp);
    CHECK(got == c["rendered"].as_string());
    matched += got == c["rendered"].as_string();
  }
  CHECK(matched == kExpectedRenderings);
  CHECK(seen.size() == 12);
}

TEST_CASE("chat templates: whitespace handling of the trimming formats") {
  const std::vector<ChatMessage> msgs = {{"system", " sys \n"}, {"user", "\thi "}, {"assistant", " yo\n"}};
  CHECK(edgellm::render_chat("llama3", msgs, false) ==
        "<|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nyo<|eot_id|>");
  CHECK(edgellm::render_chat("gemma", msgs, true) ==
        "<start_of_turn>user\nsys\n\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n<start_of_turn>model\n");
  // chatml keeps contents as they are.
  CHECK(edgellm::render_chat("chatml", {{"user", " a "}}, false) == "<|im_start|>user\n a <|im_end|>\n");
  CHECK(edgellm::render_chat("mistral-v3", msgs, false) == "[INST]  sys \n\n\n\thi [/INST] yo</s>");
  CHECK(edgellm::render_chat("llama2-sys-strip", msgs, false) == "[INST] <<SYS>>\nsys\n<</SYS>>\n\nhi [/INST]yo</s>");
  CHECK(edgellm::render_chat("llama2-sys-bos", {{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, false) ==
        "[INST] a [/INST]b</s><s>[INST] c [/INST]");
  CHECK(edgellm::render_chat("vicuna-orca", {{"system", "s"}, {"user", "u"}}, true) == "SYSTEM: s\nUSER: u\nASSISTANT:");
  CHECK(edgellm::render_chat("chatml", {}, true) == "<|im_start|>assistant\n");
}

TEST_CASE("chat templates: names and unknown names") {
  const auto names = edgellm::chat_template_names();
  for (const char* n : {"chatml", "llama2", "llama2-sys", "llama3", "mistral-v1", "mistral-v3", "mistral-v7", "zephyr",
                        "phi3", "gemma", "vicuna", "deepseek2"}) {
    INFO(n);
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  }
  try {
    edgellm::render_chat("llama9", {{"user", "x"}}, true);
    FAIL("no throw");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("\"llama9\"") != std::string::npos);
    CHECK(m.find("chatml") != std::string::npos);
    CHECK(m.find("deepseek2") != std::string::npos);
  }
}

TEST_CASE("chat templates: recognition of Jinja sources") {
  using edgellm::detect_chat_template;
  // Known names pass through.
  CHECK(detect_chat_template("gemma") == "gemma");
  CHECK(detect_chat_template("mistral-v7") == "mistral-v7");
  // Fragments with each format's characteristic markers.
  CHECK(detect_chat_template("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                             "'<|im_end|>' + '\\n'}}{% endfor %}") == "chatml");
  CHECK(detect_chat_template("{{'<|im_start|>' + m['role'] + '<|im_sep|>'}}") == "");  // phi4: not ours
  CHECK(detect_chat_template("{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
                             "message['content'] | trim + '<|eot_id|>' %}") == "llama3");
  CHECK(detect_chat_template("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{{ '<<SYS>>\\n' }}") ==
        "llama2-sys-strip");
  CHECK(detect_chat_template("{{ bos_token + '[INST] ' + content + ' [/INST]' }}{{ '<<SYS>>\\n' }}") == "llama2-sys-bos");
  CHECK(detect_chat_template("{{ '[INST] ' + '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' }}") == "llama2-sys");
  CHECK(detect_chat_template("{{ '[INST] ' + message['content'] + ' [/INST]' }}") == "llama2");
  CHECK(detect_chat_template("{{ ' [INST] ' + system_message + '\\n\\n' }}{{ ' [INST] ' + system_message }}"
                             "{%- set x = ' [INST] ' + system_message %}") == "mistral-v1");
  CHECK(detect_chat_template("{{ '[AVAILABLE_TOOLS] ' }}{{ '[INST] ' + message['content'] + '[/INST]' }}") ==
        "mistral-v3");
  CHECK(detect_chat_template("{{ '[AVAILABLE_TOOLS]' }}{{ \"[INST]\" + message['content'] + \"[/INST]\" }}") ==
        "mistral-v3-tekken");
  CHECK(detect_chat_template("{{ '[SYSTEM_PROMPT] ' + system + '[/SYSTEM_PROMPT]' }}{{ '[INST] ' }}") == "mistral-v7");
  CHECK(detect_chat_template("{{ '<|user|>\\n' + m + '<|end|>\\n<|assistant|>\\n' }}") == "phi3");
  CHECK(detect_chat_template("{{ '<|user|>\\n' + m + eos_token }}{{ '<|endoftext|>' }}") == "zephyr");
  CHECK(detect_chat_template("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}") ==
        "gemma");
  CHECK(detect_chat_template("{{ 'USER: ' + m }}{{ 'ASSISTANT: ' + m + '</s>' }}") == "vicuna");
  CHECK(detect_chat_template("{{ 'SYSTEM: ' + s }}{{ 'USER: ' + m }}{{ 'ASSISTANT: ' + m }}") == "vicuna-orca");
  CHECK(detect_chat_template("{{ 'User: ' + message['content'] + '\\n\\n' }}{{ 'Assistant: ' + message['content'] + "
                             "eos_token }}") == "deepseek2");
  CHECK(detect_chat_template("mistral") == "llama2");  // llama.cpp: a source starting with "mistral"
  CHECK(detect_chat_template("") == "");
  CHECK(detect_chat_template("{{ messages }}") == "");
}

// Qwen2.5 and Qwen3 ship Jinja ChatML templates; like llama.cpp, --chat recognises them as its
// built-in "chatml". Qwen3's template also handles a <think> block (it strips the reasoning of
// earlier assistant turns and, with enable_thinking false, opens the reply with an empty one);
// llama.cpp's built-in chatml does neither, and neither do we: message contents are kept as
// given and the generation prompt is "<|im_start|>assistant\n" alone.
TEST_CASE("qwen: Qwen2.5 / Qwen3 templates are ChatML, and Qwen3's <think> blocks are kept as llama.cpp's chatml keeps them") {
  const std::string qwen25 =
      "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
      "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
      "{%- endif %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  const std::string qwen3 =
      "{%- for message in messages %}{%- set content = message.content %}{%- if '</think>' in content %}"
      "{%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}"
      "{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and "
      "enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
  CHECK(edgellm::detect_chat_template(qwen25) == "chatml");
  CHECK(edgellm::detect_chat_template(qwen3) == "chatml");
  const std::vector<ChatMessage> msgs = {{"system", "Be brief."},
                                         {"user", "What is 12 + 345?"},
                                         {"assistant", "<think>\n12 + 345 = 357\n</think>\n\n357."},
                                         {"user", "And 1 + 1?"}};
  CHECK(edgellm::render_chat("chatml", msgs, true) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is 12 + 345?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n12 + 345 = 357\n</think>\n\n357.<|im_end|>\n"
        "<|im_start|>user\nAnd 1 + 1?<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(edgellm::render_chat("chatml", {msgs[1]}, false) == "<|im_start|>user\nWhat is 12 + 345?<|im_end|>\n");
}
