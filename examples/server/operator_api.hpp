// What edgellm-server offers operators beside the OpenAI API, as llama-server offers it: the API
// key from a file or the environment (not the command line, which other users of the machine can
// read in /proc/PID/cmdline); POST /tokenize and /detokenize, shaped as llama-server's; the
// Prometheus text of GET /metrics; the one log line per request (never message text). Functions of
// their inputs, tested without a server (tests/server/test_server_api.cpp); server.cpp routes to them.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"
#include "edgellm/text/tokenizer.hpp"
#include "openai.hpp"

namespace edgellm {
namespace ops {

// The key in a key file: its one non-empty line, white space around it removed. An unreadable or
// empty file, or one with several keys, is an error naming the file.
inline std::string read_api_key_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error("option --api-key-file: cannot read '", path, "'");
  std::string key, line;
  while (std::getline(f, line)) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    if (!key.empty()) throw_error("option --api-key-file: '", path, "' holds more than one line of text: one key per file");
    key = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
  }
  if (key.empty()) throw_error("option --api-key-file: '", path, "' holds no key");
  return key;
}

// --api-key, else --api-key-file, else the environment variable EDGELLM_API_KEY (env: its value,
// may be null). Giving both flags is an error; a key shorter than 8 characters is refused.
inline std::string choose_api_key(const std::string& flag_key, const std::string& key_file, const char* env) {
  if (!flag_key.empty() && !key_file.empty()) throw_error("give one of --api-key and --api-key-file");
  std::string key = flag_key;
  const char* from = "option --api-key";
  if (!key_file.empty()) key = read_api_key_file(key_file), from = "option --api-key-file";
  else if (key.empty() && env && *env) key = env, from = "EDGELLM_API_KEY";
  if (!key.empty() && key.size() < 8) throw_error(from, ": use at least 8 characters");
  return key;
}

// POST /tokenize {"content": "...", "add_special": false, "parse_special": true, "with_pieces": false}
// -> {"tokens": [ids]}, or with_pieces: [{"id", "piece"}] (a piece that is not valid UTF-8 as its
// bytes), as llama-server. 400 for a missing or non-string content or wrong types.
inline Json tokenize(std::string_view body, const Tokenizer& tok, const openai::ApiLimits& lim) {
  const Json j = openai::parse_body(body, lim);
  auto flag = [&](const char* name, bool dflt) {
    const Json* v = j.find(name);
    return v && !v->is_null() ? openai::detail::boolean(*v, name) : dflt;
  };
  const Json* c = j.find("content");
  if (!c) throw openai::detail::bad("content", "'content' is required");
  const std::string& text = openai::detail::string(*c, "content");
  const bool add_special = flag("add_special", false), parse_special = flag("parse_special", true);
  const bool with_pieces = flag("with_pieces", false);
  const std::vector<int32_t> ids = tok.encode(text, add_special && tok.add_bos(), parse_special);
  Json out = Json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      out.push_back(Json(id));
      continue;
    }
    const std::string piece = tok.token_to_piece(id, true);
    bool utf8 = true;
    for (size_t i = 0; i < piece.size() && utf8;) {
      const size_t n = json_detail::utf8_seq_len(reinterpret_cast<const unsigned char*>(piece.data()) + i, piece.size() - i);
      utf8 = n > 0;
      i += n;
    }
    Json p = Json::object();
    p.set("id", id);
    if (utf8) {
      p.set("piece", piece);
    } else {
      Json bytes = Json::array();
      for (unsigned char b : piece) bytes.push_back(Json(int(b)));
      p.set("piece", std::move(bytes));
    }
    out.push_back(std::move(p));
  }
  Json r = Json::object();
  r.set("tokens", std::move(out));
  return r;
}

// POST /slots/{id}?action=save|restore|erase with {"filename": "..."} (save / restore), as
// llama-server's: which kept sequence, what to do, the file inside --slot-save-path. A file name
// is one path component of [A-Za-z0-9._-] (at most 200, not starting with '.'): it cannot leave
// the folder. 400 naming what is wrong; 404 for a path that is not /slots/<number>.
struct SlotRequest {
  int id = 0;
  std::string action;    // save, restore or erase
  std::string filename;  // save / restore
};

