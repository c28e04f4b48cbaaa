// Tool calls: how the model families we run write a function call, the grammar that makes them
// write it (each function's `parameters` schema for its arguments), and the parser that turns
// the text back into OpenAI's `tool_calls`. The tools themselves reach the model through its own
// chat template (text/chat.hpp); the format is read off that template's source.
//
//   Hermes / Qwen2.5 / Qwen3   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Llama 3.1 / 3.2            {"name": "f", "parameters": {...}}
//   Mistral                    [TOOL_CALLS][{"name": "f", "arguments": {...}}]
//   Functionary v3.1           <function=f>{...}</function>
//
// With tool_choice "auto" the grammar is lazy: the text is free until the format's trigger, and
// from the trigger's first byte on it must be calls (then only the end of generation). With
// "required" or a named function it holds from the first token. Includes grammar/ and core/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"
#include "edgellm/grammar/json_schema.hpp"

namespace edgellm {

enum class ToolCallFormat { None, Hermes, Llama3, Mistral, FunctionaryV31 };

inline const char* tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::None: return "none";
    case ToolCallFormat::Hermes: return "hermes";
    case ToolCallFormat::Llama3: return "llama3";
    case ToolCallFormat::Mistral: return "mistral";
    case ToolCallFormat::FunctionaryV31: return "functionary-v3.1";
  }
  return "none";
}

// The format a chat template teaches its model, from the markup it writes for tool calls.
inline ToolCallFormat tool_call_format_of(const std::string& template_source) {
  const auto has = [&](const char* s) { return template_source.find(s) != std::string::npos; };
  if (has("<tool_call>")) return ToolCallFormat::Hermes;
  if (has("[TOOL_CALLS]")) return ToolCallFormat::Mistral;
  if (has("<function=")) return ToolCallFormat::FunctionaryV31;
  if (has("<|start_header_id|>") && has("\"parameters\"")) return ToolCallFormat::Llama3;
  return ToolCallFormat::None;
}

// OpenAI's tool_choice: "auto" (default), "none", "required", or {type: function, function: {name}}.
struct ToolChoice {
  enum Mode { Auto, None, Required, Named };
  Mode mode = Auto;
  std::string name;  // Named

  static ToolChoice parse(const Json& v) {
    ToolChoice c;
    if (v.is_null()) return c;
    if (v.is_string()) {
      const std::string& s = v.as_string();
      if (s == "auto") return c;
      if (s == "none") c.mode = None;
      else if (s == "required") c.mode = Required;
      else throw_error("tool_choice: '", s, "' is not one of auto, none, required, or {\"type\": \"function\", ...}");
      return c;
    }
    const Json* f = v.is_object() ? v.find("function") : nullptr;
    const Json* n = f && f->is_object() ? f->find("name") : nullptr;
    EDGELLM_CHECK(n && n->is_string() && !n->as_string().empty(),
                  "tool_choice: an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    c.mode = Named;
    c.name = n->as_string();
    return c;
  }
};

// One function the model may call (OpenAI's {type: "function", function: {name, description,
// parameters}}); parameters absent = any object.
struct ToolFunction {
  std::string name;
  Json parameters;
};

// The functions of a `tools` array; an Error names the first malformed tool.
inline std::vector<ToolFunction> tool_functions(const Json& tools) {
  std::vector<ToolFunction> out;
  if (tools.is_null()) return out;
  EDGELLM_CHECK(tools.is_array(), "tools: must be an array");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools.at(i);
    const std::string where = "tools[" + std::to_string(i) + "]";
    EDGELLM_CHECK(t.is_object(), where, ": must be an object");
    const Json* type = t.find("type");
    EDGELLM_CHECK(!type || type->is_null() || (type->is_string() && type->as_string() == "function"), where,
                  ": only tools of type \"function\" are supported");
    const Json* f = t.find("function");
    EDGELLM_CHECK(f && f->is_object(), where, ": 'function' must be an object");
    const Json* name = f->find("name");
    EDGELLM_CHECK(name && name->is_string() && !name->as_string().empty(), where, ": 'function.name' must be a non-empty string");
    ToolFunction fn;
    fn.name = name->as_string();
    for (const ToolFunction& o : out) EDGELLM_CHECK(o.name != fn.name, where, ": function '", fn.name, "' is declared twice");
    const Json* p = f->find("parameters");
    fn.parameters = p && !p->is_null() ? *p : Json::parse(R"({"type": "object"})");
    EDGELLM_CHECK(fn.parameters.is_object(), where, ": 'function.parameters' must be a JSON Schema object");
    out.push_back(std::move(fn));
  }
  return out;
}

