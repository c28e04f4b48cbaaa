// jinja::Value: the values a chat template computes with, behaving as the Python objects Jinja2
// gives templates (None, bool, int, float, str, list, tuple, dict, Undefined, namespace, callables),
// and Python's text forms of them: str() / repr() of floats (shortest round trip), strings,
// lists and dicts, json.dumps, and the str methods' notions of whitespace and case.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"

namespace edgellm {
namespace jinja {

// A template's error: what went wrong and the template line (1-based; 0 when not known).
// `raised` marks the template's own raise_exception(msg), whose message is msg as written.
class TemplateError : public Error {
 public:
  TemplateError(const std::string& message, int line, bool raised)
      : Error(raised ? message : (line > 0 ? "template line " + std::to_string(line) + ": " + message : message)),
        message_(message), line_(line), raised_(raised) {}
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  bool raised() const { return raised_; }

 private:
  std::string message_;
  int line_;
  bool raised_;
};

// Errors while computing a value; the interpreter adds the line of the node being evaluated.
struct EvalError {
  std::string message;
};
template <class... Args>
[[noreturn]] inline void eval_fail(Args&&... args) {
  throw EvalError{detail::concat(std::forward<Args>(args)...)};
}

class Value;
struct CallArgs;
class Interpreter;
using Function = std::function<Value(Interpreter&, CallArgs&)>;

struct ListObj {
  std::vector<Value> items;
  bool tuple = false;
  // Not a list but a Python iterator over the items: a generator (what map, select, unique ...
  // return: always true, no len(), no indexing, not JSON) or a dict view (keys(), items():
  // sized, no indexing, not JSON). nullptr for lists and tuples.
  const char* iter = nullptr;
  bool sized = false;
};
// Insertion-ordered like Python's dict. Keys are Values (strings nearly always).
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value v);
};
struct FunctionObj {
  std::string name;
  Function fn;
};
struct LoopState;

