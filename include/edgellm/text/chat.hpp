// ChatTemplate: how a conversation becomes prompt text. Either the model's own Jinja template
// (tokenizer.chat_template, rendered as Hugging Face's apply_chat_template does: jinja/) or one
// of the built-in formats (chat_template.hpp, llama.cpp's names). Rendering also says which bytes
// came from what people wrote, so that text typed as "<|im_end|>" is tokenized as text while the
// template's own markup becomes control tokens (Tokenizer::encode_protected).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"
#include "edgellm/jinja/template.hpp"
#include "edgellm/text/chat_template.hpp"
#include "edgellm/text/tokenizer.hpp"

namespace edgellm {

// What a template renders: the conversation, tools, and the caller's extra variables.
struct ChatRequest {
  std::vector<ChatMessage> messages;
  Json tools;                          // null, or an array of {"type": "function", "function": {...}}
  bool add_generation_prompt = true;
  Json kwargs;                         // null, or an object of extra variables (e.g. enable_thinking)
};

namespace chat_detail {

// Protected positions are written, while rendering, as code points U+F0000 + c standing for the
// first character c (< U+10000) of control-token text inside what a message's author wrote.
// Templates carry them through string methods like any character; after rendering they are put
// back and their offsets recorded. (Private use plane 15: never in text a user can be refused for
// typing, see sentinel_check.)
inline constexpr uint32_t kSentinelBase = 0xF0000;

inline bool is_sentinel_lead(const std::string& s, size_t i) {
  // U+F0000..U+FFFFF: F3 B0..BF 80..BF 80..BF
  return i + 3 < s.size() && static_cast<unsigned char>(s[i]) == 0xF3 && (static_cast<unsigned char>(s[i + 1]) & 0xF0) == 0xB0;
}

inline void sentinel_check(const std::string& text) {
  for (size_t i = 0; i + 3 < text.size(); ++i)
    if (is_sentinel_lead(text, i))
      throw_error("a message holds a character of U+F0000..U+FFFFF (private use), which the chat renderer reserves");
}

// text with the first character of each occurrence of a control text replaced by its sentinel.
inline std::string protect(const std::string& text, const std::vector<std::string>& control_texts) {
  sentinel_check(text);
  std::vector<bool> mark(text.size(), false);
  bool any = false;
  for (const std::string& t : control_texts) {
    if (t.empty()) continue;
    for (size_t k = text.find(t); k != std::string::npos; k = text.find(t, k + 1)) {
      mark[k] = true;
      any = true;
    }
  }
  if (!any) return text;
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size();) {
    const size_t b = i;
    const uint32_t cp = jinja::py::next_cp(text, i);
    if (mark[b] && cp < 0x10000) jinja::py::append_cp(out, kSentinelBase + cp);
    else out.append(text, b, i - b);
  }
  return out;
}

// Puts the characters back; the offsets where sentinels stood become protected ranges.
inline RenderedChat unprotect(const std::string& raw) {
  RenderedChat rc;
  rc.text.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    if (is_sentinel_lead(raw, i)) {
      size_t k = i;
      const uint32_t cp = jinja::py::next_cp(raw, k);
      if (cp >= kSentinelBase && cp < kSentinelBase + 0x10000) {
        const size_t at = rc.text.size();
        jinja::py::append_cp(rc.text, cp - kSentinelBase);
        rc.contents.emplace_back(at, rc.text.size() - at);
        i = k;
        continue;
      }
    }
    rc.text.push_back(raw[i++]);
  }
  return rc;
}

// A message as the template sees it: role, content (or the content parts of `extra`), and
// extra's other members (tool_calls, name, tool_call_id, reasoning_content, ...). The strings a
// person wrote (content, text parts, reasoning) are protected.
inline Json message_json(const ChatMessage& m, const std::vector<std::string>* control_texts) {
  auto prot = [&](const std::string& s) { return control_texts ? protect(s, *control_texts) : s; };
  Json o = Json::object();
  o.set("role", m.role);
  o.set("content", prot(m.content));
  if (m.extra.is_object()) {
    for (const auto& kv : m.extra.as_object()) {
      if (kv.first == "role") continue;
      Json v = kv.second;
      if (kv.first == "content" && v.is_array()) {
        for (Json& part : v.as_array())
          if (part.is_object())
            if (Json* t = part.find("text"))
              if (t->is_string()) *t = prot(t->as_string());
      } else if (kv.first == "reasoning_content" && v.is_string()) {
        v = prot(v.as_string());
      }
      o.set(kv.first, std::move(v));
    }
  }
  return o;
}

}  // namespace chat_detail

// The control-token texts a tokenizer matches in parse_special mode: what must not come from
// message contents (Tokenizer::encode_protected refuses them inside protected ranges).
inline std::vector<std::string> control_token_texts(const Tokenizer& tok) {
  std::vector<std::string> out;
  const Vocab& v = tok.vocab();
  for (int32_t id : v.special_tokens)
    if (v.attrs[static_cast<size_t>(id)] & (token_attr::kControl | token_attr::kUnknown))
      out.push_back(v.tokens[static_cast<size_t>(id)]);
  return out;
}

class ChatTemplate {
 public:
  ChatTemplate() : ChatTemplate(builtin("chatml")) {}

