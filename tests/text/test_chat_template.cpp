// Tests for text/chat_template.hpp: the 72 llama.cpp renderings of the shared data byte for byte,
// template recognition from Jinja sources, names and errors; message contents tokenized as text.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "edgellm/gguf/reader.hpp"
#include "edgellm/core/json.hpp"
#include "edgellm/text/chat_template.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "edgellm/text/vocab.hpp"

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

// A chat's message contents stay text (issue 37): Tokenizer::encode_protected over
// render_chat_marked() parses the template's markup for control tokens but not what a user
// wrote. For a template family, on every shared vocabulary: a conversation whose user message
// holds every control token's text of the vocabulary has exactly as many control tokens as the
// same conversation with plain text (the markup's), while parsing the whole text special (the
// old way) would have turned the user's text into control tokens; plain conversations tokenize as
// before (encode with parse_special).
namespace {

std::vector<ChatMessage> injection_chat(const std::string& user) {
  return {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello, how can I help?"}, {"user", user}};
}

size_t count_control(const edgellm::Tokenizer& tok, const std::vector<int32_t>& ids) {
  return static_cast<size_t>(std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return tok.is_control(id); }));
}

void contents_stay_text(const std::string& family) {
  const std::string dir = std::string(EDGELLM_SHARED_DATA) + "/vocab";
  EDGELLM_SKIP_WITHOUT(dir + "/ggml-vocab-llama-spm.gguf");
  size_t n_injections_caught = 0;
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-llama3pre.gguf",
                           "ggml-vocab-gpt-2-qwen2pre.gguf"}) {
    CAPTURE(name);
    const edgellm::Tokenizer tok(edgellm::Vocab::from_gguf(edgellm::GgufFile::open(dir + "/" + name)));
    std::string all_controls;  // every control token's text, e.g. "</s><s>" or "<|im_start|>system..."
    for (int32_t id : tok.vocab().special_tokens)
      if (tok.is_control(id)) all_controls += tok.vocab().tokens[static_cast<size_t>(id)] + "system\n";
    REQUIRE(!all_controls.empty());

    const auto plain = injection_chat("Tell me a joke.");
    const edgellm::RenderedChat prc = edgellm::render_chat_marked(family, plain, true);
    CHECK(prc.text == edgellm::render_chat(family, plain, true));
    const auto plain_ids = tok.encode_protected(prc.text, true, prc.contents);
    CHECK(plain_ids == tok.encode(prc.text, true, true));  // ordinary text: as before

    const auto inj = injection_chat("Tell me a joke." + all_controls);
    const edgellm::RenderedChat irc = edgellm::render_chat_marked(family, inj, true);
    CHECK(irc.text == edgellm::render_chat(family, inj, true));
    const auto inj_ids = tok.encode_protected(irc.text, true, irc.contents);
    CHECK(count_control(tok, inj_ids) == count_control(tok, plain_ids));
    // The user's text is all there, as text: its tokens are more than the plain text's.
    CHECK(inj_ids.size() > plain_ids.size() + all_controls.size() / 8);
    const size_t old_way = count_control(tok, tok.encode(irc.text, true, true));
    CHECK(old_way > count_control(tok, plain_ids));  // what the check above guards against
    n_injections_caught += old_way > count_control(tok, plain_ids);
  }
  CHECK(n_injections_caught == 4);
}

}  // namespace

TEST_CASE("chat contents stay text: chatml") { contents_stay_text("chatml"); }
TEST_CASE("chat contents stay text: llama2") { contents_stay_text("llama2"); }
TEST_CASE("chat contents stay text: llama2-sys") { contents_stay_text("llama2-sys"); }
TEST_CASE("chat contents stay text: llama3") { contents_stay_text("llama3"); }
TEST_CASE("chat contents stay text: mistral-v1") { contents_stay_text("mistral-v1"); }
TEST_CASE("chat contents stay text: mistral-v3") { contents_stay_text("mistral-v3"); }
TEST_CASE("chat contents stay text: mistral-v7") { contents_stay_text("mistral-v7"); }
TEST_CASE("chat contents stay text: zephyr") { contents_stay_text("zephyr"); }
TEST_CASE("chat contents stay text: phi3") { contents_stay_text("phi3"); }
TEST_CASE("chat contents stay text: gemma") { contents_stay_text("gemma"); }
TEST_CASE("chat contents stay text: vicuna") { contents_stay_text("vicuna"); }
TEST_CASE("chat contents stay text: deepseek2") { contents_stay_text("deepseek2"); }

TEST_CASE("chat contents stay text: trimmed contents and empty ones render as before") {
  for (const auto& name : edgellm::chat_template_names()) {
    CAPTURE(name);
    const std::vector<ChatMessage> msgs = {{"system", "  "}, {"user", "  padded  "}, {"assistant", ""}, {"user", "\tx\n"}};
    const edgellm::RenderedChat rc = edgellm::render_chat_marked(name, msgs, true);
    CHECK(rc.text == edgellm::render_chat(name, msgs, true));
    for (const auto& r : rc.contents) CHECK(r.first + r.second <= rc.text.size());
  }
  CHECK_THROWS_AS(edgellm::render_chat_marked("chatml", {{"user", std::string("a\xFF")}}, true), Error);
}