class Value {
 public:
  enum Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable, Loop };

  Value() : kind_(Undefined) {}
  static Value undefined(std::string hint = {}) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value none() { Value v; v.kind_ = None; return v; }
  // markupsafe's Markup: a string marked safe (the `safe` / `escape` filters). Adding a plain
  // string to it HTML-escapes the plain one, as in Jinja2.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  Value(bool b) : kind_(Bool) { u_.b = b; }
  Value(int i) : kind_(Int) { u_.i = i; }
  Value(int64_t i) : kind_(Int) { u_.i = i; }
  Value(double d) : kind_(Float) { u_.d = d; }
  Value(std::string s) : kind_(String), str_(std::move(s)) {}
  Value(const char* s) : kind_(String), str_(s) {}
  Value(std::string_view s) : kind_(String), str_(s) {}
  static Value list(std::vector<Value> items = {}, bool tuple = false) {
    Value v;
    v.kind_ = List;
    v.list_ = std::make_shared<ListObj>();
    v.list_->items = std::move(items);
    v.list_->tuple = tuple;
    return v;
  }
  // A generator ("generator", "list_reverseiterator") or a dict view ("dict_items", sized).
  static Value iterator(std::vector<Value> items, const char* type, bool sized = false) {
    Value v = list(std::move(items));
    v.list_->iter = type;
    v.list_->sized = sized;
    return v;
  }
  static Value dict() {
    Value v;
    v.kind_ = Dict;
    v.dict_ = std::make_shared<DictObj>();
    return v;
  }
  static Value ns() {
    Value v = dict();
    v.kind_ = Namespace;
    return v;
  }
  static Value function(std::string name, Function fn) {
    Value v;
    v.kind_ = Callable;
    v.fn_ = std::make_shared<FunctionObj>(FunctionObj{std::move(name), std::move(fn)});
    return v;
  }
  static Value loop(std::shared_ptr<LoopState> st) {
    Value v;
    v.kind_ = Loop;
    v.loop_ = std::move(st);
    return v;
  }
  static Value from_json(const Json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Undefined; }
  bool is_none() const { return kind_ == None; }
  bool is_bool() const { return kind_ == Bool; }
  bool is_int() const { return kind_ == Int; }
  bool is_float() const { return kind_ == Float; }
  bool is_number() const { return kind_ == Int || kind_ == Float || kind_ == Bool; }  // Python: bool is an int
  bool is_string() const { return kind_ == String; }
  bool is_markup() const { return kind_ == String && markup_; }
  bool is_list() const { return kind_ == List; }
  bool is_dict() const { return kind_ == Dict; }
  bool is_namespace() const { return kind_ == Namespace; }
  bool is_callable() const { return kind_ == Callable; }

  bool as_bool() const { return u_.b; }
  int64_t as_int() const { return kind_ == Bool ? int64_t(u_.b) : u_.i; }
  double as_double() const { return kind_ == Float ? u_.d : double(as_int()); }
  const std::string& str() const { return str_; }  // String; an Undefined's hint
  const std::vector<Value>& items() const { return list_->items; }
  bool is_tuple() const { return list_->tuple; }
  bool is_iterator() const { return kind_ == List && list_->iter; }      // generator or dict view
  bool is_generator() const { return is_iterator() && !list_->sized; }  // no len()
  const DictObj& dict_obj() const { return *dict_; }
  DictObj& dict_obj() { return *dict_; }
  std::weak_ptr<DictObj> dict_handle() const { return dict_; }
  const FunctionObj& fn() const { return *fn_; }
  const std::shared_ptr<LoopState>& loop_state() const { return loop_; }

  // Python's bool(): empty strings / containers, 0 and None are false; Undefined is false.
  bool truthy() const;
  // Python's str() and repr(); json.dumps is builtins.hpp's dump_json.
  std::string to_str() const;
  void repr_to(std::string& out) const;
  std::string repr() const { std::string s; repr_to(s); return s; }
  const char* type_name() const;
  // Same object (Python `is`) for containers, equal value otherwise.
  bool same(const Value& o) const;

 private:
  Kind kind_;
  bool markup_ = false;
  union {
    bool b;
    int64_t i;
    double d;
  } u_{};
  std::string str_;
  std::shared_ptr<ListObj> list_;
  std::shared_ptr<DictObj> dict_;
  std::shared_ptr<FunctionObj> fn_;
  std::shared_ptr<LoopState> loop_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  int line = 0;

  // The argument `name` at position `index` (or as a keyword), or `def` when absent.
  Value get(size_t index, const char* name, Value def = Value()) {
    for (auto& kv : kw)
      if (kv.first == name) return kv.second;
    if (index < pos.size()) return pos[index];
    return def;
  }
  bool has(size_t index, const char* name) const {
    for (auto& kv : kw)
      if (kv.first == name) return true;
    return index < pos.size();
  }
  // Refuses arguments beyond the n positional ones and the keywords named (comma-separated).
  void expect(const char* what, size_t n, std::string_view names = {}) const {
    if (pos.size() > n) eval_fail(what, "() takes at most ", n, " positional argument(s), got ", pos.size());
    for (auto& kv : kw) {
      bool known = false;
      for (size_t b = 0; b <= names.size();) {
        size_t e = names.find(',', b);
        if (e == std::string_view::npos) e = names.size();
        if (names.substr(b, e - b) == kv.first) known = true;
        b = e + 1;
      }
      if (!known) eval_fail(what, "() got an unexpected keyword argument '", kv.first, "'");
    }
  }
};

// The `loop` variable of a for loop.
struct LoopState {
  std::vector<Value> items;
  size_t index0 = 0;
  int depth = 1;
  Value last_changed;  // loop.changed()
  bool has_changed = false;
};

