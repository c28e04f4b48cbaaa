// Json: a small strict JSON value, parser (RFC 8259, byte offsets in errors) and writer, for chat
// template contexts, tool definitions, reference data, JSONL task files and tools' output.
// Standard library only.
#pragma once
#include <clocale>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__has_include)
#if __has_include(<charconv>)
#include <charconv>
#endif
#endif

#include "edgellm/core/error.hpp"

namespace edgellm {

namespace json_detail {

// Length of the valid UTF-8 sequence starting at p (n bytes available), 0 if invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
inline size_t utf8_seq_len(const unsigned char* p, size_t n) {
  const unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;  // overlong
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  if (cp > 0x10FFFF) return 0;
  return len;
}

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Slow path for numbers the exact fast path cannot take (more than 19 digits, large exponents);
// false when out of range. from_chars is locale-independent; where the library lacks it for
// double (libc++ before 17), or with EDGELLM_JSON_NO_FROM_CHARS defined (to test this path),
// strtod is used with '.' swapped for the C locale's decimal point.
#if !defined(EDGELLM_JSON_NO_FROM_CHARS) && defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
inline bool parse_double_slow(std::string_view text, double* out) {
  const auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(*out);
}
#else
inline bool parse_double_slow(std::string_view text, double* out) {
  std::string buf(text);
  const char* dp = std::localeconv()->decimal_point;
  const size_t dot = buf.find('.');
  if (dot != std::string::npos && dp && dp[0] != '.' && dp[0] != '\0') buf.replace(dot, 1, dp);
  char* end = nullptr;
  *out = std::strtod(buf.c_str(), &end);
  return end == buf.c_str() + buf.size() && std::isfinite(*out);
}
#endif

// Shortest "%.<p>g" (p = min_digits..max_digits) that reads back as v, with '.' as the decimal
// point whatever the C locale says.
inline std::string format_shortest(double v, int min_digits, int max_digits, bool as_float) {
  char buf[40];
  for (int p = min_digits; p <= max_digits; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    const double back = std::strtod(buf, nullptr);
    if (p == max_digits || (as_float ? float(back) == float(v) : back == v)) break;
  }
  std::string s(buf);
  for (char& c : s)
    if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E')) c = '.';
  return s;
}

}  // namespace json_detail

// The two-character escape written for c (backslash n for a newline, ...) or nullptr for characters
// written another way. JSON has the \b and \f escapes; GBNF (with_bf false) does not.
inline const char* short_escape(uint32_t c, bool with_bf = true) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return with_bf ? "\\b" : nullptr;
    case '\f': return with_bf ? "\\f" : nullptr;
    default: return nullptr;
  }
}
// The character the JSON escape backslash-e stands for (not \u), or -1 when e is none.
inline int short_unescape(char e) {
  static constexpr char kFrom[] = "\"\\/bfnrt", kTo[] = "\"\\/\b\f\n\r\t";
  for (size_t i = 0; i + 1 < sizeof kFrom; ++i)
    if (kFrom[i] == e) return kTo[i];
  return -1;
}

// A JSON value. Objects keep their keys in insertion order (vector of pairs: the documents we
// read are small objects and big arrays). A number is either an exact int64 (an integer
// literal that fits) or a double; as_number() works for both, as_int() for integral values.
// Caps for parsing untrusted text (a server's request bodies): nesting depth, members of any one
// object, and values in the whole document (every scalar, array and object counts one). A text
// beyond a cap throws JsonLimitError as soon as the cap is passed, before the rest is read.
struct JsonLimits {
  int max_depth = 512;
  size_t max_members = SIZE_MAX;
  size_t max_values = SIZE_MAX;
};
class JsonLimitError : public Error {
 public:
  using Error::Error;
};

class Json {
 public:
  enum Type { Null, Bool, Number, String, Array, Object };
  using ArrayT = std::vector<Json>;
  using ObjectT = std::vector<std::pair<std::string, Json>>;
  static constexpr int kDefaultMaxDepth = 512;