// The grammar of a format's calls to `fns`, and the triggers that switch it on when lazy.
struct ToolCallGrammar {
  std::string gbnf;
  std::vector<std::string> triggers;  // empty: the grammar holds from the first token
};

// An Error when there is nothing to constrain (no functions, choice "none") or the named function
// is not among them, or a parameters schema is outside what json_schema.hpp converts.
inline ToolCallGrammar tool_call_grammar(ToolCallFormat format, const std::vector<ToolFunction>& fns,
                                         const ToolChoice& choice, bool parallel) {
  EDGELLM_CHECK(choice.mode != ToolChoice::None, "tool calls: tool_choice is \"none\"");
  std::vector<const ToolFunction*> use;
  for (const ToolFunction& f : fns)
    if (choice.mode != ToolChoice::Named || f.name == choice.name) use.push_back(&f);
  EDGELLM_CHECK(!fns.empty(), "tool calls: no tools given");
  EDGELLM_CHECK(!use.empty(), "tool_choice: function '", choice.name, "' is not among the tools");
  // A format we do not know from the template: Hermes' markup (the grammar still makes the model
  // write it, and the parser reads it back).
  if (format == ToolCallFormat::None) format = ToolCallFormat::Hermes;
  const char* args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  std::vector<Json> docs;  // one per function: the call object, or (Functionary) its arguments
  docs.reserve(use.size());
  for (const ToolFunction* f : use) {
    if (format == ToolCallFormat::FunctionaryV31) {
      docs.push_back(f->parameters);
      continue;
    }
    Json name = Json::object();
    name.set("const", f->name);
    Json props = Json::object();
    props.set("name", std::move(name));
    props.set(args_key, f->parameters);
    Json required = Json::array();
    required.push_back("name");
    required.push_back(args_key);
    Json call = Json::object();
    call.set("type", "object");
    call.set("properties", std::move(props));
    call.set("required", std::move(required));
    call.set("additionalProperties", false);
    for (const char* defs : {"$defs", "definitions"})  // "#/$defs/..." in the parameters resolve at the call's root
      if (const Json* d = f->parameters.find(defs)) call.set(defs, *d);
    docs.push_back(std::move(call));
  }
  std::vector<std::pair<std::string, const Json*>> named;
  std::string alts;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string rule = "tool-" + std::to_string(i);
    named.emplace_back(rule, &docs[i]);
    if (format == ToolCallFormat::FunctionaryV31)
      alts += (i ? " | " : "") + grammar_detail::gbnf_literal("<function=" + use[i]->name + ">") + " " + rule + " \"</function>\"";
    else
      alts += (i ? " | " : "") + rule;
  }
  ToolCallGrammar g;
  std::string root;
  switch (format) {
    case ToolCallFormat::Hermes: {
      const std::string one = "\"<tool_call>\" \"\\n\"? (" + alts + ") \"\\n\"? \"</tool_call>\"";
      root = parallel ? one + " (\"\\n\"{0,2} " + one + ")*" : one;
      g.triggers = {"<tool_call>"};
      break;
    }
    case ToolCallFormat::Llama3:  // one call per turn (the Llama 3.1 template renders only one)
      root = "(" + alts + ")";
      g.triggers = {"{\"name\""};
      break;
    case ToolCallFormat::Mistral:
      root = "\"[TOOL_CALLS]\"? \"[\" (" + alts + ")" + (parallel ? " (\", \" (" + alts + "))*" : std::string()) + " \"]\"";
      g.triggers = {"[TOOL_CALLS]"};
      break;
    case ToolCallFormat::FunctionaryV31:
      root = parallel ? "(" + alts + ")+" : "(" + alts + ")";
      g.triggers = {"<function="};
      break;
    case ToolCallFormat::None: break;
  }
  g.gbnf = JsonSchemaConverter::convert_documents(named, root);
  if (choice.mode != ToolChoice::Auto) g.triggers.clear();
  return g;
}

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON text (OpenAI's function.arguments)
};

struct ParsedToolCalls {
  std::string content;  // the text that is not a call
  std::vector<ToolCall> calls;
};

