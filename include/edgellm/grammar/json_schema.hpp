// JSON Schema -> GBNF: the subset apps use (as llama.cpp's json-schema-to-grammar covers), and the
// built-in grammar for response_format json_object. Unsupported keywords are an Error naming
// them, never a silently looser grammar. Includes core/ (Json, Error) and grammar/gbnf.hpp only.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"
#include "edgellm/grammar/gbnf.hpp"

namespace edgellm {

namespace grammar_detail {

// Whitespace between JSON tokens: bounded, as llama.cpp's SPACE_RULE, so a model cannot pad
// forever.
inline const char* kSpaceRule = R"(| " " | "\n"{1,2} [ \t]{0,20})";

struct BuiltinRule {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};

inline const std::vector<BuiltinRule>& builtin_rules() {
  static const std::vector<BuiltinRule> rules = {
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?)", {"integral-part", "decimal-part"}},
      {"integer", R"(("-"? integral-part))", {"integral-part"}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" char* "\"")", {"char"}},
      {"value", R"(object | array | string | number | boolean | null)", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space ( string ":" space value ("," space string ":" space value)* )? space "}")", {"string", "value", "space"}},
      {"array", R"("[" space ( value ("," space value)* )? space "]")", {"value", "space"}},
      {"space", kSpaceRule, {}},
      {"uuid", R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")", {}},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}},
      {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))", {}},
      {"date-time", R"(date "T" time)", {"date", "time"}},
      {"date-string", R"("\"" date "\"")", {"date"}},
      {"time-string", R"("\"" time "\"")", {"time"}},
      {"date-time-string", R"("\"" date-time "\"")", {"date-time"}},
  };
  return rules;
}