  Json() noexcept : kind_(Kind::Null) { u_.i = 0; }
  Json(std::nullptr_t) noexcept : Json() {}
  Json(bool b) noexcept : kind_(Kind::Bool) { u_.b = b; }
  Json(double d) noexcept : kind_(Kind::Double) { u_.d = d; }
  Json(float f) noexcept : Json(double(f)) {}
  template <class T, class = std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value>>
  Json(T i) : kind_(Kind::Int) {
    if (std::is_unsigned<T>::value && uint64_t(i) > uint64_t(INT64_MAX)) {
      kind_ = Kind::Double;
      u_.d = double(i);
    } else {
      u_.i = int64_t(i);
    }
  }
  Json(const char* s) : kind_(Kind::String) { u_.s = new std::string(s); }
  Json(std::string_view s) : kind_(Kind::String) { u_.s = new std::string(s); }
  Json(const std::string& s) : kind_(Kind::String) { u_.s = new std::string(s); }
  Json(std::string&& s) : kind_(Kind::String) { u_.s = new std::string(std::move(s)); }
  Json(ArrayT a) : kind_(Kind::Array) { u_.a = new ArrayT(std::move(a)); }
  Json(ObjectT o) : kind_(Kind::Object) { u_.o = new ObjectT(std::move(o)); }
  static Json array() { return Json(ArrayT{}); }
  static Json object() { return Json(ObjectT{}); }

  Json(const Json& other) : kind_(Kind::Null) { copy_from(other); }
  Json(Json&& other) noexcept : kind_(other.kind_), u_(other.u_) { other.kind_ = Kind::Null; }
  Json& operator=(const Json& other) {
    if (this != &other) {
      Json tmp(other);
      swap(tmp);
    }
    return *this;
  }
  Json& operator=(Json&& other) noexcept {
    if (this != &other) {
      Json tmp(std::move(other));
      swap(tmp);
    }
    return *this;
  }
  ~Json() { release(); }
  void swap(Json& other) noexcept {
    std::swap(kind_, other.kind_);
    std::swap(u_, other.u_);
  }

