// Chat templates without a Jinja engine: each known format is a small C++ function that renders
// byte-identically to llama.cpp's built-in one, plus recognition of a GGUF's Jinja source.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"

namespace edgellm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (other roles are passed through where the format allows)
  std::string content;
  // For Jinja templates (text/chat.hpp): the message's other members as OpenAI / Hugging Face
  // write them (tool_calls with function.arguments as an object, name, tool_call_id,
  // reasoning_content, content as a list of {type, text} parts). Null or an object.
  Json extra = Json();
};

namespace chat_detail {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Bytes that never occur in UTF-8 text: render_chat_marked() wraps each message's content in
// them to find, after rendering, which bytes came from messages.
inline constexpr char kContentOpen = '\xFE', kContentClose = '\xFF';

// Leading and trailing whitespace removed (llama.cpp trims in some formats). A marked content
// is trimmed inside its markers (and is "" when nothing is left, as the unmarked one).
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  const bool marked = e >= 2 && s[0] == kContentOpen && s[e - 1] == kContentClose;
  if (marked) ++b, --e;
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  if (marked) return b == e ? std::string() : kContentOpen + s.substr(b, e - b) + kContentClose;
  return s.substr(b, e - b);
}

using Messages = std::vector<ChatMessage>;

// <|im_start|>role\ncontent<|im_end|>\n
inline std::string render_chatml(const Messages& msgs, bool add_ass) {
  std::string out;
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (add_ass) out += "<|im_start|>assistant\n";
  return out;
}