// ---- Python text helpers ----------------------------------------------------------------------
namespace py {

// Decodes one UTF-8 sequence at s[i] (advancing i); invalid bytes decode as themselves.
inline uint32_t next_cp(std::string_view s, size_t& i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = json_detail::utf8_seq_len(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i);
  if (n <= 1) {
    ++i;
    return c;
  }
  uint32_t cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}
inline std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_cp(s, i));
  return out;
}
inline void append_cp(std::string& out, uint32_t cp) { json_detail::append_utf8(out, cp); }
inline std::string from_cps(const uint32_t* p, size_t n) {
  std::string out;
  for (size_t k = 0; k < n; ++k) append_cp(out, p[k]);
  return out;
}
inline size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) next_cp(s, i), ++n;
  return n;
}

// str.isspace()'s code points.
inline bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Simple case mappings (ASCII, Latin-1, Latin Extended-A pairs, Greek and Cyrillic basic
// letters): what template text needs; other scripts have no case or keep theirs.
inline uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c == 0xB5) return 0x39C;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_pairs ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}
inline uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_pairs ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}
inline bool is_cased(uint32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0xDF; }
inline bool is_upper(uint32_t c) { return to_lower(c) != c; }
inline bool is_lower(uint32_t c) { return to_upper(c) != c || c == 0xDF; }

inline std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = next_cp(s, i);
    if (c == 0xDF) out += "SS";  // ß
    else append_cp(out, to_upper(c));
  }
  return out;
}
inline std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_cp(out, to_lower(next_cp(s, i)));
  return out;
}
// Each code point upper-cased where upper_here(first, prev_cased) says so, else lowered.
template <class UpperHere>
inline std::string recase(std::string_view s, UpperHere upper_here) {
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    const bool first = i == 0;
    const uint32_t c = next_cp(s, i);
    append_cp(out, upper_here(first, prev_cased) ? to_upper(c) : to_lower(c));
    prev_cased = is_cased(c);
  }
  return out;
}
// str.title(): a cased letter after an uncased character is upper-cased, the others lowered.
inline std::string title(std::string_view s) {
  return recase(s, [](bool, bool prev_cased) { return !prev_cased; });
}
// str.capitalize(): the first code point upper-cased, the others lowered.
inline std::string capitalize(std::string_view s) {
  return recase(s, [](bool first, bool) { return first; });
}

// str.strip / lstrip / rstrip: Unicode whitespace, or the code points of `chars`.
inline std::string strip(std::string_view s, bool left, bool right, const std::string* chars = nullptr) {
  const std::vector<uint32_t> cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strippable = [&](uint32_t c) {
    if (!chars) return is_space(c);
    for (uint32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  return from_cps(cps.data() + b, e - b);
}

// str.split(sep=None, maxsplit=-1) and rsplit.
inline std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) eval_fail("split(): empty separator");
    if (!from_right) {
      size_t b = 0;
      while (maxsplit != 0) {
        const size_t k = s.find(*sep, b);
        if (k == std::string_view::npos) break;
        out.emplace_back(s.substr(b, k - b));
        b = k + sep->size();
        if (maxsplit > 0) --maxsplit;
      }
      out.emplace_back(s.substr(b));
    } else {
      size_t e = s.size();
      while (maxsplit != 0 && e >= sep->size()) {
        const size_t k = s.rfind(*sep, e - sep->size());
        if (k == std::string_view::npos) break;
        out.emplace_back(s.substr(k + sep->size(), e - k - sep->size()));
        e = k;
        if (maxsplit > 0) --maxsplit;
      }
      out.emplace_back(s.substr(0, e));
      std::reverse(out.begin(), out.end());
    }
    return out;
  }
  const std::vector<uint32_t> cps = code_points(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_space(cps[i])) ++i;
      if (i == cps.size()) break;
      if (maxsplit == 0) {
        size_t e = cps.size();
        while (e > i && is_space(cps[e - 1])) --e;
        out.push_back(from_cps(cps.data() + i, e - i));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !is_space(cps[j])) ++j;
      out.push_back(from_cps(cps.data() + i, j - i));
      i = j;
      if (maxsplit > 0) --maxsplit;
    }
  } else {
    size_t e = cps.size();
    while (true) {
      while (e > 0 && is_space(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit == 0) {
        size_t b = 0;
        while (b < e && is_space(cps[b])) ++b;
        out.push_back(from_cps(cps.data() + b, e - b));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(cps[b - 1])) --b;
      out.push_back(from_cps(cps.data() + b, e - b));
      e = b;
      if (maxsplit > 0) --maxsplit;
    }
    std::reverse(out.begin(), out.end());
  }
  return out;
}

