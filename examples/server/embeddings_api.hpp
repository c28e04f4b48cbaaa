// Embedding requests as llama-server serves them: POST /v1/embeddings (OpenAI's shape: "input" a
// string, an array of strings, an array of token ids or an array of such arrays; encoding_format
// float | base64; usage) and POST /embedding (llama-server's own: "content" or "input", answered
// with [{"index", "embedding": [[...] per row]}]; a body with "content" gets that shape on either
// path, as llama-server does). Parsing checks every value (ApiError 400 naming the parameter, 413
// past the JSON caps); the vectors come from the library's Embedder (engine/embedding.hpp).
// Part of edgellm-server (examples/server/), not of the library; tests and the fuzz target call
// these directly.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/core/json.hpp"
#include "edgellm/engine/embedding.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "openai.hpp"

namespace edgellm {
namespace openai {

struct EmbedRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids of each input, BOS/EOS added to texts as the vocabulary asks
  bool oai = true;                           // OpenAI's response shape (false: llama-server's /embedding shape)
  bool base64 = false;                       // encoding_format "base64": little-endian float32 bytes
  bool normalize = true;                     // embd_normalize 2 (default) or -1 (none), as llama-server
  std::string model;                         // "model" as sent (empty: none)
};

struct EmbedLimits {
  size_t max_inputs = 2048;  // OpenAI's cap on inputs per request
  int n_ctx = 2048;          // tokens per input
  int n_vocab = 0;           // token ids must be below this
  bool parse_special = true; // control-token text in a string input becomes the token (llama-server)
};

namespace detail {

inline std::vector<int32_t> token_array(const Json& a, const EmbedLimits& el, const char* param) {
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (const Json& t : a.as_array()) out.push_back(static_cast<int32_t>(integer_in(t, param, 0, el.n_vocab - 1)));
  return out;
}

inline bool all_ints(const Json& a) {
  for (const Json& t : a.as_array())
    if (!t.is_number()) return false;
  return true;
}

}  // namespace detail

// embedding_path: the request came to /embedding (llama-server's shape) rather than /v1/embeddings.
inline EmbedRequest parse_embedding_request(std::string_view body, bool embedding_path, const Tokenizer& tok,
                                            const ApiLimits& lim, const EmbedLimits& el) {
  using namespace detail;
  const Json j = parse_body(body, lim);
  check_model(j, lim);
  EmbedRequest r;
  if (const Json* m = j.find("model"); m && m->is_string()) r.model = m->as_string();
  const Json* in = j.find("input");
  const char* param = "input";
  r.oai = !embedding_path;
  if (!in || in->is_null()) {
    in = j.find("content");
    param = "content";
    r.oai = false;
  }
  if (!in || in->is_null()) throw bad("input", "\"input\" or \"content\" must be provided");
  if (const Json* f = j.find("encoding_format"); f && !f->is_null()) {
    const std::string& fmt = string(*f, "encoding_format");
    if (fmt != "float" && fmt != "base64") throw bad("encoding_format", "'encoding_format' must be float or base64, got '" + fmt + "'");
    r.base64 = fmt == "base64";
  }
  if (const Json* n = j.find("embd_normalize"); n && !n->is_null()) {
    const int64_t v = integer_in(*n, "embd_normalize", -1, 2);
    if (v != -1 && v != 2) throw bad("embd_normalize", "'embd_normalize' must be 2 (Euclidean) or -1 (none): other norms are not supported");
    r.normalize = v == 2;
  }
  auto text = [&](const std::string& s) { return tok.encode(s, true, el.parse_special); };
  if (in->is_string()) {
    r.inputs.push_back(text(in->as_string()));
  } else if (in->is_array()) {
    if (in->size() == 0) throw bad(param, std::string("'") + param + "' must not be an empty array");
    if (all_ints(*in)) {
      r.inputs.push_back(token_array(*in, el, param));
    } else {
      if (in->size() > el.max_inputs)
        throw bad(param, std::string("'") + param + "' has " + std::to_string(in->size()) + " inputs, more than " +
                             std::to_string(el.max_inputs));
      for (const Json& e : in->as_array()) {
        if (e.is_string()) r.inputs.push_back(text(e.as_string()));
        else if (e.is_array() && all_ints(e)) r.inputs.push_back(token_array(e, el, param));
        else throw bad(param, std::string("each element of '") + param + "' must be a string or an array of token ids, got " + kind_name(e));
      }
    }
  } else {
    throw bad(param, std::string("'") + param + "' must be a string or an array, got " + kind_name(*in));
  }
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (r.inputs[i].empty()) throw bad(param, "input " + std::to_string(i) + " has no tokens (input content cannot be empty)");
    if (r.inputs[i].size() > static_cast<size_t>(el.n_ctx))
      throw bad(param, "input " + std::to_string(i) + " has " + std::to_string(r.inputs[i].size()) +
                           " tokens, more than the context of " + std::to_string(el.n_ctx));
  }
  return r;
}

// RFC 4648 base64 of bytes (with '=' padding).
inline std::string base64_encode(const uint8_t* p, size_t n) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? uint32_t(p[i + 2]) : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < n ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// The floats as little-endian IEEE binary32 bytes, base64 (what OpenAI's clients decode).
inline std::string base64_floats(const float* v, size_t n) {
  std::vector<uint8_t> bytes(n * 4);
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = static_cast<uint8_t>(u >> (8 * b));
  }
  return base64_encode(bytes.data(), bytes.size());
}

inline Json float_array(const float* v, size_t n) {
  Json a = Json::array();
  for (size_t i = 0; i < n; ++i) a.push_back(Json(static_cast<double>(v[i])));
  return a;
}

// The answer: OpenAI's {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage"} (pooled results only), or llama-server's [{"index", "embedding": [[row]...]}].
inline Json embeddings_json(const EmbedRequest& r, const std::vector<Embedding>& e, int n_embd, const std::string& model_id) {
  const size_t D = static_cast<size_t>(n_embd);
  if (!r.oai) {
    Json out = Json::array();
    for (size_t i = 0; i < e.size(); ++i) {
      Json rows = Json::array();
      for (int k = 0; k < e[i].n_rows; ++k) rows.push_back(float_array(e[i].data.data() + size_t(k) * D, D));
      Json o = Json::object();
      o.set("index", static_cast<int64_t>(i));
      o.set("embedding", std::move(rows));
      out.push_back(std::move(o));
    }
    return out;
  }
  Json data = Json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    Json o = Json::object();
    o.set("object", "embedding");
    o.set("index", static_cast<int64_t>(i));
    o.set("embedding", r.base64 ? Json(base64_floats(e[i].data.data(), D)) : float_array(e[i].data.data(), D));
    data.push_back(std::move(o));
    n_tokens += e[i].n_tokens;
  }
  Json usage = Json::object();
  usage.set("prompt_tokens", n_tokens);
  usage.set("total_tokens", n_tokens);
  Json out = Json::object();
  out.set("object", "list");
  out.set("data", std::move(data));
  out.set("model", r.model.empty() ? model_id : r.model);
  out.set("usage", std::move(usage));
  return out;
}

}  // namespace openai
}  // namespace edgellm