  // ---- inspection ----
  Type type() const {
    switch (kind_) {
      case Kind::Null: return Null;
      case Kind::Bool: return Bool;
      case Kind::Int:
      case Kind::Double: return Number;
      case Kind::String: return String;
      case Kind::Array: return Array;
      case Kind::Object: return Object;
    }
    return Null;
  }
  static const char* type_name(Type t) {
    static const char* const kNames[] = {"null", "bool", "number", "string", "array", "object"};
    return kNames[t];
  }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Double; }
  bool is_int() const { return kind_ == Kind::Int; }  // an exact int64 (integer literal)
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { expect(Bool); return u_.b; }
  double as_number() const {
    expect(Number);
    return kind_ == Kind::Int ? double(u_.i) : u_.d;
  }
  // Exact integers, and doubles with an integral value in int64 range (1e3, 2.0); else Error.
  int64_t as_int() const {
    expect(Number);
    if (kind_ == Kind::Int) return u_.i;
    const double d = u_.d;
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || std::floor(d) != d)
      throw_error("json: expected an integer, got ", json_detail::format_shortest(d, 15, 17, false));
    return int64_t(d);
  }
  const std::string& as_string() const { expect(String); return *u_.s; }
  const ArrayT& as_array() const { expect(Array); return *u_.a; }
  ArrayT& as_array() { expect(Array); return *u_.a; }
  const ObjectT& as_object() const { expect(Object); return *u_.o; }
  ObjectT& as_object() { expect(Object); return *u_.o; }

  // An array of numbers as floats (reference logits rows); Error naming the bad element.
  std::vector<float> as_float_vector() const {
    const ArrayT& a = as_array();
    std::vector<float> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_number())
        throw_error("json: element ", i, " of the array is ", type_name(a[i].type()), ", expected number");
      out[i] = float(a[i].as_number());
    }
    return out;
  }

  // Number of elements of an array or members of an object.
  size_t size() const {
    if (kind_ == Kind::Array) return u_.a->size();
    if (kind_ == Kind::Object) return u_.o->size();
    throw_error("json: size() of a ", type_name(type()), ", expected array or object");
  }

  // Object member lookup: find() returns nullptr when absent, operator[] throws naming the key.
  const Json* find(std::string_view key) const {
    for (const auto& kv : as_object())
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  Json* find(std::string_view key) { return const_cast<Json*>(std::as_const(*this).find(key)); }
  bool contains(std::string_view key) const { return is_object() && find(key) != nullptr; }
  const Json& operator[](std::string_view key) const {
    if (const Json* v = find(key)) return *v;
    std::string keys;
    for (const auto& kv : *u_.o) keys += (keys.empty() ? "" : ", ") + kv.first;
    throw_error("json: missing key \"", key, "\" (object has: ", keys.empty() ? "no keys" : keys, ")");
  }
  const Json& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  const Json& operator[](const std::string& key) const { return (*this)[std::string_view(key)]; }
  const Json& at(size_t i) const {
    const ArrayT& a = as_array();
    if (i >= a.size()) throw_error("json: index ", i, " out of range (array size ", a.size(), ")");
    return a[i];
  }
  Json& at(size_t i) { return const_cast<Json&>(std::as_const(*this).at(i)); }

  // ---- building ----
  void push_back(Json v) { as_array().push_back(std::move(v)); }
  // Replaces the member if present, otherwise appends it (keeps insertion order).
  Json& set(std::string_view key, Json v) {
    if (Json* cur = find(key)) {
      *cur = std::move(v);
      return *cur;
    }
    u_.o->emplace_back(std::string(key), std::move(v));
    return u_.o->back().second;
  }

  friend bool operator==(const Json& a, const Json& b) {
    if (a.type() != b.type()) return false;
    switch (a.type()) {
      case Null: return true;
      case Bool: return a.u_.b == b.u_.b;
      case Number:
        if (a.kind_ == Kind::Int && b.kind_ == Kind::Int) return a.u_.i == b.u_.i;
        return a.as_number() == b.as_number();
      case String: return *a.u_.s == *b.u_.s;
      case Array: return *a.u_.a == *b.u_.a;
      case Object: return *a.u_.o == *b.u_.o;
    }
    return false;
  }
  friend bool operator!=(const Json& a, const Json& b) { return !(a == b); }

  // ---- text ----
  static Json parse(std::string_view text, int max_depth = kDefaultMaxDepth);
  static Json parse(std::string_view text, const JsonLimits& limits);
  // JSONL: one value per non-blank line; errors name the line (1-based) and byte offset.
  static std::vector<Json> parse_lines(std::string_view text, int max_depth = kDefaultMaxDepth);
  // Compact when indent < 0, else pretty-printed with that many spaces. Non-finite numbers are
  // written as null (JSON has no NaN/inf); invalid UTF-8 bytes in strings as \ufffd.
  std::string dump(int indent = -1) const {
    std::string out;
    dump_to(out, indent, 0);
    return out;
  }
  void dump_to(std::string& out, int indent = -1, int level = 0) const;

 private:
  enum class Kind : uint8_t { Null, Bool, Int, Double, String, Array, Object };
  union Payload {
    bool b;
    int64_t i;
    double d;
    std::string* s;
    ArrayT* a;
    ObjectT* o;
  };
  friend class JsonParser;

  void expect(Type t) const {
    if (type() != t) throw_error("json: expected ", type_name(t), ", got ", type_name(type()));
  }
  void copy_from(const Json& o) {
    switch (o.kind_) {
      case Kind::String: u_.s = new std::string(*o.u_.s); break;
      case Kind::Array: u_.a = new ArrayT(*o.u_.a); break;
      case Kind::Object: u_.o = new ObjectT(*o.u_.o); break;
      default: u_ = o.u_; break;
    }
    kind_ = o.kind_;
  }
  void release() noexcept {
    switch (kind_) {
      case Kind::String: delete u_.s; break;
      case Kind::Array: delete u_.a; break;
      case Kind::Object: delete u_.o; break;
      default: break;
    }
    kind_ = Kind::Null;
  }

  Kind kind_;
  Payload u_;
};