inline std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts repl around every code point
    size_t i = 0;
    int64_t n = 0;
    while (true) {
      if (count >= 0 && n >= count) {
        out.append(s.substr(i));
        break;
      }
      out.append(repl);
      ++n;
      if (i >= s.size()) break;
      const size_t b = i;
      next_cp(s, i);
      out.append(s.substr(b, i - b));
    }
    return out;
  }
  size_t b = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t k = s.find(old, b);
    if (k == std::string_view::npos) break;
    out.append(s.substr(b, k - b));
    out.append(repl);
    b = k + old.size();
    ++n;
  }
  out.append(s.substr(b));
  return out;
}

// repr() of a float: the shortest digits that read back to the same double, in Python's layout
// (fixed notation for exponents -4..15 with at least one decimal, else d.ddde+XX).
inline std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf: [-]d[.ddd]e[+-]XX
  std::string s(buf);
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t epos = s.find('e');
  const int exp10 = std::atoi(s.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (s[i] != '.') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out += "0." + std::string(size_t(-exp10 - 1), '0') + digits;
    } else if (size_t(exp10) + 1 >= digits.size()) {
      out += digits + std::string(size_t(exp10) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(exp10) + 1) + "." + digits.substr(size_t(exp10) + 1);
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += e;
  }
  return out;
}

// Code points repr() writes as escapes: controls, and the separators and format characters a
// template can meet (Python's str.isprintable() is false for them).
inline bool is_printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return false;
  if (c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c >= 0xF0000) return false;  // private use planes
  return true;
}

// markupsafe.escape: & < > " ' as HTML entities.
inline std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

inline void str_repr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out += q;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = next_cp(s, i);
    if (c == uint32_t(q) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      append_cp(out, c);
    }
  }
  out += q;
}

// json.dumps's string form with ensure_ascii (\uXXXX for all non-ASCII) or without; without, it
// is RFC 8259's escaping, which core/json.hpp already writes.
inline void json_str(std::string& out, std::string_view s, bool ensure_ascii) {
  if (!ensure_ascii) {
    json_escape_to(out, s);
    return;
  }
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = next_cp(s, i);
    if (const char* e = short_escape(c)) {
      out += e;
    } else if (c < 0x20 || c >= 0x7F) {
      char buf[16];
      if (c >= 0x10000) {
        const uint32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 + (v >> 10)), unsigned(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      }
      out += buf;
    } else {
      append_cp(out, c);
    }
  }
  out += '"';
}

}  // namespace py

// ---- Value methods -----------------------------------------------------------------------------
inline const char* Value::type_name() const {
  switch (kind_) {
    case Undefined: return "Undefined";
    case None: return "NoneType";
    case Bool: return "bool";
    case Int: return "int";
    case Float: return "float";
    case String: return "str";
    case List: return list_->iter ? list_->iter : list_->tuple ? "tuple" : "list";
    case Dict: return "dict";
    case Namespace: return "Namespace";
    case Callable: return "function";
    case Loop: return "LoopContext";
  }
  return "object";
}

inline bool Value::truthy() const {
  switch (kind_) {
    case Undefined:
    case None: return false;
    case Bool: return u_.b;
    case Int: return u_.i != 0;
    case Float: return u_.d != 0;
    case String: return !str_.empty();
    case List: return (list_->iter && !list_->sized) || !list_->items.empty();
    case Dict: return !dict_->items.empty();
    default: return true;
  }
}

