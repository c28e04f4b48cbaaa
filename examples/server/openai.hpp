// OpenAI-compatible request parsing/validation and response shapes, as llama-server serves them:
// POST /v1/chat/completions and /v1/completions bodies -> ApiRequest (every field type- and
// range-checked; problems are ApiError with the HTTP status, an OpenAI error type and the
// offending parameter), and JobResult -> response / SSE chunk JSON with usage and a timings
// object. No HTTP here: server.cpp and http_server.hpp beside it do the transport; tests and the fuzz
// target call these directly. Part of edgellm-server (examples/server/), not of the library.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/batch_scheduler.hpp"
#include "edgellm/engine/session.hpp"
#include "edgellm/grammar/json_schema.hpp"
#include "edgellm/grammar/tool_calls.hpp"
#include "edgellm/text/chat.hpp"
#include "edgellm/text/chat_template.hpp"
#include "edgellm/text/reasoning.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "edgellm/tools/bench_stats.hpp"
#include "edgellm/core/json.hpp"

namespace edgellm {
namespace openai {

// A request the server refuses: HTTP status, OpenAI error type, parameter (may be empty).
class ApiError : public Error {
 public:
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error", std::string param = "")
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string type_;
  std::string param_;
};

// {"error": {"code", "message", "type", "param"}}: OpenAI's error object (llama-server adds code).
inline std::string error_body(int status, const std::string& message, const std::string& type,
                              const std::string& param = "") {
  Json e = Json::object();
  e.set("code", status);
  e.set("message", message);
  e.set("type", type);
  e.set("param", param.empty() ? Json() : Json(param));
  Json o = Json::object();
  o.set("error", std::move(e));
  return o.dump();
}
inline std::string error_body(const ApiError& e) { return error_body(e.status(), e.what(), e.type(), e.param()); }

enum class Endpoint { Chat, Completion, ApplyTemplate };

// What the server needs to check a request against.
struct ApiLimits {
  std::string model_id;          // the one model served (any "model" is served by it, as llama-server does)
  bool strict_model = false;     // refuse a "model" other than model_id (404, as OpenAI for an unknown model)
  int n_vocab = 0;               // logit_bias token ids must be below this (0: not checked)
  int n_ctx = 2048;              // tokens per sequence
  int max_stop = 16;             // stop strings per request
  int max_n_probs = 20;
  size_t max_messages = 4096;
  // The request body's JSON: members of any one object and values in all (413 past either, found
  // while parsing, before the body's remaining bytes are read). logit_bias is the largest object a
  // request needs (OpenAI caps it at 300 tokens); 4096 messages of a few values each fit.
  size_t max_object_members = 4096;
  size_t max_json_values = 1 << 17;
  double max_deadline_ms = 1e9;
  SpeculativeParams speculative;  // a request's speculative decoding unless it says otherwise
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  GenerateParams gp;                  // max_tokens -1 when not given: until EOS or the context is full
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool cache_prompt = true;           // llama-server's extension
  int n_probs = 0;                    // llama-server's extension: alternatives per token
  // Chat templates (llama-server's fields): tools (rendered by the template), chat_template_kwargs
  // (extra template variables, e.g. {"enable_thinking": false}), add_generation_prompt
  // (apply-template).
  Json tools;
  Json chat_kwargs;
  bool add_generation_prompt = true;
  // How the answer's thoughts are returned (reasoning_format; the server's default when unset),
  // with the tags and whether the prompt opened them (filled in by the server after rendering).
  bool has_reasoning_format = false;
  ReasoningFormat reasoning = ReasoningFormat::None;
  ReasoningTags reasoning_tags;
  bool thinking_open = false;
  // Constrained output: a GBNF grammar (llama-server's `grammar`, or `json_schema` /
  // response_format converted), or tool calls: the tools' functions, tool_choice,
  // parallel_tool_calls, and the format the server's template writes calls in (set by the server).
  std::string grammar;
  std::vector<ToolFunction> functions;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ToolCallFormat tool_format = ToolCallFormat::None;
};

// Whether the answer may hold tool calls (a chat with tools, tool_choice not "none").
inline bool wants_tool_calls(const ApiRequest& r) {
  return r.endpoint == Endpoint::Chat && !r.functions.empty() && r.tool_choice.mode != ToolChoice::None;
}

namespace detail {

inline ApiError bad(const std::string& param, const std::string& message) { return ApiError(400, message, "invalid_request_error", param); }

inline const char* kind_name(const Json& v) { return Json::type_name(v.type()); }

inline double number_in(const Json& v, const char* name, double lo, double hi) {
  if (!v.is_number()) throw bad(name, std::string("'") + name + "' must be a number, got " + kind_name(v));
  const double x = v.as_number();
  if (!(x >= lo && x <= hi))
    throw bad(name, std::string("'") + name + "' must be in [" + json_format_number(lo) + ", " + json_format_number(hi) +
                        "], got " + json_format_number(x));
  return x;
}
inline int64_t integer_in(const Json& v, const char* name, int64_t lo, int64_t hi) {
  const bool integral = v.is_number() && (v.is_int() || std::floor(v.as_number()) == v.as_number());
  if (!integral) throw bad(name, std::string("'") + name + "' must be an integer, got " + (v.is_number() ? "a fraction" : kind_name(v)));
  const double d = v.as_number();
  if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)))
    throw bad(name, std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        json_format_number(d));
  return v.as_int();
}
inline bool boolean(const Json& v, const char* name) {
  if (!v.is_bool()) throw bad(name, std::string("'") + name + "' must be true or false, got " + kind_name(v));
  return v.as_bool();
}
inline const std::string& string(const Json& v, const char* name) {
  if (!v.is_string()) throw bad(name, std::string("'") + name + "' must be a string, got " + kind_name(v));
  return v.as_string();
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts.
inline std::string content_text(const Json& c) {
  if (c.is_null()) return {};
  if (c.is_string()) return c.as_string();
  if (!c.is_array()) throw bad("messages", std::string("message content must be a string or an array of text parts, got ") + kind_name(c));
  std::string out;
  for (const Json& part : c.as_array()) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string() || part["type"].as_string() != "text" ||
        !part.contains("text") || !part["text"].is_string())
      throw bad("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    out += part["text"].as_string();
  }
  return out;
}