namespace tool_detail {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}
inline size_t skip_space(const std::string& s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// The end of the JSON object or array starting at s[i] ('{' or '['), by bracket depth outside
// strings; npos when it does not close.
inline size_t json_end(const std::string& s, size_t i) {
  int depth = 0;
  bool in_str = false;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (in_str) {
      if (c == '\\') ++k;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) return k + 1;
    }
  }
  return std::string::npos;
}

// A JSON value at s[i] (an object or array), parsed; `end` past it. False: none there.
inline bool json_at(const std::string& s, size_t i, Json& out, size_t& end) {
  if (i >= s.size() || (s[i] != '{' && s[i] != '[')) return false;
  end = json_end(s, i);
  if (end == std::string::npos) return false;
  try {
    out = Json::parse(std::string_view(s).substr(i, end - i));
    return true;
  } catch (const Error&) {
    return false;
  }
}

// {"name": ..., "arguments"|"parameters": {...}} as a call (arguments given as a JSON string
// are kept as written).
inline bool call_of(const Json& o, ToolCall& c) {
  if (!o.is_object()) return false;
  const Json* name = o.find("name");
  if (!name || !name->is_string() || name->as_string().empty()) return false;
  const Json* args = o.find("arguments");
  if (!args) args = o.find("parameters");
  c.name = name->as_string();
  if (!args || args->is_null()) c.arguments = "{}";
  else if (args->is_string()) c.arguments = args->as_string();
  else c.arguments = args->dump();
  if (const Json* id = o.find("id"); id && id->is_string()) c.id = id->as_string();
  return true;
}

// Calls each opened by `open_tag`, the text around them content: one(from, c) parses the call whose
// text starts at text[from] (after the tag) into c and returns where the text after it starts, or
// npos when it is not a call (then the whole reply is content: false).
template <class One>
bool tagged_calls(const std::string& text, std::string_view open_tag, ParsedToolCalls& r, One one) {
  size_t at = 0;
  for (;;) {
    const size_t open = text.find(open_tag, at);
    if (open == std::string::npos) break;
    r.content += text.substr(at, open - at);
    ToolCall c;
    at = one(open + open_tag.size(), c);
    if (at == std::string::npos) return false;
    r.calls.push_back(std::move(c));
  }
  r.content += text.substr(std::min(at, text.size()));
  return true;
}

}  // namespace tool_detail

// The calls in a reply written in `format`; a reply whose calls do not all parse is content.
inline ParsedToolCalls parse_tool_calls(ToolCallFormat format, const std::string& text) {
  using namespace tool_detail;
  ParsedToolCalls r;
  ParsedToolCalls as_content;
  as_content.content = text;
  switch (format) {
    case ToolCallFormat::None: return as_content;
    case ToolCallFormat::Hermes: {
      const bool ok = tagged_calls(text, "<tool_call>", r, [&](size_t body, ToolCall& c) {
        const size_t close = text.find("</tool_call>", body);
        const size_t body_end = close == std::string::npos ? text.size() : close;
        Json o;
        size_t end = 0;
        const std::string inner = text.substr(body, body_end - body);
        if (!json_at(inner, skip_space(inner, 0), o, end) || skip_space(inner, end) != inner.size() || !call_of(o, c))
          return std::string::npos;
        return close == std::string::npos ? text.size() : close + 12;
      });
      if (!ok) return as_content;
      break;
    }
    case ToolCallFormat::Llama3: {
      size_t i = skip_space(text, 0);
      if (text.compare(i, 14, "<|python_tag|>") == 0) i = skip_space(text, i + 14);
      if (i >= text.size() || text[i] != '{') return as_content;
      while (i < text.size()) {
        Json o;
        size_t end = 0;
        ToolCall c;
        if (!json_at(text, i, o, end) || !call_of(o, c)) return as_content;
        r.calls.push_back(std::move(c));
        i = skip_space(text, end);
        if (i < text.size() && text[i] == ';') i = skip_space(text, i + 1);
      }
      break;
    }
    case ToolCallFormat::Mistral: {
      size_t i = text.find("[TOOL_CALLS]");
      if (i != std::string::npos) {
        r.content = text.substr(0, i);
        i = skip_space(text, i + 12);
      } else {  // the control token's text may not be in the reply: calls at its start
        i = skip_space(text, 0);
        if (text.compare(i, 2, "[{") != 0) return as_content;
      }
      Json a;
      size_t end = 0;
      if (!json_at(text, i, a, end) || !a.is_array() || a.size() == 0) return as_content;
      for (const Json& o : a.as_array()) {
        ToolCall c;
        if (!call_of(o, c)) return as_content;
        r.calls.push_back(std::move(c));
      }
      r.content += text.substr(end);
      break;
    }
    case ToolCallFormat::FunctionaryV31: {
      const bool ok = tagged_calls(text, "<function=", r, [&](size_t name, ToolCall& c) {
        const size_t gt = text.find('>', name);
        if (gt == std::string::npos) return std::string::npos;
        c.name = text.substr(name, gt - name);
        Json o;
        size_t end = 0;
        if (c.name.empty() || !json_at(text, gt + 1, o, end) || !o.is_object()) return std::string::npos;
        c.arguments = o.dump();
        return text.compare(end, 11, "</function>") == 0 ? end + 11 : end;
      });
      if (!ok) return as_content;
      break;
    }
  }
  if (r.calls.empty()) return as_content;
  r.content = trim(r.content);
  return r;
}