// A control character (or DEL) as GBNF's hex escape.
inline std::string gbnf_hex_escape(uint32_t c) {
  static const char* kHex = "0123456789ABCDEF";
  return std::string("\\x") + kHex[(c >> 4) & 15] + kHex[c & 15];
}
// A GBNF literal for raw text (escapes what the GBNF parser would read as syntax).
inline std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (const char* e = short_escape(c, /*with_bf=*/false)) {
      out += e;
    } else if (c < 0x20 || c == 0x7F) {
      out += gbnf_hex_escape(c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// One code point inside a GBNF character class.
inline std::string class_char(uint32_t cp) {
  if (cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '"') return std::string("\\") + char(cp);
  if (cp < 0x20 || cp == 0x7F || cp == '^') return gbnf_hex_escape(cp);  // GBNF has no \^
  std::string out;
  append_utf8(out, cp);
  return out;
}

// GBNF for the decimal integers in [lo, hi] with lo, hi >= 0 and the same number of digits.
inline std::string same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return "";
  auto digits = [](char a, char b) {
    return a == b ? std::string("[") + a + "]" : std::string("[") + a + "-" + b + "]";
  };
  auto any_digits = [](size_t k) { return k == 0 ? std::string() : k == 1 ? std::string(" [0-9]") : " [0-9]{" + std::to_string(k) + "}"; };
  if (n == 1) return digits(lo[0], hi[0]);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return digits(lo[0], lo[0]) + " (" + same_length_range(lo_rest, hi_rest) + ")";
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  if (lo_rest == zeros && hi_rest == nines) return digits(lo[0], hi[0]) + any_digits(n - 1);
  std::vector<std::string> alts;
  char first = lo[0], last = hi[0];
  if (lo_rest != zeros) {
    alts.push_back(digits(lo[0], lo[0]) + " (" + same_length_range(lo_rest, nines) + ")");
    ++first;
  }
  if (hi_rest != nines) --last;
  if (first <= last) alts.push_back(digits(first, last) + any_digits(n - 1));
  if (hi_rest != nines) alts.push_back(digits(hi[0], hi[0]) + " (" + same_length_range(zeros, hi_rest) + ")");
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// GBNF for the integers (no leading zeros, "-" for negatives) in [lo, hi]; a missing bound is
// unbounded. Every alternative is a parenthesised sequence.
inline std::string int_range(bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
  std::vector<std::string> alts;
  // Non-negative numbers in [a, b] (b = -1: unbounded).
  auto non_negative = [&alts](int64_t a, int64_t b, const std::string& sign) {
    std::string as = std::to_string(a);
    const size_t max_len = b < 0 ? as.size() : std::to_string(b).size();
    for (size_t len = as.size(); len <= max_len; ++len) {
      std::string from = len == as.size() ? as : (len == 1 ? "0" : "1" + std::string(len - 1, '0'));
      std::string to = (b >= 0 && len == max_len) ? std::to_string(b) : std::string(len, '9');
      alts.push_back(sign + "(" + same_length_range(from, to) + ")");
    }
    if (b < 0) alts.push_back(sign + "([1-9] [0-9]{" + std::to_string(as.size()) + ",})");
  };
  if (!has_lo || lo < 0) {  // negative part: -x for x in [max(1, -hi), -lo]
    const int64_t x_min = has_hi && hi < 0 ? -hi : 1;
    if (!has_lo) {
      non_negative(x_min, -1, "\"-\" ");
    } else {
      non_negative(x_min, -lo, "\"-\" ");
    }
  }
  if (!has_hi || hi >= 0) non_negative(has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1, "");
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

}  // namespace grammar_detail

// Converts a JSON Schema to GBNF text (root rule "root"). Throws Error naming any keyword, type,
// format, $ref or regex construct it does not support.
class JsonSchemaConverter {
 public:
  static std::string convert(const Json& schema) {
    JsonSchemaConverter c(schema);
    const std::string root = c.visit(schema, "root", 0);
    if (root != "root") c.rules_["root"] = root;
    return c.format();
  }

  // Several schemas in one grammar: rule docs[i].first matches schema docs[i].second (each its
  // own document for $ref), and `root ::= root_body`, which refers to those rules (tool calls:
  // each function's parameters inside the format's markup). Rule names must be GBNF words.
  static std::string convert_documents(const std::vector<std::pair<std::string, const Json*>>& docs,
                                       const std::string& root_body) {
    EDGELLM_CHECK(!docs.empty(), "json schema: no documents to convert");
    JsonSchemaConverter c(*docs.front().second);
    for (const auto& d : docs) {
      c.root_ = d.second;
      c.refs_.clear();
      c.ref_prefix_ = d.first + "-";
      const std::string rule = c.visit(*d.second, d.first, 0);
      if (rule != d.first) c.rules_[d.first] = rule;
    }
    c.rules_["root"] = root_body;
    return c.format();
  }

 private:
  explicit JsonSchemaConverter(const Json& root) : root_(&root) {}

  static constexpr int kMaxDepth = 64;  // nested schemas (not $ref cycles, which become rules)

  std::string format() const {
    std::string out = "root ::= " + rules_.at("root") + "\n";
    for (const auto& r : rules_)
      if (r.first != "root") out += r.first + " ::= " + r.second + "\n";
    return out;
  }

  static std::string sanitize(const std::string& name) {
    std::string out;
    for (char c : name) out += grammar_detail::is_word_char(c) ? c : '-';
    return out.empty() ? "r" : out;
  }
  bool reserved(const std::string& name) const {
    for (const auto& b : grammar_detail::builtin_rules())
      if (name == b.name) return true;
    return false;
  }

  // Adds rule `name ::= body` (a fresh name if taken by another body); returns the name.
  std::string add_rule(const std::string& want, const std::string& body) {
    std::string name = sanitize(want);
    if (reserved(name)) name += "-";
    std::string key = name;
    for (int i = 1;; ++i) {
      auto it = rules_.find(key);
      if (it == rules_.end() || it->second == body) break;
      key = name + std::to_string(i);
    }
    rules_[key] = body;
    return key;
  }
  std::string primitive(const std::string& name) {
    for (const auto& b : grammar_detail::builtin_rules()) {
      if (name != b.name) continue;
      if (rules_.count(name) == 0) {
        rules_[name] = b.body;
        for (const char* d : b.deps) primitive(d);
        if (std::string(b.body).find("space") != std::string::npos) primitive("space");
      }
      return name;
    }
    throw_error("json schema: internal: no builtin rule ", name);
  }

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw_error("json schema: ", what, " (at ", path.empty() ? "/" : path, ")");
  }

  static void check_keywords(const Json& s, const std::string& path) {
    static const std::set<std::string> kSupported = {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
        "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "pattern",
        "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format",
        // annotations: no effect on what validates
        "title", "description", "default", "examples", "$schema", "$id", "$comment", "readOnly",
        "writeOnly", "deprecated", "strict"};
    for (const auto& kv : s.as_object())
      if (kSupported.count(kv.first) == 0) fail(path, "unsupported keyword '" + kv.first + "'");
  }

  std::string visit(const Json& s, const std::string& name, int depth) {
    const std::string path = name;
    if (depth > kMaxDepth) fail(path, "schema nested deeper than " + std::to_string(kMaxDepth));
    if (s.is_bool()) {
      if (!s.as_bool()) fail(path, "schema 'false' accepts nothing");
      return add_rule(name, primitive("value"));
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    if (const Json* ref = s.find("$ref")) return add_rule(name, visit_ref(*ref, path, depth));
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* alts = s.find(key)) {
        // oneOf as anyOf: exclusivity cannot be enforced by a grammar (as llama.cpp).
        if (!alts->is_array() || alts->size() == 0) fail(path, std::string(key) + " must be a non-empty array");
        std::string body;
        for (size_t i = 0; i < alts->size(); ++i)
          body += (i ? " | " : "") + visit(alts->at(i), name + "-" + std::to_string(i), depth + 1);
        return add_rule(name, body);
      }
    }
    if (const Json* all = s.find("allOf")) return add_rule(name, visit_all_of(*all, path, name, depth));
    if (const Json* c = s.find("const")) return add_rule(name, constant(*c));
    if (const Json* e = s.find("enum")) {
      if (!e->is_array() || e->size() == 0) fail(path, "enum must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < e->size(); ++i) body += (i ? " | " : "") + constant(e->at(i));
      return add_rule(name, body);
    }
    const Json* type = s.find("type");
    if (type && type->is_array()) {
      if (type->size() == 0) fail(path, "type must not be an empty list");
      std::string body;
      for (size_t i = 0; i < type->size(); ++i) {
        if (!type->at(i).is_string()) fail(path, "type list entries must be strings");
        body += (i ? " | " : "") + visit_typed(s, type->at(i).as_string(), name + "-" + type->at(i).as_string(), depth, type);
      }
      return add_rule(name, body);
    }
    std::string t;
    if (type) {
      if (!type->is_string()) fail(path, "type must be a string or a list of strings");
      t = type->as_string();
    } else if (s.contains("properties") || s.contains("additionalProperties")) {
      t = "object";
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      t = "array";
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      t = "string";
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
      fail(path, "minimum/maximum without type integer");
    } else {
      return add_rule(name, primitive("value"));  // {} = any JSON value
    }
    return visit_typed(s, t, name, depth);
  }

  // Keywords that belong to one type, used with another, would be silently ignored: refuse.
  // (With a type list, keywords of any listed type are fine.)
  static void only_for(const Json& s, const std::string& type, const Json* types, const std::string& path) {
    static const std::map<std::string, std::string> kOwner = {
        {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
        {"items", "array"}, {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"},
        {"pattern", "string"}, {"minLength", "string"}, {"maxLength", "string"}, {"format", "string"},
        {"minimum", "integer"}, {"maximum", "integer"}, {"exclusiveMinimum", "integer"}, {"exclusiveMaximum", "integer"}};
    for (const auto& kv : s.as_object()) {
      auto it = kOwner.find(kv.first);
      if (it == kOwner.end() || it->second == type) continue;
      bool listed = false;
      if (types && types->is_array())
        for (const auto& t : types->as_array()) listed = listed || (t.is_string() && t.as_string() == it->second);
      if (!listed) fail(path, "keyword '" + kv.first + "' is not supported with type '" + type + "'");
    }
  }

  std::string visit_typed(const Json& s, const std::string& t, const std::string& name, int depth,
                          const Json* types = nullptr) {
    const std::string& path = name;
    only_for(s, t, types, path);
    if (t == "object") return add_rule(name, visit_object(s, name, depth));
    if (t == "array") return add_rule(name, visit_array(s, name, depth));
    if (t == "string") return add_rule(name, visit_string(s, name));
    if (t == "integer") return add_rule(name, visit_integer(s, path));
    if (t == "number" || t == "boolean" || t == "null") return add_rule(name, primitive(t));
    fail(path, "unsupported type '" + t + "'");
  }

  std::string visit_ref(const Json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) fail(path, "$ref must be a string");
    const std::string& r = ref.as_string();
    std::string key;
    const Json* defs = nullptr;
    if (r.rfind("#/$defs/", 0) == 0) {
      key = r.substr(8);
      defs = root_->find("$defs");
    } else if (r.rfind("#/definitions/", 0) == 0) {
      key = r.substr(14);
      defs = root_->find("definitions");
    } else {
      fail(path, "unsupported $ref '" + r + "' (only #/$defs/... and #/definitions/...)");
    }
    const Json* target = defs && defs->is_object() ? defs->find(key) : nullptr;
    if (!target) fail(path, "$ref '" + r + "' not found");
    const std::string rule = ref_prefix_ + "ref-" + sanitize(key);
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    refs_[r] = rule;           // before visiting: a recursive schema refers to the rule by name
    rules_[rule] = "\"\"";     // placeholder, replaced below
    const std::string body = visit(*target, rule + "-def", depth + 1);
    rules_[rule] = body;
    return rule;
  }

  const Json& resolve(const Json& s, const std::string& path) {
    if (s.is_object())
      if (const Json* ref = s.find("$ref")) {
        if (!ref->is_string()) fail(path, "$ref must be a string");
        const std::string& r = ref->as_string();
        const bool defs = r.rfind("#/$defs/", 0) == 0;
        const Json* d = root_->find(defs ? "$defs" : "definitions");
        const Json* t = d && d->is_object() ? d->find(r.substr(defs ? 8 : 14)) : nullptr;
        if (!t) fail(path, "$ref '" + r + "' not found");
        return *t;
      }
    return s;
  }

  // allOf: one component as is; object components merged (properties, required), as llama.cpp.
  std::string visit_all_of(const Json& all, const std::string& path, const std::string& name, int depth) {
    if (!all.is_array() || all.size() == 0) fail(path, "allOf must be a non-empty array");
    if (all.size() == 1) return visit(all.at(0), name + "-0", depth + 1);
    Json::ObjectT props;
    std::vector<Json> required;
    for (size_t i = 0; i < all.size(); ++i) {
      const Json& c = resolve(all.at(i), path);
      if (!c.is_object()) fail(path, "allOf components must be object schemas");
      for (const auto& kv : c.as_object()) {
        if (kv.first == "properties") {
          for (const auto& p : kv.second.as_object()) props.emplace_back(p.first, p.second);
        } else if (kv.first == "required") {
          for (const auto& r : kv.second.as_array()) required.push_back(r);
        } else if (kv.first != "type" && kv.first != "title" && kv.first != "description" &&
                   kv.first != "additionalProperties") {
          fail(path, "allOf supports object components only (properties, required), got '" + kv.first + "'");
        }
      }
    }
    Json merged = Json::object();
    merged.set("type", Json("object"));
    Json p = Json::object();
    for (auto& kv : props) p.set(kv.first, kv.second);
    merged.set("properties", std::move(p));
    Json req = Json::array();
    for (auto& r : required) req.push_back(r);
    merged.set("required", std::move(req));
    return visit_object(merged, name, depth);
  }

  static std::string constant(const Json& v) { return grammar_detail::gbnf_literal(v.dump()); }

  static int64_t get_count(const Json& s, const char* key, int64_t def, const std::string& path) {
    const Json* v = s.find(key);
    if (!v) return def;
    if (!v->is_number() || v->as_number() < 0 || v->as_number() != std::floor(v->as_number()) || v->as_number() > 1e6)
      fail(path, std::string(key) + " must be a non-negative integer (<= 1000000)");
    return int64_t(v->as_number());
  }

  // "[" item ("," item){min-1,max-1} "]", with the bounds; separator carries its own space.
  static std::string repetition(const std::string& item, int64_t lo, int64_t hi, const std::string& sep) {
    if (hi == 0) return "";
    const std::string rest = "(" + sep + " " + item + ")";
    std::string r = item;
    const int64_t rlo = lo == 0 ? 0 : lo - 1;
    if (hi < 0) {
      r += rlo == 0 ? " " + rest + "*" : " " + rest + "{" + std::to_string(rlo) + ",}";
    } else if (hi - 1 > 0) {
      r += " " + rest + "{" + std::to_string(rlo) + "," + std::to_string(hi - 1) + "}";
    }
    return lo == 0 ? "(" + r + ")?" : r;
  }

  std::string visit_array(const Json& s, const std::string& name, int depth) {
    const std::string& path = name;
    const int64_t lo = get_count(s, "minItems", 0, path), hi = get_count(s, "maxItems", -1, path);
    if (hi >= 0 && hi < lo) fail(path, "maxItems < minItems");
    if (hi > int64_t(Grammar::kMaxRepetition)) fail(path, "maxItems above " + std::to_string(Grammar::kMaxRepetition));
    primitive("space");
    const Json* items = s.find("items");
    const Json* prefix = s.find("prefixItems");
    if (!prefix && items && items->is_array()) {  // draft-4 tuple form: items as a list
      prefix = items;
      items = nullptr;
    }
    if (prefix) {
      if (!prefix->is_array()) fail(path, "prefixItems must be an array");
      std::string body = "\"[\" space ";
      const int64_t n = int64_t(prefix->size());
      if (lo > n || (hi >= 0 && hi < n)) fail(path, "minItems/maxItems with prefixItems are not supported");
      for (int64_t i = 0; i < n; ++i)
        body += (i ? " \",\" space " : "") + visit(prefix->at(size_t(i)), name + "-tuple-" + std::to_string(i), depth + 1);
      if (items && !(items->is_bool() && !items->as_bool())) {
        const std::string item = visit(*items, name + "-item", depth + 1);
        const std::string more = "(\",\" space " + item + ")";
        body += hi < 0 ? " " + more + "*" : hi > n ? " " + more + "{0," + std::to_string(hi - n) + "}" : "";
      }
      return body + " space \"]\"";
    }
    if (items && items->is_bool() && !items->as_bool()) {
      if (lo > 0) fail(path, "items false with minItems > 0 accepts nothing");
      return "\"[\" space \"]\"";
    }
    if (!items && lo == 0 && hi < 0) return primitive("array");
    const std::string item = items ? visit(*items, name + "-item", depth + 1) : primitive("value");
    return "\"[\" space " + repetition(item, lo, hi, "\",\" space") + " space \"]\"";
  }

  std::string visit_object(const Json& s, const std::string& name, int depth) {
    const std::string& path = name;
    const Json* props = s.find("properties");
    const Json* addl = s.find("additionalProperties");
    if (props && !props->is_object()) fail(path, "properties must be an object");
    const Json* req_list = s.find("required");
    if ((!props || props->size() == 0) && req_list && req_list->is_array() && req_list->size() > 0)
      fail(path, "required without properties is not supported");
    if ((!props || props->size() == 0) && (!addl || (addl->is_bool() && addl->as_bool())))
      return primitive("object");  // {"type": "object"}: any object
    std::set<std::string> required;
    if (const Json* req = s.find("required")) {
      if (!req->is_array()) fail(path, "required must be an array");
      for (const auto& r : req->as_array()) {
        if (!r.is_string()) fail(path, "required entries must be strings");
        required.insert(r.as_string());
      }
    }
    primitive("space");
    // One key-value rule per property; .second marks the ones that may be left out.
    std::vector<std::pair<std::string, bool>> kvs;
    std::vector<std::string> names;
    if (props) {
      for (const auto& p : props->as_object()) {
        const std::string value = visit(p.second, name + "-" + p.first, depth + 1);
        const std::string kv = add_rule(name + "-" + p.first + "-kv",
                                        grammar_detail::gbnf_literal(Json(p.first).dump()) + " space \":\" space " + value);
        kvs.push_back({kv, required.count(p.first) == 0});
        names.push_back(p.first);
      }
    }
    // Required properties first, then the optional ones, each in declaration order (llama.cpp's
    // order, so both accept the same objects).
    std::stable_partition(kvs.begin(), kvs.end(), [](const std::pair<std::string, bool>& kv) { return !kv.second; });
    for (const auto& r : required)
      if (std::find(names.begin(), names.end(), r) == names.end())
        fail(path, "required property '" + r + "' is not in properties");
    std::string extra;  // rule for one additional property, if allowed
    if (addl && !(addl->is_bool() && !addl->as_bool())) {
      const std::string value = addl->is_bool() ? primitive("value") : visit(*addl, name + "-additional-value", depth + 1);
      const std::string key = names.empty() ? primitive("string") : add_rule(name + "-additional-k", not_strings(names));
      extra = add_rule(name + "-additional-kv", key + " space \":\" space " + value);
    }
    // tail(i): the properties from i on, after at least one was written (each with its comma);
    // head(i): the same when none was written yet (the first one written has no comma). Rules
    // are made only for the parts referenced.
    const size_t n = kvs.size();
    const std::string extra_tail = extra.empty() ? "" : "(\",\" space " + extra + ")*";
    std::function<std::string(size_t)> tail = [&](size_t i) -> std::string {
      if (i == n) return extra_tail;
      const std::string item = "\",\" space " + kvs[i].first;
      const std::string rest = tail(i + 1);
      return add_rule(name + "-tail-" + std::to_string(i),
                      (kvs[i].second ? "(" + item + ")?" : item) + (rest.empty() ? "" : " " + rest));
    };
    std::function<std::string(size_t)> head = [&](size_t i) -> std::string {
      if (i == n) return extra.empty() ? "" : "(" + extra + (extra_tail.empty() ? "" : " " + extra_tail) + ")?";
      const std::string rest = tail(i + 1);
      const std::string first = kvs[i].first + (rest.empty() ? "" : " " + rest);
      if (!kvs[i].second) return first;
      const std::string none_yet = head(i + 1);
      return add_rule(name + "-head-" + std::to_string(i), none_yet.empty() ? "(" + first + ")?" : first + " | " + none_yet);
    };
    const std::string body = head(0);
    return "\"{\" space " + (body.empty() ? "" : body + " ") + "space \"}\"";
  }

  // Any JSON string except the given ones (keys of additional properties), over their JSON text.
  std::string not_strings(const std::vector<std::string>& strings) {
    primitive("char");
    struct Node {
      std::map<uint32_t, size_t> next;
      bool word = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& s : strings) {
      const std::string enc = Json(s).dump();
      size_t node = 0;
      for (size_t i = 1; i + 1 < enc.size();) {
        uint32_t cp = 0;
        const size_t len = grammar_detail::decode_utf8(enc, i, &cp);
        if (len == 0) throw_error("json schema: property name is not valid UTF-8");
        i += len;
        auto it = trie[node].next.find(cp);
        if (it == trie[node].next.end()) {
          trie.push_back(Node{});
          it = trie[node].next.emplace(cp, trie.size() - 1).first;
        }
        node = it->second;
      }
      trie[node].word = true;
    }
    std::function<std::string(size_t)> rest = [&](size_t node) -> std::string {
      const Node& nd = trie[node];
      std::vector<std::string> alts;
      if (!nd.word) alts.push_back("\"\\\"\"");
      std::string rejects = "\"\\\\\\x7F\\x00-\\x1F";
      for (const auto& kv : nd.next) {
        alts.push_back("[" + grammar_detail::class_char(kv.first) + "] (" + rest(kv.second) + ")");
        rejects += grammar_detail::class_char(kv.first);
      }
      alts.push_back("[^" + rejects + "] char* \"\\\"\"");
      if (nd.next.count('\\') == 0) alts.push_back("[\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) char* \"\\\"\"");
      std::string out;
      for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
      return out;
    };
    return "\"\\\"\" (" + rest(0) + ")";
  }

  std::string visit_string(const Json& s, const std::string& name) {
    const std::string& path = name;
    const int64_t lo = get_count(s, "minLength", 0, path), hi = get_count(s, "maxLength", -1, path);
    if (hi >= 0 && hi < lo) fail(path, "maxLength < minLength");
    if (hi > int64_t(Grammar::kMaxRepetition) || lo > int64_t(Grammar::kMaxRepetition))
      fail(path, "minLength/maxLength above " + std::to_string(Grammar::kMaxRepetition));
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (const Json* pattern = s.find("pattern")) {
      if (!pattern->is_string()) fail(path, "pattern must be a string");
      if (has_len || s.contains("format")) fail(path, "pattern together with minLength/maxLength/format is not supported");
      return visit_pattern(pattern->as_string(), name);
    }
    if (const Json* format = s.find("format")) {
      if (!format->is_string()) fail(path, "format must be a string");
      const std::string& f = format->as_string();
      if (has_len) fail(path, "format together with minLength/maxLength is not supported");
      if (f == "uuid") return primitive("uuid");
      if (f == "date" || f == "time" || f == "date-time") return primitive(f + "-string");
      fail(path, "unsupported format '" + f + "' (date, time, date-time, uuid)");
    }
    if (!has_len) return primitive("string");
    const std::string c = primitive("char");
    std::string rep = hi < 0 ? (lo == 0 ? c + "*" : c + "{" + std::to_string(lo) + ",}")
                             : c + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    if (hi == 0) rep = "";
    return "\"\\\"\" " + rep + " \"\\\"\"";
  }

  std::string visit_integer(const Json& s, const std::string& path) {
    bool has_lo = false, has_hi = false;
    double lo = 0, hi = 0;
    auto num = [&](const char* key, double* out) {
      const Json* v = s.find(key);
      if (!v) return false;
      if (!v->is_number() || !std::isfinite(v->as_number())) fail(path, std::string(key) + " must be a number");
      *out = v->as_number();
      return true;
    };
    double x = 0;
    if (num("minimum", &x)) { has_lo = true; lo = std::ceil(x); }
    if (num("exclusiveMinimum", &x)) {
      const double v = std::floor(x) + 1;
      lo = has_lo ? std::max(lo, v) : v;
      has_lo = true;
    }
    if (num("maximum", &x)) { has_hi = true; hi = std::floor(x); }
    if (num("exclusiveMaximum", &x)) {
      const double v = std::ceil(x) - 1;
      hi = has_hi ? std::min(hi, v) : v;
      has_hi = true;
    }
    if (!has_lo && !has_hi) return primitive("integer");
    const double kLimit = 1e15;  // exact in double and int64
    if ((has_lo && std::fabs(lo) > kLimit) || (has_hi && std::fabs(hi) > kLimit))
      fail(path, "integer bounds beyond +-1e15 are not supported");
    if (has_lo && has_hi && hi < lo) fail(path, "integer range is empty (maximum < minimum)");
    return grammar_detail::int_range(has_lo, int64_t(lo), has_hi, int64_t(hi));
  }

  // The regex subset JSON Schema patterns use -> GBNF over the string's JSON text. Unanchored ends
  // allow any characters there (a pattern matches anywhere in the string).
  std::string visit_pattern(const std::string& pattern, const std::string& name) {
    const std::string c = primitive("char");
    std::string p = pattern;
    const bool anchored_start = !p.empty() && p[0] == '^';
    if (anchored_start) p.erase(0, 1);
    const bool anchored_end = !p.empty() && p.back() == '$' && (p.size() < 2 || p[p.size() - 2] != '\\');
    if (anchored_end) p.pop_back();
    RegexToGbnf rx{p, 0, c, name};
    std::string body = rx.alternation();
    if (rx.i != p.size()) fail(name, "pattern: unexpected ')' at offset " + std::to_string(rx.i));
    return "\"\\\"\" " + std::string(anchored_start ? "" : c + "* ") + "(" + body + ")" +
           std::string(anchored_end ? "" : " " + c + "*") + " \"\\\"\"";
  }

  struct RegexToGbnf {
    const std::string& p;
    size_t i;
    std::string any_char;  // rule name of one JSON string character
    std::string path;

    [[noreturn]] void bad(const std::string& what) const {
      fail(path, "pattern: " + what + " at offset " + std::to_string(i));
    }
    std::string alternation() {
      std::string out = sequence();
      while (i < p.size() && p[i] == '|') {
        ++i;
        out += " | " + sequence();
      }
      return out;
    }
    std::string sequence() {
      std::string out;
      while (i < p.size() && p[i] != '|' && p[i] != ')') {
        std::string atom_text = atom();
        atom_text = quantified(atom_text);
        out += (out.empty() ? "" : " ") + atom_text;
      }
      return out.empty() ? "\"\"" : out;
    }
    std::string quantified(const std::string& a) {
      if (i >= p.size()) return a;
      std::string q;
      if (p[i] == '*' || p[i] == '+' || p[i] == '?') {
        q = std::string(1, p[i++]);
      } else if (p[i] == '{') {  // {m}, {m,} or {m,n}
        const size_t open = i++;
        auto number = [&]() -> long {
          const size_t start = i;
          long v = 0;
          while (i < p.size() && p[i] >= '0' && p[i] <= '9' && i - start < 6) v = v * 10 + (p[i++] - '0');
          return i == start ? -1 : v;
        };
        const long lo = number();
        long hi = lo;
        if (i < p.size() && p[i] == ',') {
          ++i;
          hi = number();  // -1: unbounded
        }
        if (lo < 0 || i >= p.size() || p[i] != '}') {
          i = open;
          bad("bad repetition");
        }
        ++i;
        if (lo > long(Grammar::kMaxRepetition) || hi > long(Grammar::kMaxRepetition) || (hi >= 0 && hi < lo)) {
          i = open;
          bad("bad repetition bounds");
        }
        q = "{" + std::to_string(lo) + (hi == lo ? "" : "," + (hi < 0 ? std::string() : std::to_string(hi))) + "}";
      } else {
        return a;
      }
      if (i < p.size() && (p[i] == '?' || p[i] == '+')) bad("lazy or possessive quantifiers are not supported");
      return "(" + a + ")" + q;
    }
    // One character written in the JSON string: escaped as JSON requires.
    static std::string json_char(uint32_t cp) {
      if (cp == '"') return "\"\\\\\\\"\"";
      if (cp == '\\') return "\"\\\\\\\\\"";
      if (cp < 0x20) {
        static const char* kHex = "0123456789abcdef";
        return std::string("\"\\\\u00") + kHex[cp >> 4] + kHex[cp & 15] + "\"";
      }
      std::string s;
      grammar_detail::append_utf8(s, cp);
      return grammar_detail::gbnf_literal(s);
    }
    uint32_t next_cp() {
      uint32_t cp = 0;
      const size_t len = grammar_detail::decode_utf8(p, i, &cp);
      if (len == 0) bad("invalid UTF-8");
      i += len;
      return cp;
    }
    // Class body for escapes like \d inside or outside [...]; empty if not a class escape.
    static std::string class_escape(char e) {
      switch (e) {
        case 'd': return "0-9";
        case 'w': return "a-zA-Z0-9_";
        case 's': return " \\t\\n\\r";
        default: return "";
      }
    }
    uint32_t escaped_literal(char e) {
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case 'f': return '\f';
        case 'v': return '\v';
        case '0': return 0;
        default:
          if (grammar_detail::is_word_char(e) && e != '-') bad(std::string("unsupported escape \\") + e);
          return uint32_t(static_cast<unsigned char>(e));
      }
    }
    std::string atom() {
      const char ch = p[i];
      if (ch == '(') {
        ++i;
        if (i < p.size() && p[i] == '?') {
          if (i + 1 < p.size() && p[i + 1] == ':') {
            i += 2;
          } else {
            bad("lookaround and named groups are not supported");
          }
        }
        std::string inner = alternation();
        if (i >= p.size() || p[i] != ')') bad("unclosed (");
        ++i;
        return "(" + inner + ")";
      }
      if (ch == '[') return char_class();
      if (ch == '.') {
        ++i;
        return any_char;
      }
      if (ch == '^' || ch == '$') bad("anchors inside the pattern are not supported");
      if (ch == '*' || ch == '+' || ch == '?' || ch == '{') bad("quantifier without an item");
      if (ch == '\\') {
        if (i + 1 >= p.size()) bad("pattern ends with a backslash");
        const char e = p[i + 1];
        i += 2;
        if (!class_escape(e).empty()) return "[" + class_escape(e) + "]";
        if (e == 'D' || e == 'W' || e == 'S')
          return "[^" + class_escape(char(e - 'A' + 'a')) + "\"\\\\\\x7F\\x00-\\x1F]";
        if (e >= '1' && e <= '9') bad("backreferences are not supported");
        if (e == 'b' || e == 'B') bad("word boundaries are not supported");
        return json_char(escaped_literal(e));
      }
      return json_char(next_cp());
    }
    std::string char_class() {
      ++i;  // '['
      bool negated = false;
      if (i < p.size() && p[i] == '^') {
        negated = true;
        ++i;
      }
      std::string body;
      bool first = true;
      bool has_quote_or_backslash = false;
      while (i < p.size() && (p[i] != ']' || first)) {
        first = false;
        uint32_t lo = 0;
        if (p[i] == '\\') {
          if (i + 1 >= p.size()) bad("unterminated class");
          const char e = p[i + 1];
          i += 2;
          if (!class_escape(e).empty()) {
            body += class_escape(e);
            continue;
          }
          lo = escaped_literal(e);
        } else {
          lo = next_cp();
        }
        uint32_t hi = lo;
        if (i + 1 < p.size() && p[i] == '-' && p[i + 1] != ']') {
          ++i;
          if (p[i] == '\\') {
            if (i + 1 >= p.size()) bad("unterminated class");
            const char e = p[i + 1];
            i += 2;
            hi = escaped_literal(e);
          } else {
            hi = next_cp();
          }
          if (hi < lo) bad("backwards range in class");
        }
        if ((lo <= '"' && '"' <= hi) || (lo <= '\\' && '\\' <= hi) || lo < 0x20)
          has_quote_or_backslash = true;
        body += grammar_detail::class_char(lo) + (hi != lo ? "-" + grammar_detail::class_char(hi) : "");
      }
      if (i >= p.size()) bad("unterminated class");
      ++i;  // ']'
      if (negated) return "[^" + body + "\"\\\\\\x7F\\x00-\\x1F]";
      if (has_quote_or_backslash) bad("classes holding '\"', '\\' or control characters are not supported");
      return "[" + body + "]";
    }
  };

  const Json* root_;         // the document $ref resolves in
  std::string ref_prefix_;   // convert_documents: $ref rules per document
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;  // $ref -> rule name
};

inline std::string json_schema_to_gbnf(const Json& schema) { return JsonSchemaConverter::convert(schema); }
inline std::string json_schema_to_gbnf(std::string_view schema_json) {
  return JsonSchemaConverter::convert(Json::parse(schema_json));
}

// response_format {"type": "json_object"}: any JSON object.
inline std::string json_object_gbnf() { return json_schema_to_gbnf(Json::parse(R"({"type": "object"})")); }

}  // namespace edgellm