inline void parse_messages(const Json& v, const ApiLimits& lim, std::vector<ChatMessage>& out) {
  if (!v.is_array() || v.size() == 0) throw bad("messages", "'messages' must be a non-empty array");
  if (v.size() > lim.max_messages) throw bad("messages", "more than " + std::to_string(lim.max_messages) + " messages");
  for (const Json& m : v.as_array()) {
    if (!m.is_object()) throw bad("messages", std::string("each message must be an object, got ") + kind_name(m));
    const Json* role = m.find("role");
    if (!role || !role->is_string()) throw bad("messages", "each message needs a string 'role'");
    const std::string& r = role->as_string();
    if (r != "system" && r != "user" && r != "assistant" && r != "developer" && r != "tool")
      throw bad("messages", "unknown message role '" + r + "'");
    const Json* content = m.find("content");
    ChatMessage msg{r == "developer" ? "system" : r, content ? content_text(*content) : std::string()};
    // The other members go to the template as they came (Hugging Face's message shape): name,
    // tool_call_id, reasoning_content, tool_calls, content parts. Function arguments sent as a
    // JSON string (OpenAI's way) are given to the template as the object they hold.
    for (const auto& kv : m.as_object()) {
      if (kv.first == "role" || (kv.first == "content" && !kv.second.is_array())) continue;
      Json v = kv.second;
      if (kv.first == "tool_calls") {
        if (!v.is_array()) throw bad("messages", "'tool_calls' must be an array");
        for (Json& call : v.as_array()) {
          Json* fn = call.is_object() ? call.find("function") : nullptr;
          if (!fn || !fn->is_object()) throw bad("messages", "each tool call needs a 'function' object");
          Json* args = fn->find("arguments");
          if (args && args->is_string()) {
            try {
              Json parsed = Json::parse(args->as_string(), 64);
              if (parsed.is_object()) *args = std::move(parsed);
            } catch (const Error&) {  // not JSON: the template gets the string
            }
          }
        }
      }
      if (msg.extra.is_null()) msg.extra = Json::object();
      msg.extra.set(kv.first, std::move(v));
    }
    out.push_back(std::move(msg));
  }
}

inline void parse_stop(const Json& v, const ApiLimits& lim, std::vector<std::string>& out) {
  if (v.is_null()) return;
  if (v.is_string()) {
    if (!v.as_string().empty()) out.push_back(v.as_string());
    return;
  }
  if (!v.is_array()) throw bad("stop", std::string("'stop' must be a string or an array of strings, got ") + kind_name(v));
  if (v.size() > static_cast<size_t>(lim.max_stop)) throw bad("stop", "at most " + std::to_string(lim.max_stop) + " stop strings");
  for (const Json& s : v.as_array()) {
    if (!s.is_string()) throw bad("stop", "'stop' must be a string or an array of strings");
    if (!s.as_string().empty()) out.push_back(s.as_string());
  }
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}; -100 bans the token.
inline void parse_logit_bias(const Json& v, const ApiLimits& lim, std::vector<std::pair<int32_t, float>>& out) {
  if (!v.is_object()) throw bad("logit_bias", std::string("'logit_bias' must be an object of token id -> bias, got ") + kind_name(v));
  for (const auto& kv : v.as_object()) {
    const std::string& key = kv.first;
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
      throw bad("logit_bias", "'logit_bias' keys must be token ids, got '" + key + "'");
    const long id = std::stol(key);
    if (lim.n_vocab > 0 && id >= lim.n_vocab)
      throw bad("logit_bias", "'logit_bias' token id " + key + " is not in the vocabulary of " + std::to_string(lim.n_vocab));
    const double b = number_in(kv.second, "logit_bias", -100, 100);
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
}

}  // namespace detail