inline std::string Value::to_str() const {
  switch (kind_) {
    case Undefined: return "";
    case String: return str_;
    default: return repr();
  }
}

inline void Value::repr_to(std::string& out) const {
  switch (kind_) {
    case Undefined: break;
    case None: out += "None"; break;
    case Bool: out += u_.b ? "True" : "False"; break;
    case Int: out += std::to_string(u_.i); break;
    case Float: out += py::float_repr(u_.d); break;
    case String:
      if (markup_) out += "Markup(";
      py::str_repr(out, str_);
      if (markup_) out += ")";
      break;
    case List: {
      if (list_->iter && !list_->sized) {
        out += std::string("<") + list_->iter + " object>";
        break;
      }
      if (list_->iter) out += std::string(list_->iter) + "(";
      const bool t = list_->tuple;
      out += t ? '(' : '[';
      for (size_t k = 0; k < list_->items.size(); ++k) {
        if (k) out += ", ";
        list_->items[k].repr_to(out);
      }
      if (t && list_->items.size() == 1) out += ',';
      out += t ? ')' : ']';
      if (list_->iter) out += ')';
      break;
    }
    case Namespace:
      out += "<Namespace ";
      [[fallthrough]];
    case Dict: {
      out += '{';
      bool first = true;
      for (const auto& kv : dict_->items) {
        if (!first) out += ", ";
        first = false;
        kv.first.repr_to(out);
        out += ": ";
        kv.second.repr_to(out);
      }
      out += '}';
      if (kind_ == Namespace) out += '>';
      break;
    }
    case Callable: out += "<function " + fn_->name + ">"; break;
    case Loop: out += "<LoopContext>"; break;
  }
}

// Python ==: numbers across int / float / bool, containers element-wise, Undefined equal to Undefined.
inline bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Undefined:
    case Value::None: return true;
    case Value::String: return a.str() == b.str();
    case Value::List: {
      if (a.is_iterator() || b.is_iterator()) return a.same(b);
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t k = 0; k < a.items().size(); ++k)
        if (!(a.items()[k] == b.items()[k])) return false;
      return true;
    }
    case Value::Dict: {
      const auto& x = a.dict_obj().items;
      const auto& y = b.dict_obj().items;
      if (x.size() != y.size()) return false;
      for (const auto& kv : x) {
        const Value* o = b.dict_obj().find(kv.first);
        if (!o || !(*o == kv.second)) return false;
      }
      return true;
    }
    default: return a.same(b);
  }
}
inline bool operator!=(const Value& a, const Value& b) { return !(a == b); }

inline bool Value::same(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case List: return list_ == o.list_;
    case Dict:
    case Namespace: return dict_ == o.dict_;
    case Callable: return fn_ == o.fn_;
    case Loop: return loop_ == o.loop_;
    default: return *this == o;
  }
}

inline const Value* DictObj::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
inline const Value* DictObj::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
  return nullptr;
}
inline void DictObj::set(Value key, Value v) {
  for (auto& kv : items)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items.emplace_back(std::move(key), std::move(v));
}

inline Value Value::from_json(const Json& j) {
  switch (j.type()) {
    case Json::Null: return none();
    case Json::Bool: return Value(j.as_bool());
    case Json::Number: {
      if (j.is_int()) return Value(j.as_int());
      return Value(j.as_number());
    }
    case Json::String: return Value(j.as_string());
    case Json::Array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const Json& e : j.as_array()) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case Json::Object: {
      Value d = dict();
      d.dict_->items.reserve(j.size());
      // Json refuses duplicate keys, so no member replaces another here.
      for (const auto& kv : j.as_object()) d.dict_->items.emplace_back(Value(kv.first), from_json(kv.second));
      return d;
    }
  }
  return none();
}

}  // namespace jinja
}  // namespace edgellm