// Ids for calls the model did not name: "call_" + 24 letters and digits; Mistral's templates
// require exactly 9 letters and digits.
inline std::string new_tool_call_id(ToolCallFormat format, std::mt19937_64& rng) {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = format == ToolCallFormat::Mistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % 62];
  return id;
}

// Streaming a reply that may hold calls: content goes out as it comes until the text may be a
// call (a trigger, or with `at_start` formats a reply that opens like one); from there it is held
// and finish() parses the whole reply. What push() released plus finish().content is the reply's
// content.
class ToolCallStream {
 public:
  ToolCallStream(ToolCallFormat format, bool required) : format_(format), required_(required) {
    if (format_ == ToolCallFormat::None && required_) format_ = ToolCallFormat::Hermes;
    switch (format_) {
      case ToolCallFormat::Hermes: triggers_ = {"<tool_call>"}; break;
      case ToolCallFormat::FunctionaryV31: triggers_ = {"<function="}; break;
      case ToolCallFormat::Mistral: triggers_ = {"[TOOL_CALLS]"}; break;
      default: break;
    }
  }

  // The content that can go out now.
  std::string push(const std::string& text) {
    all_ += text;
    if (holding_ || format_ == ToolCallFormat::None) return release(format_ == ToolCallFormat::None ? all_.size() : sent_);
    if (sent_ == 0 && opens_like_call()) return std::string();
    size_t stop = all_.size();
    for (const std::string& t : triggers_) {
      const size_t at = all_.find(t, sent_ > t.size() ? sent_ - t.size() : 0);
      if (at != std::string::npos && at < stop) {
        stop = at;
        holding_ = true;
      }
    }
    if (!holding_)  // hold a tail that may be a trigger's beginning
      for (const std::string& t : triggers_)
        for (size_t k = std::min(t.size() - 1, all_.size()); k > 0; --k)
          if (all_.compare(all_.size() - k, k, t, 0, k) == 0) {
            stop = std::min(stop, all_.size() - k);
            break;
          }
    return release(std::max(stop, sent_));
  }

  // The reply parsed: the content not yet released, and the calls.
  ParsedToolCalls finish() {
    ParsedToolCalls p = parse_tool_calls(format_, all_);
    const std::string sent = all_.substr(0, sent_);
    if (p.calls.empty()) {
      p.content = all_.substr(sent_);
      return p;
    }
    p.content = p.content.compare(0, sent.size(), sent) == 0 ? p.content.substr(std::min(sent.size(), p.content.size())) : std::string();
    return p;
  }

 private:
  // Required calls, or a Llama 3 / Mistral reply that starts with '{' / '[' after blanks: held.
  bool opens_like_call() {
    if (required_) return true;
    const size_t i = tool_detail::skip_space(all_, 0);
    if (i == all_.size()) return true;  // only blanks so far
    const char c = all_[i];
    if ((format_ == ToolCallFormat::Llama3 && (c == '{' || all_.compare(i, 2, "<|") == 0)) ||
        (format_ == ToolCallFormat::Mistral && c == '[')) {
      holding_ = true;
      return true;
    }
    return false;
  }
  std::string release(size_t upto) {
    std::string out = all_.substr(sent_, upto - sent_);
    sent_ = upto;
    return out;
  }

  ToolCallFormat format_;
  bool required_;
  std::vector<std::string> triggers_;
  std::string all_;
  size_t sent_ = 0;
  bool holding_ = false;
};

}  // namespace edgellm