// Llama 2 "[INST] ... [/INST]answer</s>" and its variants. The first turn's "[INST] " is
// written without BOS (the tokenizer adds it); the generation prompt changes nothing.
struct Llama2Style {
  bool system_block;    // system as <<SYS>>...<</SYS>>; otherwise plain text + "\n"
  bool bos_in_history;  // later turns start with "<s>[INST] "
  bool strip;           // contents trimmed
};
inline std::string render_llama2(const Messages& msgs, Llama2Style st) {
  std::string out = "[INST] ";
  bool inside_turn = true;
  for (const auto& m : msgs) {
    const std::string content = st.strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      out += st.bos_in_history ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      out += st.system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
    } else if (m.role == "user") {
      out += content + " [/INST]";
    } else {
      out += content + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

// Mistral v1 (" [INST] x [/INST] y</s>"), v3 ("[INST] x[/INST] y</s>", answer trimmed) and
// v3-tekken ("[INST]x[/INST]y</s>"). System text is prefixed to the next user turn.
struct MistralStyle {
  const char* leading;   // before "[INST]" and "[/INST]"
  const char* trailing;  // after "[INST]" and before an answer
  bool trim_answer;
};
inline std::string render_mistral(const Messages& msgs, MistralStyle st) {
  std::string out;
  bool inside_turn = false;
  for (const auto& m : msgs) {
    if (!inside_turn) {
      out += std::string(st.leading) + "[INST]" + st.trailing;
      inside_turn = true;
    }
    if (m.role == "system") {
      out += m.content + "\n\n";
    } else if (m.role == "user") {
      out += m.content + st.leading + "[/INST]";
    } else {
      out += st.trailing + (st.trim_answer ? trim(m.content) : m.content) + "</s>";
      inside_turn = false;
    }
  }
  return out;
}

inline std::string render_mistral_v7(const Messages& msgs, bool /*add_ass*/) {
  std::string out;
  for (const auto& m : msgs) {
    if (m.role == "system") out += "[SYSTEM_PROMPT] " + m.content + "[/SYSTEM_PROMPT]";
    else if (m.role == "user") out += "[INST] " + m.content + "[/INST]";
    else out += " " + m.content + "</s>";
  }
  return out;
}

inline std::string render_llama3(const Messages& msgs, bool add_ass) {
  std::string out;
  for (const auto& m : msgs)
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  if (add_ass) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// <|role|>\ncontent<END>\n — zephyr ends turns with <|endoftext|>, phi3 with <|end|>.
inline std::string render_tagged(const Messages& msgs, bool add_ass, const char* end_tag) {
  std::string out;
  for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + end_tag + "\n";
  if (add_ass) out += "<|assistant|>\n";
  return out;
}

// Gemma has no system role: the (trimmed) system text opens the next user turn;
// "assistant" is called "model".
inline std::string render_gemma(const Messages& msgs, bool add_ass) {
  std::string out, system;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system = trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.content) + "<end_of_turn>\n";
  }
  if (add_ass) out += "<start_of_turn>model\n";
  return out;
}

// Vicuna 1.1; the Orca variant writes the system text as "SYSTEM: ...\n".
inline std::string render_vicuna(const Messages& msgs, bool add_ass, bool orca) {
  std::string out;
  for (const auto& m : msgs) {
    if (m.role == "system") out += orca ? "SYSTEM: " + m.content + "\n" : m.content + "\n\n";
    else if (m.role == "user") out += "USER: " + m.content + "\n";
    else if (m.role == "assistant") out += "ASSISTANT: " + m.content + "</s>\n";
  }
  if (add_ass) out += "ASSISTANT:";
  return out;
}

inline std::string render_deepseek2(const Messages& msgs, bool add_ass) {
  // "<｜end▁of▁sentence｜>" (fullwidth bars, U+2581 spaces).
  static const char kEndOfSentence[] = "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  std::string out;
  for (const auto& m : msgs) {
    if (m.role == "system") out += m.content + "\n\n";
    else if (m.role == "user") out += "User: " + m.content + "\n\n";
    else if (m.role == "assistant") out += "Assistant: " + m.content + kEndOfSentence;
  }
  if (add_ass) out += "Assistant:";
  return out;
}

struct TemplateEntry {
  const char* name;
  std::string (*render)(const Messages&, bool);
};

// llama.cpp's names. The first twelve are checked against llama.cpp's output (shared data);
// the variants after them follow the same code paths with their documented differences.
inline const std::vector<TemplateEntry>& template_table() {
  static const std::vector<TemplateEntry> kTable = {
      {"chatml", render_chatml},
      {"llama2", [](const Messages& m, bool) { return render_llama2(m, {false, false, false}); }},
      {"llama2-sys", [](const Messages& m, bool) { return render_llama2(m, {true, false, false}); }},
      {"llama3", render_llama3},
      {"mistral-v1", [](const Messages& m, bool) { return render_mistral(m, {" ", " ", false}); }},
      {"mistral-v3", [](const Messages& m, bool) { return render_mistral(m, {"", " ", true}); }},
      {"mistral-v7", render_mistral_v7},
      {"zephyr", [](const Messages& m, bool a) { return render_tagged(m, a, "<|endoftext|>"); }},
      {"phi3", [](const Messages& m, bool a) { return render_tagged(m, a, "<|end|>"); }},
      {"gemma", render_gemma},
      {"vicuna", [](const Messages& m, bool a) { return render_vicuna(m, a, false); }},
      {"deepseek2", render_deepseek2},
      {"llama2-sys-bos", [](const Messages& m, bool) { return render_llama2(m, {true, true, false}); }},
      {"llama2-sys-strip", [](const Messages& m, bool) { return render_llama2(m, {true, false, true}); }},
      {"mistral-v3-tekken", [](const Messages& m, bool) { return render_mistral(m, {"", "", false}); }},
      {"vicuna-orca", [](const Messages& m, bool a) { return render_vicuna(m, a, true); }},
  };
  return kTable;
}

inline const TemplateEntry* find_template(const std::string& name) {
  for (const auto& e : template_table())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace chat_detail

// Names render_chat() accepts, in llama.cpp's spelling.
inline std::vector<std::string> chat_template_names() {
  std::vector<std::string> out;
  for (const auto& e : chat_detail::template_table()) out.emplace_back(e.name);
  return out;
}

// The prompt text for msgs in the named format (no BOS: the tokenizer adds it). With
// add_generation_prompt the assistant's turn is opened where the format has such a marker.
inline std::string render_chat(const std::string& template_name, const std::vector<ChatMessage>& msgs,
                               bool add_generation_prompt) {
  const chat_detail::TemplateEntry* e = chat_detail::find_template(template_name);
  if (!e) {
    std::string names;
    for (const auto& n : chat_template_names()) names += (names.empty() ? "" : ", ") + n;
    throw_error("chat template \"", template_name, "\" is not known; known templates: ", names);
  }
  return e->render(msgs, add_generation_prompt);
}

// A rendered chat and where the messages' contents are in it (byte offset, length).
struct RenderedChat {
  std::string text;
  std::vector<std::pair<size_t, size_t>> contents;
};

// render_chat(), also saying which bytes of the text came from message contents, so that the
// tokenizer can parse the template's markup for control tokens and leave the contents as text
// (Tokenizer::encode_protected). The text equals render_chat()'s. Throws when a content holds
// bytes 0xFE / 0xFF (never in UTF-8).
inline RenderedChat render_chat_marked(const std::string& template_name, const std::vector<ChatMessage>& msgs,
                                       bool add_generation_prompt) {
  std::vector<ChatMessage> marked = msgs;
  for (auto& m : marked) {
    if (m.content.find_first_of(std::string{chat_detail::kContentOpen, chat_detail::kContentClose}) != std::string::npos)
      throw_error("a message's content is not UTF-8 text (bytes 0xFE / 0xFF)");
    if (!m.content.empty()) m.content = chat_detail::kContentOpen + m.content + chat_detail::kContentClose;
  }
  const std::string raw = render_chat(template_name, marked, add_generation_prompt);
  RenderedChat rc;
  rc.text.reserve(raw.size());
  size_t open = std::string::npos;
  for (char c : raw) {
    if (c == chat_detail::kContentOpen) {
      open = rc.text.size();
    } else if (c == chat_detail::kContentClose) {
      if (open != std::string::npos && rc.text.size() > open) rc.contents.emplace_back(open, rc.text.size() - open);
      open = std::string::npos;
    } else {
      rc.text.push_back(c);
    }
  }
  return rc;
}

// Recognises a GGUF's tokenizer.chat_template (Jinja source) by the characteristic substrings
// llama.cpp looks for, in llama.cpp's order; a known template name is returned as is. Returns ""
// when the source matches none of the formats render_chat() knows.
inline std::string detect_chat_template(const std::string& src) {
  if (chat_detail::find_template(src)) return src;
  auto has = [&src](const char* s) { return src.find(s) != std::string::npos; };
  if (has("<|im_start|>")) return has("<|im_sep|>") ? "" : "chatml";  // <|im_sep|>: phi4
  if (src.rfind("mistral", 0) == 0 || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return "mistral-v7";
    // Mistral's official v1 / v3 / v3-tekken templates.
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return "mistral-v1";
      if (has("\"[INST]\"")) return "mistral-v3-tekken";
      return "mistral-v3";
    }
    if (has("content.strip()")) return "llama2-sys-strip";
    if (has("bos_token + '[INST]")) return "llama2-sys-bos";
    if (has("<<SYS>>")) return "llama2-sys";
    return "llama2";
  }
  if (has("<|assistant|>") && has("<|end|>")) return "phi3";
  if (has("<|assistant|>") && has("<|user|>")) return "";  // falcon3 / glmedge
  if (has("<|user|>") && has("<|endoftext|>")) return "zephyr";
  if (has("bos_token + message['role']")) return "";  // monarch
  if (has("<start_of_turn>")) return "gemma";
  if (has("'\\n\\nAssistant: ' + eos_token")) return "";  // orion
  if (has("GPT4 Correct ")) return "";  // openchat
  if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? "vicuna-orca" : "vicuna";
  if (has("### Instruction:") && has("<|EOT|>")) return "";  // deepseek (coder)
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return "";  // command-r
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return "llama3";
  if (has("[gMASK]sop") || has("[gMASK]<sop>")) return "";  // chatglm3 / chatglm4
  if (has("<\xE7\x94\xA8\xE6\x88\xB7>")) return "";  // minicpm ("<用户>")
  if (has("'Assistant: ' + message['content'] + eos_token")) return "deepseek2";
  return "";
}

}  // namespace edgellm