// JSON string literal for s (with quotes), escaping what RFC 8259 requires.
inline void json_escape_to(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      out += char(c);
      ++i;
      continue;
    }
    if (const char* e = short_escape(c)) {
      out += e;
      ++i;
      continue;
    }
    if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
      continue;
    }
    const size_t len = json_detail::utf8_seq_len(p + i, n - i);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  out += '"';
}
inline std::string json_escape(std::string_view s) {
  std::string out;
  json_escape_to(out, s);
  return out;
}

// Shortest decimal text that reads back as the same double / float ("0.1", "8.40434").
inline std::string json_format_number(double v) {
  if (!std::isfinite(v)) return "null";
  return json_detail::format_shortest(v, 15, 17, false);
}
inline std::string json_format_float(float v) {
  if (!std::isfinite(v)) return "null";
  return json_detail::format_shortest(double(v), 6, 9, true);
}

inline void Json::dump_to(std::string& out, int indent, int level) const {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(lvl), ' ');
  };
  switch (kind_) {
    case Kind::Null: out += "null"; return;
    case Kind::Bool: out += u_.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(u_.i); return;
    case Kind::Double: out += json_format_number(u_.d); return;
    case Kind::String: json_escape_to(out, *u_.s); return;
    case Kind::Array: {
      out += '[';
      for (size_t i = 0; i < u_.a->size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        (*u_.a)[i].dump_to(out, indent, level + 1);
      }
      if (!u_.a->empty()) newline(level);
      out += ']';
      return;
    }
    case Kind::Object: {
      out += '{';
      for (size_t i = 0; i < u_.o->size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        json_escape_to(out, (*u_.o)[i].first);
        out += indent < 0 ? ":" : ": ";
        (*u_.o)[i].second.dump_to(out, indent, level + 1);
      }
      if (!u_.o->empty()) newline(level);
      out += '}';
      return;
    }
  }
}