// A request body as a JSON object, read under the limits: 413 past a cap, 400 when malformed or
// not an object.
inline Json parse_body(std::string_view body, const ApiLimits& lim) {
  Json j;
  try {
    JsonLimits jl;
    jl.max_depth = 64;
    jl.max_members = lim.max_object_members;
    jl.max_values = lim.max_json_values;
    j = Json::parse(body, jl);
  } catch (const JsonLimitError& e) {
    throw ApiError(413, std::string("request body is too large a JSON document: ") + e.what());
  } catch (const Error& e) {
    throw ApiError(400, std::string("request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, std::string("request body must be a JSON object, got ") + detail::kind_name(j));
  return j;
}

namespace detail {
// "model": any name (or null) is served by the loaded model; with strict_model only its own (404).
inline void check_model(const Json& j, const ApiLimits& lim) {
  const Json* m = j.find("model");
  if (!m || m->is_null()) return;
  const std::string& name = string(*m, "model");
  if (lim.strict_model && name != lim.model_id)
    throw ApiError(404, "model '" + name + "' is not served here (GET /v1/models lists '" + lim.model_id + "')",
                   "invalid_request_error", "model");
}
}  // namespace detail

// Parses and checks a request body. Throws ApiError (400) naming the parameter for malformed JSON,
// wrong types, values out of range, an unknown model, max_tokens beyond the context; unknown
// fields are ignored, as OpenAI's own clients send some (e.g. "user").
inline ApiRequest parse_request_checked(std::string_view body, Endpoint endpoint, const ApiLimits& lim);

// A JSON Schema as GBNF; a schema the converter refuses is a 400 naming `param`.
inline std::string schema_grammar(const Json& schema, const char* param) {
  using namespace detail;
  try {
    return json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    throw bad(param, e.what());
  }
}

// tools / functions (the legacy shape) / tool_choice / parallel_tool_calls, response_format,
// json_schema and grammar: what the answer must match.
inline void parse_constraints(const Json& j, ApiRequest& r) {
  using namespace detail;
  const Json* tools = j.find("tools");
  if (tools && tools->is_null()) tools = nullptr;
  Json legacy;  // functions: [{name, description, parameters}] as tools
  if (const Json* f = j.find("functions"); f && !f->is_null()) {
    if (tools) throw bad("functions", "'functions' and 'tools' cannot both be given");
    if (!f->is_array()) throw bad("functions", "'functions' must be an array");
    legacy = Json::array();
    for (const Json& fn : f->as_array()) {
      Json t = Json::object();
      t.set("type", "function");
      t.set("function", fn);
      legacy.push_back(std::move(t));
    }
    tools = &legacy;
  }
  if (tools) {
    try {
      r.functions = tool_functions(*tools);
    } catch (const Error& e) {
      throw bad("tools", e.what());
    }
    if (!r.functions.empty()) {
      if (r.endpoint != Endpoint::Chat) throw bad("tools", "'tools' are for /v1/chat/completions");
      r.tools = *tools;
    }
  }
  for (const char* key : {"tool_choice", "function_call"}) {
    const Json* v = j.find(key);
    if (!v || v->is_null()) continue;
    try {
      r.tool_choice = ToolChoice::parse(*v);
    } catch (const Error& e) {
      throw bad(key, e.what());
    }
    if (r.tool_choice.mode != ToolChoice::None && r.tool_choice.mode != ToolChoice::Auto && r.functions.empty())
      throw bad(key, std::string("'") + key + "' asks for a call but no tools are given");
    if (r.tool_choice.mode == ToolChoice::Named) {
      bool known = false;
      for (const ToolFunction& f : r.functions) known = known || f.name == r.tool_choice.name;
      if (!known) throw bad(key, "function '" + r.tool_choice.name + "' is not among the tools");
    }
  }
  if (const Json* v = j.find("parallel_tool_calls"); v && !v->is_null()) r.parallel_tool_calls = boolean(*v, "parallel_tool_calls");
  const char* grammar_from = nullptr;
  auto set_grammar = [&](const char* key, std::string g) {
    if (grammar_from) throw bad(key, std::string("'") + key + "' and '" + grammar_from + "' cannot both be given");
    grammar_from = key;
    r.grammar = std::move(g);
  };
  if (const Json* v = j.find("response_format"); v && !v->is_null()) {
    const Json* t = v->is_object() ? v->find("type") : nullptr;
    if (!t || !t->is_string()) throw bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string& type = t->as_string();
    if (type == "json_object") {
      // llama-server also takes {"type": "json_object", "schema": {...}}.
      const Json* schema = v->find("schema");
      set_grammar("response_format", schema && !schema->is_null() ? schema_grammar(*schema, "response_format") : json_object_gbnf());
    } else if (type == "json_schema") {
      const Json* js = v->find("json_schema");
      const Json* schema = js && js->is_object() ? js->find("schema") : v->find("schema");
      if (!schema || schema->is_null())
        throw bad("response_format", "'response_format' of type json_schema needs 'json_schema': {\"schema\": {...}}");
      set_grammar("response_format", schema_grammar(*schema, "response_format"));
    } else if (type != "text") {
      throw bad("response_format", "'response_format' type '" + type + "' is not one of text, json_object, json_schema");
    }
  }
  if (const Json* v = j.find("json_schema"); v && !v->is_null()) set_grammar("json_schema", schema_grammar(*v, "json_schema"));
  if (const Json* v = j.find("grammar"); v && !v->is_null()) {
    const std::string& g = string(*v, "grammar");
    if (!g.empty()) set_grammar("grammar", g);
  }
  if (grammar_from && wants_tool_calls(r))
    throw bad(grammar_from, std::string("'") + grammar_from + "' and tool calls cannot both constrain the answer (tool_choice \"none\" allows it)");
}

namespace detail {

// POST /apply-template: the messages, tools and add_generation_prompt (no sampling).
inline void parse_template_request(const Json& j, const ApiLimits& lim, ApiRequest& r) {
  const Json* msgs = j.find("messages");
  if (!msgs) throw bad("messages", "'messages' is required");
  parse_messages(*msgs, lim, r.messages);
  if (const Json* v = j.find("tools"); v && !v->is_null()) {
    if (!v->is_array()) throw bad("tools", "'tools' must be an array");
    for (const Json& t : v->as_array())
      if (!t.is_object()) throw bad("tools", "each tool must be an object");
    r.tools = *v;
  }
  if (const Json* v = j.find("add_generation_prompt"); v && !v->is_null())
    r.add_generation_prompt = boolean(*v, "add_generation_prompt");
}

// The answer's length (max_tokens and its aliases, within the context) and the sampler's keys.
inline void parse_sampling(const Json& j, const ApiLimits& lim, ApiRequest& r) {
  const int64_t max_new = lim.n_ctx - 1;
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"}) {
    const Json* v = j.find(key);
    if (!v || v->is_null()) continue;
    const int64_t n = integer_in(*v, key, -1, INT32_MAX);
    if (n > max_new)
      throw bad(key, std::string("'") + key + "' of " + std::to_string(n) + " is beyond the context of " +
                         std::to_string(lim.n_ctx) + " tokens");
    r.gp.max_tokens = static_cast<int>(n);
  }
  SamplerParams& sp = r.gp.sampler;
  if (const Json* v = j.find("temperature"); v && !v->is_null()) sp.temperature = static_cast<float>(number_in(*v, "temperature", 0, 100));
  if (const Json* v = j.find("top_p"); v && !v->is_null()) sp.top_p = static_cast<float>(number_in(*v, "top_p", 0, 1));
  if (const Json* v = j.find("min_p"); v && !v->is_null()) sp.min_p = static_cast<float>(number_in(*v, "min_p", 0, 1));
  if (const Json* v = j.find("top_k"); v && !v->is_null()) sp.top_k = static_cast<int>(integer_in(*v, "top_k", 0, 1 << 30));
  if (const Json* v = j.find("seed"); v && !v->is_null()) sp.seed = static_cast<uint64_t>(integer_in(*v, "seed", 0, INT64_MAX));
  if (const Json* v = j.find("presence_penalty"); v && !v->is_null()) sp.presence_penalty = static_cast<float>(number_in(*v, "presence_penalty", -2, 2));
  if (const Json* v = j.find("frequency_penalty"); v && !v->is_null()) sp.frequency_penalty = static_cast<float>(number_in(*v, "frequency_penalty", -2, 2));
  if (const Json* v = j.find("repeat_penalty"); v && !v->is_null()) sp.repeat_penalty = static_cast<float>(number_in(*v, "repeat_penalty", 1e-6, 1e6));
  if (const Json* v = j.find("repeat_last_n"); v && !v->is_null()) sp.penalty_last_n = static_cast<int>(integer_in(*v, "repeat_last_n", -1, lim.n_ctx));
}

// Speculative decoding, with llama-server's keys; "lookup" (or "speculative.lookup"): prompt lookup.
inline void parse_speculative(const Json& j, const ApiLimits& lim, SpeculativeParams& spec) {
  spec = lim.speculative;
  if (const Json* v = j.find("speculative.n_max"); v && !v->is_null()) spec.n_max = static_cast<int>(integer_in(*v, "speculative.n_max", 0, 64));
  if (const Json* v = j.find("speculative.n_min"); v && !v->is_null()) spec.n_min = static_cast<int>(integer_in(*v, "speculative.n_min", 0, 64));
  if (const Json* v = j.find("speculative.p_min"); v && !v->is_null()) spec.p_min = static_cast<float>(number_in(*v, "speculative.p_min", 0, 1));
  for (const char* key : {"lookup", "speculative.lookup"})
    if (const Json* v = j.find(key); v && !v->is_null()) spec.lookup = boolean(*v, key);
  if (spec.n_min > spec.n_max)
    throw bad("speculative.n_min", "'speculative.n_min' (" + std::to_string(spec.n_min) + ") is above 'speculative.n_max' (" +
                                       std::to_string(spec.n_max) + ")");
}

}  // namespace detail

inline ApiRequest parse_request(std::string_view body, Endpoint endpoint, const ApiLimits& lim) {
  try {
    return parse_request_checked(body, endpoint, lim);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {  // a check below the API layer (e.g. the sampler's) still answers 400
    throw ApiError(400, e.what());
  }
}
inline ApiRequest parse_request_checked(std::string_view body, Endpoint endpoint, const ApiLimits& lim) {
  using namespace detail;
  const Json j = parse_body(body, lim);
  ApiRequest r;
  r.endpoint = endpoint;
  r.gp.max_tokens = -1;
  r.gp.sampler = SamplerParams();  // llama-server's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05
  check_model(j, lim);
  if (const Json* v = j.find("chat_template_kwargs"); v && !v->is_null()) {
    if (!v->is_object()) throw bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.chat_kwargs = *v;
  }
  if (const Json* v = j.find("reasoning_format"); v && !v->is_null()) {
    try {
      r.reasoning = parse_reasoning_format(string(*v, "reasoning_format"));
    } catch (const ApiError&) {
      throw;
    } catch (const Error& e) {
      throw bad("reasoning_format", e.what());
    }
    r.has_reasoning_format = true;
  }
  if (endpoint == Endpoint::ApplyTemplate) {
    parse_template_request(j, lim, r);
    return r;
  }
  parse_constraints(j, r);
  if (const Json* v = j.find("logit_bias"); v && !v->is_null()) parse_logit_bias(*v, lim, r.gp.sampler.logit_bias);
  if (endpoint == Endpoint::Chat) {
    const Json* msgs = j.find("messages");
    if (!msgs) throw bad("messages", "'messages' is required");
    parse_messages(*msgs, lim, r.messages);
  } else {
    const Json* p = j.find("prompt");
    if (!p) throw bad("prompt", "'prompt' is required");
    if (p->is_string()) r.prompt = p->as_string();
    else if (p->is_array() && p->size() == 1 && p->at(0).is_string()) r.prompt = p->at(0).as_string();
    else throw bad("prompt", "'prompt' must be a string (or an array holding one string)");
    if (r.prompt.empty()) throw bad("prompt", "'prompt' is empty");
  }
  parse_sampling(j, lim, r);
  if (const Json* v = j.find("n"); v && !v->is_null() && integer_in(*v, "n", 1, 128) != 1)
    throw bad("n", "'n' other than 1 is not supported: send several requests (they are decoded in one batch)");
  if (const Json* v = j.find("stop")) parse_stop(*v, lim, r.gp.stop);
  if (const Json* v = j.find("stream"); v && !v->is_null()) r.stream = boolean(*v, "stream");
  if (const Json* v = j.find("stream_options"); v && !v->is_null()) {
    if (!v->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    if (const Json* u = v->find("include_usage"); u && !u->is_null()) r.include_usage = boolean(*u, "stream_options.include_usage");
  }
  if (const Json* v = j.find("cache_prompt"); v && !v->is_null()) r.cache_prompt = boolean(*v, "cache_prompt");
  if (const Json* v = j.find("ignore_eos"); v && !v->is_null()) r.gp.ignore_eos = boolean(*v, "ignore_eos");
  if (const Json* v = j.find("n_probs"); v && !v->is_null()) r.n_probs = static_cast<int>(integer_in(*v, "n_probs", 0, lim.max_n_probs));
  if (const Json* v = j.find("deadline_ms"); v && !v->is_null()) r.gp.deadline_ms = number_in(*v, "deadline_ms", 0, lim.max_deadline_ms);
  parse_speculative(j, lim, r.gp.speculative);
  Sampler::validate(r.gp.sampler);
  return r;
}

// What the template renders for a request: its messages and tools, the server's template
// kwargs (--chat-template-kwargs) overlaid by the request's chat_template_kwargs.
inline ChatRequest chat_request(const ApiRequest& r, const Json& server_kwargs) {
  ChatRequest c;
  c.messages = r.messages;
  c.tools = r.tools;
  c.add_generation_prompt = r.endpoint == Endpoint::ApplyTemplate ? r.add_generation_prompt : true;
  c.kwargs = Json::object();
  if (server_kwargs.is_object())
    for (const auto& kv : server_kwargs.as_object()) c.kwargs.set(kv.first, kv.second);
  if (r.chat_kwargs.is_object())
    for (const auto& kv : r.chat_kwargs.as_object()) c.kwargs.set(kv.first, kv.second);
  return c;
}

// The prompt text: the chat rendered with the template, or the raw prompt.
inline std::string prompt_text(const ApiRequest& r, const ChatTemplate& tmpl, const Json& server_kwargs = Json()) {
  return r.endpoint == Endpoint::Completion ? r.prompt : tmpl.apply(chat_request(r, server_kwargs));
}

// The prompt's tokens. A chat: the template's markup becomes control tokens, what people wrote
// stays text (a "</s>" a user writes is the tokens of those four characters, not EOS). A raw
// prompt: control-token text becomes the token when prompt_special (llama-server's way).
// `text`, when given, receives the rendered chat.
inline std::vector<int32_t> prompt_tokens(const ApiRequest& r, const ChatTemplate& tmpl, const Json& server_kwargs,
                                          const Tokenizer& tok, bool prompt_special, std::string* text = nullptr) {
  if (r.endpoint == Endpoint::Completion) return tok.encode(r.prompt, tok.add_bos(), prompt_special);
  return tmpl.tokenize(chat_request(r, server_kwargs), tok, text);
}

// 400 when the tokenized prompt and max_tokens do not fit the context together.
inline void check_fits(const ApiRequest& r, size_t n_prompt, int n_ctx) {
  if (n_prompt >= static_cast<size_t>(n_ctx))
    throw ApiError(400, "the prompt is " + std::to_string(n_prompt) + " tokens, the context holds " + std::to_string(n_ctx),
                   "invalid_request_error", r.endpoint == Endpoint::Chat ? "messages" : "prompt");
  if (r.gp.max_tokens > 0 && n_prompt + static_cast<size_t>(r.gp.max_tokens) > static_cast<size_t>(n_ctx))
    throw ApiError(400, "prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" + std::to_string(r.gp.max_tokens) +
                            ") is beyond the context of " + std::to_string(n_ctx) + " tokens",
                   "invalid_request_error", "max_tokens");
}

// OpenAI's finish_reason; "deadline" is edgellm's (deadline_ms ran out before the answer ended).
inline const char* finish_reason(StopReason r) {
  switch (r) {
    case StopReason::EndOfGeneration:
    case StopReason::StopString: return "stop";
    case StopReason::MaxTokens:
    case StopReason::ContextFull: return "length";
    case StopReason::Deadline: return "deadline";
    case StopReason::Cancelled: return "cancelled";
    case StopReason::None: break;
  }
  return "stop";
}

inline Json usage_json(const JobResult& r) {
  Json u = Json::object();
  u.set("prompt_tokens", r.n_prompt);
  u.set("completion_tokens", static_cast<int64_t>(r.tokens.size()));
  u.set("total_tokens", r.n_prompt + static_cast<int64_t>(r.tokens.size()));
  return u;
}

// llama-server's timings object plus per-token p50/p90, queue time and the stop reason.
inline Json timings_json(const JobResult& r) {
  Json t = Json::object();
  const int prompt_n = r.n_prompt - r.n_cached;
  t.set("cache_n", r.n_cached);
  t.set("prompt_n", prompt_n);
  t.set("prompt_ms", r.prefill_ms);
  t.set("prompt_per_token_ms", prompt_n > 0 ? r.prefill_ms / prompt_n : 0.0);
  t.set("prompt_per_second", r.prefill_ms > 0 ? prompt_n * 1e3 / r.prefill_ms : 0.0);
  const size_t n = r.token_ms.size();
  t.set("predicted_n", static_cast<int64_t>(r.tokens.size()));
  t.set("predicted_ms", r.decode_ms);
  t.set("predicted_per_token_ms", n ? r.decode_ms / static_cast<double>(n) : 0.0);
  t.set("predicted_per_second", r.decode_tps());
  t.set("predicted_token_ms_p50", n ? stats_percentile(r.token_ms, 50) : 0.0);
  t.set("predicted_token_ms_p90", n ? stats_percentile(r.token_ms, 90) : 0.0);
  t.set("ttft_ms", r.ttft_ms);
  t.set("queue_ms", r.queue_ms);
  t.set("stop", stop_reason_name(r.reason));
  if (r.n_drafted > 0) {  // llama-server's names
    t.set("draft_n", r.n_drafted);
    t.set("draft_n_accepted", r.n_accepted);
  }
  return t;
}

// n_probs output, one entry per generated token: {id, token, prob, top_probs: [{id, token, prob}]}.
inline Json probs_json(const std::vector<TokenAlternatives>& probs, const Tokenizer& tok) {
  Json out = Json::array();
  for (const auto& a : probs) {
    Json e = Json::object();
    e.set("id", a.id);
    e.set("token", tok.token_to_piece(a.id));
    float p = 0;
    Json top = Json::array();
    for (const auto& c : a.top) {
      if (c.id == a.id) p = c.p;
      Json x = Json::object();
      x.set("id", c.id);
      x.set("token", tok.token_to_piece(c.id));
      x.set("prob", c.p);
      top.push_back(std::move(x));
    }
    e.set("prob", p);
    e.set("top_probs", std::move(top));
    out.push_back(std::move(e));
  }
  return out;
}

// Identity of one response: id ("chatcmpl-N" / "cmpl-N"), created (unix seconds), model.
struct ResponseId {
  std::string id;
  int64_t created = 0;
  std::string model;
};

inline Json envelope(const ApiRequest& req, const ResponseId& rid, bool chunk) {
  Json o = Json::object();
  o.set("id", rid.id);
  o.set("object", req.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                 : "text_completion");
  o.set("created", rid.created);
  o.set("model", rid.model);
  o.set("system_fingerprint", "edgellm");
  return o;
}

// OpenAI's tool_calls: [{id, type: "function", function: {name, arguments}}] (with `index` in a
// streamed delta); ids the model did not write are made up.
inline Json tool_call_json(const ToolCall& c, ToolCallFormat format, int64_t index = -1) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  Json fn = Json::object();
  fn.set("name", c.name);
  fn.set("arguments", c.arguments);
  Json o = Json::object();
  if (index >= 0) o.set("index", index);
  o.set("id", c.id.empty() ? new_tool_call_id(format, rng) : c.id);
  o.set("type", "function");
  o.set("function", std::move(fn));
  return o;
}
inline Json tool_calls_json(const std::vector<ToolCall>& calls, ToolCallFormat format) {
  Json a = Json::array();
  for (const ToolCall& c : calls) a.push_back(tool_call_json(c, format));
  return a;
}

// The whole (non-streamed) response.
inline Json response_json(const ApiRequest& req, const ResponseId& rid, const JobResult& r,
                          const std::vector<TokenAlternatives>& probs, const Tokenizer& tok) {
  Json o = envelope(req, rid, false);
  Json choice = Json::object();
  choice.set("index", 0);
  bool tool_calls = false;
  if (req.endpoint == Endpoint::Chat) {
    Json msg = Json::object();
    msg.set("role", "assistant");
    std::string content = r.text;
    if (req.reasoning != ReasoningFormat::None) {
      const ReasoningSplitter::Delta d = ReasoningSplitter::split(r.text, req.reasoning_tags, req.thinking_open);
      if (req.reasoning != ReasoningFormat::DeepseekLegacy) content = d.content;
      if (!d.reasoning.empty()) msg.set("reasoning_content", d.reasoning);
    }
    if (wants_tool_calls(req)) {
      ParsedToolCalls p = parse_tool_calls(req.tool_format, content);
      if (!p.calls.empty()) {
        msg.set("content", p.content.empty() ? Json() : Json(p.content));
        msg.set("tool_calls", tool_calls_json(p.calls, req.tool_format));
        tool_calls = true;
      }
    }
    if (!tool_calls) msg.set("content", content);
    choice.set("message", std::move(msg));
  } else {
    choice.set("text", r.text);
  }
  choice.set("logprobs", Json());
  choice.set("finish_reason", tool_calls && r.reason != StopReason::MaxTokens ? "tool_calls" : finish_reason(r.reason));
  Json choices = Json::array();
  choices.push_back(std::move(choice));
  o.set("choices", std::move(choices));
  o.set("usage", usage_json(r));
  o.set("timings", timings_json(r));
  if (req.n_probs > 0) o.set("completion_probabilities", probs_json(probs, tok));
  return o;
}

// One streamed chunk: a piece of text (final = nullptr), or the last chunk with finish_reason,
// timings, and usage when stream_options.include_usage asked for it. A chat piece may carry
// thoughts (`reasoning`, as delta.reasoning_content) instead of or besides its content; or
// `tool_calls` (the delta's calls; on the last chunk: finish_reason "tool_calls").
inline Json chunk_json(const ApiRequest& req, const ResponseId& rid, const std::string& text,
                       const std::vector<TokenAlternatives>& probs, const Tokenizer& tok, const JobResult* final,
                       bool first = false, const std::string& reasoning = std::string(),
                       const Json* tool_calls = nullptr) {
  Json o = envelope(req, rid, true);
  Json choice = Json::object();
  choice.set("index", 0);
  if (req.endpoint == Endpoint::Chat) {
    Json delta = Json::object();
    if (first) delta.set("role", "assistant");
    if (!final && !reasoning.empty()) delta.set("reasoning_content", reasoning);
    if (tool_calls && !final) delta.set("tool_calls", *tool_calls);
    else if (!final && (!text.empty() || reasoning.empty())) delta.set("content", text);
    choice.set("delta", std::move(delta));
  } else {
    choice.set("text", text);
  }
  choice.set("logprobs", Json());
  Json finish;
  if (final)
    finish = tool_calls && final->reason != StopReason::MaxTokens ? "tool_calls" : finish_reason(final->reason);
  choice.set("finish_reason", std::move(finish));
  Json choices = Json::array();
  choices.push_back(std::move(choice));
  o.set("choices", std::move(choices));
  if (req.n_probs > 0 && !probs.empty()) o.set("completion_probabilities", probs_json(probs, tok));
  if (final) {
    o.set("timings", timings_json(*final));
    if (req.include_usage) o.set("usage", usage_json(*final));
  }
  return o;
}

// One server-sent event carrying JSON: "data: {...}\n\n".
inline std::string sse_event(const Json& j) { return "data: " + j.dump() + "\n\n"; }

// The events of a streamed answer, one per generated piece (the first chat chunk carries the
// role). A chat answer's thoughts go to delta.reasoning_content as they arrive (req.reasoning);
// what the splitter holds back (a possible tag, whitespace) comes out before the last chunk.
// With tools, content that may be a call is held back; the calls go out as one delta each
// before the last chunk (finish_reason "tool_calls").
class StreamEvents {
 public:
  StreamEvents(const ApiRequest& req, const ResponseId& rid, const Tokenizer& tok)
      : req_(req), rid_(rid), tok_(tok), split_(req.endpoint == Endpoint::Chat && req.reasoning != ReasoningFormat::None),
        splitter_(req.reasoning_tags, req.thinking_open), tools_(wants_tool_calls(req)),
        calls_(req.tool_format, req.tool_choice.mode != ToolChoice::Auto) {}

  // The event for a piece of text (and its n_probs alternatives); "" when there is nothing to send.
  std::string piece(const std::string& text, const std::vector<TokenAlternatives>& probs = {}) {
    if (!split_) return event(content(text), "", probs);
    const ReasoningSplitter::Delta d = splitter_.feed(text);
    return event(content(req_.reasoning == ReasoningFormat::DeepseekLegacy ? text : d.content), d.reasoning, probs);
  }
  // The held-back text, the calls, and the last chunk (finish_reason, timings, usage).
  std::string finish(const JobResult& final) {
    std::string out;
    if (split_) {
      const ReasoningSplitter::Delta d = splitter_.finish();
      out = event(content(req_.reasoning == ReasoningFormat::DeepseekLegacy ? std::string() : d.content), d.reasoning, {});
    }
    Json calls;
    if (tools_) {
      const ParsedToolCalls p = calls_.finish();
      out += event(p.content, "", {});
      for (size_t i = 0; i < p.calls.size(); ++i) {
        Json one = Json::array();
        one.push_back(tool_call_json(p.calls[i], req_.tool_format, static_cast<int64_t>(i)));
        out += sse_event(chunk_json(req_, rid_, "", {}, tok_, nullptr, first_, "", &one));
        first_ = false;
        calls = Json::array();
      }
    }
    out += sse_event(chunk_json(req_, rid_, "", {}, tok_, &final, first_, "", calls.is_array() ? &calls : nullptr));
    first_ = false;
    return out;
  }

 private:
  const ApiRequest& req_;
  const ResponseId& rid_;
  const Tokenizer& tok_;
  bool split_, first_ = true;
  ReasoningSplitter splitter_;
  bool tools_;
  ToolCallStream calls_;

  std::string content(const std::string& text) { return tools_ ? calls_.push(text) : text; }
  std::string event(const std::string& content, const std::string& reasoning, const std::vector<TokenAlternatives>& probs) {
    if (content.empty() && reasoning.empty() && probs.empty()) return std::string();
    std::string e = sse_event(chunk_json(req_, rid_, content, probs, tok_, nullptr, first_, reasoning));
    first_ = false;
    return e;
  }
};

}  // namespace openai
}  // namespace edgellm