inline bool slot_filename_ok(const std::string& f) {
  if (f.empty() || f.size() > 200 || f[0] == '.') return false;
  for (char c : f)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

inline SlotRequest parse_slot_request(std::string_view path, std::string_view query, std::string_view body,
                                      const openai::ApiLimits& lim) {
  constexpr std::string_view prefix = "/slots/";
  std::string_view id = path.substr(0, prefix.size()) == prefix ? path.substr(prefix.size()) : std::string_view();
  if (id.empty() || id.size() > 6 || id.find_first_not_of("0123456789") != std::string_view::npos)
    throw openai::ApiError(404, "no endpoint " + std::string(path) + ": POST /slots/<id>?action=save|restore|erase", "not_found_error");
  SlotRequest r;
  r.id = std::stoi(std::string(id));
  for (size_t at = 0; at <= query.size();) {
    const size_t amp = std::min(query.find('&', at), query.size());
    const std::string_view kv = query.substr(at, amp - at);
    if (kv.substr(0, 7) == "action=") r.action = std::string(kv.substr(7));
    at = amp + 1;
  }
  if (r.action != "save" && r.action != "restore" && r.action != "erase")
    throw openai::detail::bad("action", "'?action=' must be save, restore or erase");
  if (r.action == "erase") return r;
  const Json j = openai::parse_body(body, lim);
  const Json* f = j.find("filename");
  if (!f) throw openai::detail::bad("filename", "'filename' is required");
  r.filename = openai::detail::string(*f, "filename");
  if (!slot_filename_ok(r.filename))
    throw openai::detail::bad("filename", "'filename' must be a plain file name of letters, digits, '.', '_' and '-' "
                                          "(at most 200, not starting with '.'), inside --slot-save-path");
  return r;
}

// POST /detokenize {"tokens": [ids]} -> {"content": "..."}: each token's text, control tokens'
// included, as llama-server. 400 for ids outside the vocabulary or not integers.
inline Json detokenize(std::string_view body, const Tokenizer& tok, const openai::ApiLimits& lim) {
  const Json j = openai::parse_body(body, lim);
  std::string text;
  if (const Json* t = j.find("tokens"); t && !t->is_null()) {
    if (!t->is_array()) throw openai::detail::bad("tokens", "'tokens' must be an array of token ids");
    for (const Json& v : t->as_array()) {
      const int64_t id = openai::detail::integer_in(v, "tokens", 0, tok.n_vocab() - 1);
      text += tok.token_to_piece(static_cast<int32_t>(id), true);
    }
  }
  Json r = Json::object();
  r.set("content", text);
  return r;
}

// Prometheus text exposition (format 0.0.4): HELP, TYPE and the value of each metric.
struct Metric {
  const char* name;  // without the edgellm_ prefix
  const char* type;  // counter | gauge
  const char* help;
  double value;
};
inline std::string prometheus_text(const std::vector<Metric>& metrics) {
  std::string out;
  char num[64];
  for (const Metric& m : metrics) {
    std::snprintf(num, sizeof num, "%.10g", m.value);
    out += std::string("# HELP edgellm_") + m.name + " " + m.help + "\n# TYPE edgellm_" + m.name + " " + m.type + "\nedgellm_" +
           m.name + " " + num + "\n";
  }
  return out;
}

// One request's log line: what was asked and how it ended, never what was said.
struct RequestLog {
  std::string method, path, remote;
  int status = 0;
  double ms = 0;
  int prompt_tokens = -1, completion_tokens = -1;  // -1: not a completion (or refused before one)
};
inline std::string log_line(const RequestLog& r, bool json) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", r.ms);
  if (json) {
    Json j = Json::object();
    j.set("event", "request");
    j.set("method", r.method.empty() ? "-" : r.method);  // "-": refused before the request line was read
    j.set("path", r.path.empty() ? "-" : r.path);
    j.set("status", r.status);
    j.set("duration_ms", std::stod(ms));
    if (r.prompt_tokens >= 0) j.set("prompt_tokens", r.prompt_tokens);
    if (r.completion_tokens >= 0) j.set("completion_tokens", r.completion_tokens);
    j.set("remote", r.remote);
    return j.dump() + "\n";
  }
  // The transport refuses targets with white space or controls, so the path prints as it is.
  std::string s = "request " + (r.method.empty() ? std::string("-") : r.method) + " " + (r.path.empty() ? std::string("-") : r.path) +
                  " " + std::to_string(r.status) + " " + ms + " ms";
  if (r.prompt_tokens >= 0) s += " prompt_tokens=" + std::to_string(r.prompt_tokens);
  if (r.completion_tokens >= 0) s += " completion_tokens=" + std::to_string(r.completion_tokens);
  return s + " remote=" + (r.remote.empty() ? std::string("-") : r.remote) + "\n";
}

}  // namespace ops
}  // namespace edgellm