// Recursive-descent parser over a byte range; pos_ is the byte offset reported in errors.
class JsonParser {
 public:
  JsonParser(std::string_view text, int max_depth) : s_(text) { lim_.max_depth = max_depth; }
  JsonParser(std::string_view text, const JsonLimits& lim) : s_(text), lim_(lim) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    if (pos_ >= s_.size()) throw_error("json: ", what, " at byte ", pos_, " (end of input)");
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) throw_error("json: ", what, " at byte ", pos_, " ('", char(c), "')");
    throw_error("json: ", what, " at byte ", pos_, " (byte 0x", std::hex, unsigned(c), ")");
  }
  void skip_ws() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }
  bool consume_literal(const char* lit) {
    const size_t n = std::strlen(lit);
    if (s_.compare(pos_, n, lit) != 0) return false;
    pos_ += n;
    return true;
  }

  Json parse_value(int depth) {
    if (pos_ >= s_.size()) fail("expected a value");
    if (++n_values_ > lim_.max_values)
      throw JsonLimitError("json: more than " + std::to_string(lim_.max_values) + " values at byte " + std::to_string(pos_));
    switch (s_[pos_]) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': if (consume_literal("true")) return Json(true); break;
      case 'f': if (consume_literal("false")) return Json(false); break;
      case 'n': if (consume_literal("null")) return Json(); break;
      default:
        if (s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9')) return parse_number();
        break;
    }
    fail("expected a value");
  }

  // The bracketed list arrays and objects share, at its opening bracket: item() (after white
  // space) for each element, separated by ',', up to `close`. what: "array" / "object".
  template <class Item>
  void parse_list(int depth, char close, const char* what, Item item) {
    if (depth > lim_.max_depth) fail("nesting deeper than the depth limit");
    ++pos_;  // '[' or '{'
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == close) {
      ++pos_;
      return;
    }
    for (;;) {
      skip_ws();
      item();
      skip_ws();
      if (pos_ >= s_.size()) fail((std::string("unterminated ") + what).c_str());
      if (s_[pos_] == ',') { ++pos_; continue; }
      if (s_[pos_] == close) { ++pos_; return; }
      fail((std::string("expected ',' or '") + close + "' in " + what).c_str());
    }
  }

  Json parse_array(int depth) {
    Json out = Json::array();
    Json::ArrayT& a = *out.u_.a;
    parse_list(depth, ']', "array", [&] { a.push_back(parse_value(depth)); });
    return out;
  }

  // Duplicate keys are an error. Each key is compared with the earlier ones by a linear scan
  // while the object is small, then through an ordered index of the members (O(n log n) in all:
  // an object of 80k keys costs milliseconds, not seconds).
  Json parse_object(int depth) {
    Json out = Json::object();
    Json::ObjectT& o = *out.u_.o;
    constexpr size_t kScan = 16;
    auto less = [&o](size_t a, size_t b) { return o[a].first < o[b].first; };
    std::set<size_t, decltype(less)> index(less);
    parse_list(depth, '}', "object", [&] {
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key in object");
      const size_t key_pos = pos_;
      if (o.size() >= lim_.max_members)
        throw JsonLimitError("json: an object with more than " + std::to_string(lim_.max_members) + " members at byte " +
                             std::to_string(key_pos));
      o.emplace_back(parse_string(), Json());
      const size_t i = o.size() - 1;
      bool dup = false;
      if (i < kScan) {
        for (size_t k = 0; k < i && !dup; ++k) dup = o[k].first == o[i].first;
      } else {
        if (index.empty())
          for (size_t k = 0; k < i; ++k) index.insert(k);
        dup = !index.insert(i).second;
      }
      if (dup) {
        pos_ = key_pos;
        fail("duplicate key in object");
      }
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      o[i].second = parse_value(depth);
    });
    return out;
  }

  uint32_t parse_hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9') d = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') d = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = uint32_t(c - 'A' + 10);
      else fail("invalid hex digit in \\u escape");
      v = (v << 4) | d;
      ++pos_;
    }
    return v;
  }

  // \uXXXX, with a high surrogate required to be followed by a \u low surrogate.
  void parse_unicode_escape(std::string& out) {
    const size_t esc_pos = pos_ - 2;
    uint32_t cp = parse_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      pos_ = esc_pos;
      fail("unpaired low surrogate in \\u escape");
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (s_.compare(pos_, 2, "\\u") != 0) {
        pos_ = esc_pos;
        fail("high surrogate not followed by a \\u low surrogate");
      }
      pos_ += 2;
      const uint32_t lo = parse_hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) {
        pos_ = esc_pos;
        fail("high surrogate not followed by a low surrogate");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    json_detail::append_utf8(out, cp);
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    const size_t n = s_.size();
    for (;;) {
      // Copy the run of plain ASCII in one go.
      size_t run = pos_;
      while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\') ++run;
      out.append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= n) fail("unterminated string");
      const unsigned char c = p[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("unescaped control character in string");
      if (c >= 0x80) {
        const size_t len = json_detail::utf8_seq_len(p + pos_, n - pos_);
        if (len == 0) fail("invalid UTF-8 in string");
        out.append(s_.data() + pos_, len);
        pos_ += len;
        continue;
      }
      // backslash
      if (pos_ + 1 >= n) fail("unterminated escape");
      const char e = s_[pos_ + 1];
      pos_ += 2;
      if (e == 'u') {
        parse_unicode_escape(out);
        continue;
      }
      const int u = short_unescape(e);
      if (u < 0) {
        pos_ -= 2;
        fail("invalid escape in string");
      }
      out += char(u);
    }
  }

  // Grammar check, then an exact fast path: up to 19 significant digits with a value below 2^53
  // and a power of ten up to 22 is one correctly rounded multiply/divide (Clinger).
  Json parse_number() {
    static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const size_t start = pos_;
    const size_t n = s_.size();
    const bool neg = s_[pos_] == '-';
    if (neg) ++pos_;
    if (pos_ >= n || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("expected a digit in number");
    uint64_t mant = 0;
    int digits = 0;      // significant digits accumulated in mant
    int dropped = 0;     // integer digits beyond 19 (scale by 10^dropped)
    int frac_digits = 0; // fraction digits accumulated in mant
    bool truncated = false;
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < n && s_[pos_] >= '0' && s_[pos_] <= '9') fail("leading zero in number");
    } else {
      while (pos_ < n && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (digits < 19) { mant = mant * 10 + uint64_t(s_[pos_] - '0'); if (mant) ++digits; }
        else { ++dropped; truncated = true; }
        ++pos_;
      }
    }
    bool is_integer = true;
    if (pos_ < n && s_[pos_] == '.') {
      is_integer = false;
      ++pos_;
      if (pos_ >= n || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("expected a digit after '.'");
      while (pos_ < n && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (digits < 19) {
          mant = mant * 10 + uint64_t(s_[pos_] - '0');
          if (mant) ++digits;
          ++frac_digits;
        } else if (s_[pos_] != '0') {
          truncated = true;
        }
        ++pos_;
      }
    }
    int64_t exp10 = 0;
    if (pos_ < n && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_integer = false;
      ++pos_;
      bool eneg = false;
      if (pos_ < n && (s_[pos_] == '+' || s_[pos_] == '-')) eneg = s_[pos_++] == '-';
      if (pos_ >= n || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("expected a digit in exponent");
      while (pos_ < n && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (exp10 < 100000) exp10 = exp10 * 10 + (s_[pos_] - '0');
        ++pos_;
      }
      if (eneg) exp10 = -exp10;
    }
    const std::string_view text = s_.substr(start, pos_ - start);
    if (is_integer && !truncated && !(neg && mant == 0)) {
      if (!neg) {
        if (mant <= uint64_t(INT64_MAX)) return Json(int64_t(mant));
      } else if (mant <= uint64_t(INT64_MAX) + 1) {
        return Json(int64_t(0 - mant));  // two's complement: -2^63 fits
      }
    }
    const int64_t e = exp10 + dropped - frac_digits;
    if (!truncated && mant <= (uint64_t(1) << 53) && e >= -22 && e <= 22) {
      double d = double(mant);
      d = e < 0 ? d / kPow10[-e] : d * kPow10[e];
      return Json(neg ? -d : d);
    }
    double d = 0.0;
    if (!json_detail::parse_double_slow(text, &d)) {
      if (e >= 0) {
        pos_ = start;
        fail("number out of double range");
      }
      d = neg ? -0.0 : 0.0;  // underflow: below the smallest subnormal
    }
    return Json(d);
  }

  std::string_view s_;
  size_t pos_ = 0;
  JsonLimits lim_;
  size_t n_values_ = 0;
};

inline Json Json::parse(std::string_view text, int max_depth) {
  return JsonParser(text, max_depth).parse_document();
}
inline Json Json::parse(std::string_view text, const JsonLimits& limits) {
  return JsonParser(text, limits).parse_document();
}

inline std::vector<Json> Json::parse_lines(std::string_view text, int max_depth) {
  std::vector<Json> out;
  size_t line_start = 0;
  for (int line_no = 1; line_start < text.size(); ++line_no) {
    size_t end = text.find('\n', line_start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(line_start, end - line_start);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
      try {
        out.push_back(parse(line, max_depth));
      } catch (const Error& e) {
        throw_error("line ", line_no, " (byte ", line_start, "): ", e.what());
      }
    }
    line_start = end + 1;
  }
  return out;
}

}  // namespace edgellm