  // A built-in format by its llama.cpp name (chat_template_names()); Error naming the known ones.
  static ChatTemplate builtin(const std::string& name) {
    render_chat(name, {}, true);  // an unknown name throws here, listing the known ones
    ChatTemplate t(0);
    t.name_ = name;
    return t;
  }
  // A Jinja template (a GGUF's tokenizer.chat_template, a .jinja file); bos / eos_token are the
  // texts the template sees. Throws jinja::TemplateError (with the line) when it does not parse.
  static ChatTemplate jinja(const std::string& source, std::string bos_token, std::string eos_token) {
    ChatTemplate t(0);
    t.name_ = "jinja";
    t.source_ = source;
    t.tpl_ = std::make_shared<jinja::Template>(source);
    t.bos_ = std::move(bos_token);
    t.eos_ = std::move(eos_token);
    return t;
  }
  // A Jinja template with the BOS / EOS texts of a tokenizer's vocabulary.
  static ChatTemplate jinja(const std::string& source, const Tokenizer& tok) {
    return jinja(source, token_text(tok, tok.vocab().bos), token_text(tok, tok.vocab().eos));
  }
  // A model's template: its tokenizer.chat_template rendered by the Jinja engine (llama.cpp's
  // default), BOS / EOS texts from the vocabulary; chatml when the file has none.
  static ChatTemplate from_model(const std::string& gguf_source, const Tokenizer& tok) {
    if (gguf_source.empty()) return builtin("chatml");
    return jinja(gguf_source, tok);
  }
  // --chat-template's value: a built-in name, or Jinja source (it holds "{%" or "{{").
  static ChatTemplate from_flag(const std::string& value, const Tokenizer& tok) {
    if (chat_detail::find_template(value)) return builtin(value);
    if (value.find("{%") != std::string::npos || value.find("{{") != std::string::npos)
      return jinja(value, tok);
    return builtin(value);  // throws, naming the known ones
  }

  bool is_jinja() const { return tpl_ != nullptr; }
  // "jinja" or the built-in format's name.
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

  // The prompt text. Jinja errors (the template's raise_exception, undefined values) are
  // jinja::TemplateError; a built-in format given tools is an Error.
  std::string apply(const ChatRequest& req) const { return render(req, nullptr).text; }

  // apply(), also saying which byte ranges came from people's text where that text holds
  // control-token texts (`control_texts`, see control_token_texts()): hand both to
  // Tokenizer::encode_protected. The text equals apply()'s.
  RenderedChat apply_protected(const ChatRequest& req, const std::vector<std::string>& control_texts) const {
    return render(req, &control_texts);
  }

  // Tokens for a request with user text kept as text: apply_protected + encode_protected. A BOS
  // the template wrote is not doubled by the one the vocabulary adds (llama.cpp drops it too).
  // `text`, when given, receives the rendered prompt.
  std::vector<int32_t> tokenize(const ChatRequest& req, const Tokenizer& tok, std::string* text = nullptr) const {
    RenderedChat rc = apply_protected(req, control_token_texts(tok));
    if (text) *text = rc.text;
    const bool add_bos = tok.add_bos();
    if (add_bos && !bos_.empty() && rc.text.compare(0, bos_.size(), bos_) == 0) {
      rc.text.erase(0, bos_.size());
      std::vector<std::pair<size_t, size_t>> kept;
      for (auto& r : rc.contents)
        if (r.first >= bos_.size()) kept.emplace_back(r.first - bos_.size(), r.second);
      rc.contents = std::move(kept);
    }
    return tok.encode_protected(rc.text, add_bos, rc.contents);
  }

 private:
  explicit ChatTemplate(int) {}
  std::string name_, source_, bos_, eos_;
  std::shared_ptr<const jinja::Template> tpl_;

  static std::string token_text(const Tokenizer& tok, int32_t id) {
    if (id < 0 || id >= tok.n_vocab()) return "";
    return tok.token_to_piece(id, true);
  }

  RenderedChat render(const ChatRequest& req, const std::vector<std::string>* control_texts) const {
    if (!tpl_) {
      if (req.tools.is_array() && req.tools.size() > 0)
        throw_error("the built-in chat format \"", name_, "\" cannot render tools: use the model's own (Jinja) template");
      if (!control_texts) return RenderedChat{render_chat(name_, req.messages, req.add_generation_prompt), {}};
      return render_chat_marked(name_, req.messages, req.add_generation_prompt);
    }
    Json ctx = Json::object();
    if (req.kwargs.is_object())
      for (const auto& kv : req.kwargs.as_object()) ctx.set(kv.first, kv.second);
    else if (!req.kwargs.is_null())
      throw_error("chat template kwargs must be a JSON object, got ", Json::type_name(req.kwargs.type()));
    Json msgs = Json::array();
    for (const auto& m : req.messages) msgs.push_back(chat_detail::message_json(m, control_texts));
    ctx.set("messages", std::move(msgs));
    if (req.tools.is_array() && req.tools.size() > 0) ctx.set("tools", req.tools);
    else if (!req.tools.is_null() && !req.tools.is_array())
      throw_error("tools must be a JSON array, got ", Json::type_name(req.tools.type()));
    ctx.set("add_generation_prompt", req.add_generation_prompt);
    ctx.set("bos_token", bos_);
    ctx.set("eos_token", eos_);
    const std::string raw = tpl_->render(ctx);
    if (!control_texts) return RenderedChat{raw, {}};
    return chat_detail::unprotect(raw);
  }
};

}  // namespace edgellm
