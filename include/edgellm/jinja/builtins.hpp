// Jinja2's filters, tests and globals, Python's str / dict / list methods, and Hugging Face's
// additions (tojson as json.dumps(ensure_ascii=False, ...), raise_exception, strftime_now), each
// with the behaviour of the Python original on the values templates pass them.
#pragma once
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/jinja/interpreter.hpp"

namespace edgellm {
namespace jinja {
namespace builtin_detail {

inline std::string need_str(const Value& v, const char* what) {
  if (!v.is_string()) eval_fail(what, ": expected a string, got ", v.type_name());
  return v.str();
}
inline int64_t need_int(const Value& v, const char* what) {
  if (!v.is_number() || v.is_float()) eval_fail(what, ": expected an integer, got ", v.type_name());
  return v.as_int();
}
// soft_str(): what str() gives; Undefined is "".
inline std::string soft_str(const Value& v) { return v.to_str(); }

// json.dumps(value, ensure_ascii, indent, separators, sort_keys).
struct JsonStyle {
  bool ensure_ascii = false;
  bool indent_on = false;
  std::string indent;
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
inline void dump_json(const Interpreter& in, std::string& out, const Value& v, const JsonStyle& st, int level) {
  in.check_size(out.size());
  if (level > 512) eval_fail("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int k = 0; k < lvl; ++k) out += st.indent;
  };
  switch (v.kind()) {
    case Value::None: out += "null"; return;
    case Value::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Int: out += std::to_string(v.as_int()); return;
    case Value::Float: {
      const double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += py::float_repr(d);
      return;
    }
    case Value::String: py::json_str(out, v.str(), st.ensure_ascii); return;
    case Value::List: {
      if (v.is_iterator()) eval_fail("Object of type ", v.type_name(), " is not JSON serializable");
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& x : v.items()) {
        if (!first) out += st.indent_on ? std::string(st.item_sep) : st.item_sep;
        first = false;
        if (st.indent_on) newline(level + 1);
        dump_json(in, out, x, st, level + 1);
      }
      if (st.indent_on) newline(level);
      out += ']';
      return;
    }
    case Value::Dict: {
      if (v.dict_obj().items.empty()) {
        out += "{}";
        return;
      }
      // Keys as json.dumps writes them: strings, and numbers / bools / None turned to strings.
      std::vector<std::pair<std::string, const Value*>> members;
      for (const auto& kv : v.dict_obj().items) {
        const Value& k = kv.first;
        std::string key;
        if (k.is_string()) key = k.str();
        else if (k.is_bool()) key = k.as_bool() ? "true" : "false";
        else if (k.is_int()) key = std::to_string(k.as_int());
        else if (k.is_float()) key = py::float_repr(k.as_double());
        else if (k.is_none()) key = "null";
        else eval_fail("keys must be str, int, float, bool or None, not ", k.type_name());
        members.emplace_back(std::move(key), &kv.second);
      }
      if (st.sort_keys)
        std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      bool first = true;
      for (const auto& m : members) {
        if (!first) out += st.item_sep;
        first = false;
        if (st.indent_on) newline(level + 1);
        py::json_str(out, m.first, st.ensure_ascii);
        out += st.key_sep;
        dump_json(in, out, *m.second, st, level + 1);
      }
      if (st.indent_on) newline(level);
      out += '}';
      return;
    }
    default: eval_fail("Object of type ", v.type_name(), " is not JSON serializable");
  }
}

inline Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("tojson", 4, "ensure_ascii,indent,separators,sort_keys");
  JsonStyle st;
  st.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
  const Value indent = a.get(1, "indent", Value::none());
  if (!indent.is_none() && !indent.is_undefined()) {
    st.indent_on = true;
    if (indent.is_string()) st.indent = indent.str();
    else st.indent.assign(size_t(std::max<int64_t>(0, std::min<int64_t>(need_int(indent, "tojson indent"), 1024))), ' ');
    st.item_sep = ",";
  }
  const Value seps = a.get(2, "separators", Value::none());
  if (!seps.is_none() && !seps.is_undefined()) {
    if (!seps.is_list() || seps.items().size() != 2 || !seps.items()[0].is_string() || !seps.items()[1].is_string())
      eval_fail("tojson: separators must be a pair of strings");
    st.item_sep = seps.items()[0].str();
    st.key_sep = seps.items()[1].str();
  }
  st.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
  std::string out;
  dump_json(in, out, v, st, 0);
  return Value(std::move(out));
}

// str.splitlines(): the line boundaries Python knows.
inline std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    const uint32_t c = py::next_cp(s, i);
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.push_back(s.substr(b, at - b));
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    b = i;
  }
  if (b < s.size()) out.push_back(s.substr(b));
  return out;
}

// Python's printf-style formatting (str % args): %s %r %d %i %f %e %g %x %o %c %%, flags and widths.
inline std::string percent_format(const std::string& fmt, const std::vector<Value>& args, const Value* mapping) {
  std::string out;
  size_t ai = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) eval_fail("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* arg = nullptr;
    Value keyed;
    if (fmt[i] == '(') {
      const size_t e = fmt.find(')', i);
      if (e == std::string::npos || !mapping) eval_fail("format requires a mapping");
      const Value* v = mapping->dict_obj().find(std::string_view(fmt).substr(i + 1, e - i - 1));
      if (!v) eval_fail("format: missing key '", fmt.substr(i + 1, e - i - 1), "'");
      keyed = *v;
      arg = &keyed;
      i = e + 1;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i])) spec += fmt[i++];
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      spec += fmt[i++];
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) spec += fmt[i++];
    }
    if (i >= fmt.size()) eval_fail("incomplete format");
    const char conv = fmt[i];
    if (!arg) {
      if (ai >= args.size()) eval_fail("not enough arguments for format string");
      arg = &args[ai++];
    }
    if (spec.size() > 12) eval_fail("format: width too large");
    char buf[512];
    switch (conv) {
      case 's':
      case 'r': {
        const std::string s = conv == 's' ? arg->to_str() : arg->repr();
        // Width and precision count code points; apply by hand.
        std::string body = s;
        const size_t dot = spec.find('.');
        if (dot != std::string::npos) {
          const size_t prec = size_t(std::atoi(spec.c_str() + dot + 1));
          const std::vector<uint32_t> cps = py::code_points(body);
          if (cps.size() > prec) body = py::from_cps(cps.data(), prec);
        }
        size_t width = 0;
        const bool left = spec.find('-') != std::string::npos;
        for (size_t k = 1; k < spec.size() && spec[k] != '.'; ++k)
          if (std::isdigit(static_cast<unsigned char>(spec[k])) && !(spec[k] == '0' && width == 0)) width = width * 10 + size_t(spec[k] - '0');
          else if (spec[k] == '0' && width > 0) width *= 10;
        const size_t len = py::length(body);
        if (len < width) {
          if (left) body += std::string(width - len, ' ');
          else body = std::string(width - len, ' ') + body;
        }
        out += body;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o': {
        if (!arg->is_number()) eval_fail("%", conv, " format: a number is required, not ", arg->type_name());
        const long long v = arg->is_float() ? (long long)std::trunc(arg->as_double()) : (long long)arg->as_int();
        const char c = conv == 'i' ? 'd' : conv;
        std::snprintf(buf, sizeof buf, (spec + "ll" + c).c_str(), v);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!arg->is_number()) eval_fail("must be real number, not ", arg->type_name());
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_double());
        out += buf;
        break;
      }
      case 'c': {
        if (arg->is_string()) out += arg->str();
        else py::append_cp(out, uint32_t(need_int(*arg, "%c")));
        break;
      }
      default: eval_fail("unsupported format character '", std::string(1, conv), "'");
    }
  }
  if (!mapping && ai < args.size()) eval_fail("not all arguments converted during string formatting");
  return out;
}

// str.format(): {} {0} {name} {name.attr} {0[key]} with an optional :spec of fill/align/width.
inline std::string brace_format(Interpreter& in, const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else eval_fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t e = fmt.find('}', i);
    if (e == std::string::npos) eval_fail("expected '}' before end of string");
    std::string field = fmt.substr(i + 1, e - i - 1);
    i = e;
    std::string spec;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    size_t k = 0;
    while (k < field.size() && field[k] != '.' && field[k] != '[') ++k;
    const std::string head = field.substr(0, k);
    Value v;
    if (head.empty()) {
      if (auto_idx >= a.pos.size()) eval_fail("Replacement index ", auto_idx, " out of range");
      v = a.pos[auto_idx++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      const size_t idx = size_t(std::atoi(head.c_str()));
      if (idx >= a.pos.size()) eval_fail("Replacement index ", idx, " out of range");
      v = a.pos[idx];
    } else {
      bool found = false;
      for (auto& kv : a.kw)
        if (kv.first == head) v = kv.second, found = true;
      if (!found) eval_fail("format: missing key '", head, "'");
    }
    while (k < field.size()) {
      if (field[k] == '.') {
        size_t j = k + 1;
        while (j < field.size() && field[j] != '.' && field[j] != '[') ++j;
        v = in.getattr(v, field.substr(k + 1, j - k - 1));
        k = j;
      } else {
        const size_t j = field.find(']', k);
        if (j == std::string::npos) eval_fail("Missing ']' in format string");
        const std::string key = field.substr(k + 1, j - k - 1);
        if (!key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
          v = in.getitem(v, Value(int64_t(std::atoll(key.c_str()))));
        else
          v = in.getitem(v, Value(key));
        k = j + 1;
      }
    }
    std::string s = v.to_str();
    if (!spec.empty()) {
      char fill = ' ', align = v.is_number() && !v.is_bool() ? '>' : '<';
      size_t p = 0;
      if (spec.size() >= 2 && std::strchr("<>^", spec[1])) fill = spec[0], align = spec[1], p = 2;
      else if (std::strchr("<>^", spec[0])) align = spec[0], p = 1;
      const size_t width = size_t(std::atoi(spec.c_str() + p));
      const size_t len = py::length(s);
      if (len < width) {
        const size_t pad = width - len;
        if (align == '<') s += std::string(pad, fill);
        else if (align == '>') s = std::string(pad, fill) + s;
        else s = std::string(pad / 2, fill) + s + std::string(pad - pad / 2, fill);
      }
    }
    out += s;
  }
  return out;
}

inline std::string center(const std::string& s, int64_t width, const std::string& fill = " ") {
  const int64_t len = int64_t(py::length(s));
  if (width <= len) return s;
  const int64_t pad = width - len;
  // CPython: left = pad / 2 + (pad & width & 1)
  const int64_t left = pad / 2 + (pad & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < pad - left; ++k) out += fill;
  return out;
}

// int(str, base): Python's rules (whitespace, sign, underscores between digits, 0x / 0o / 0b with base 0 or the matching base).
inline bool parse_int(const std::string& s_in, int base, int64_t* out) {
  std::string s = py::strip(s_in, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = char(s[i + 1] | 0x20);
    const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (pb && (base == 0 || base == pb)) {
      base = pb;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= s.size()) return false;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return false;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return false;
    if (v > (INT64_MAX - d) / base) return false;
    v = v * base + d;
    prev_digit = true;
  }
  if (!prev_digit) return false;
  *out = neg ? -v : v;
  return true;
}
inline bool parse_float(const std::string& s_in, double* out) {
  std::string s = py::strip(s_in, true, true);
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1])))
        return false;
      continue;
    }
    t += s[i];
  }
  if (t.empty()) return false;
  const std::string l = py::lower(t);
  const std::string body = (l[0] == '+' || l[0] == '-') ? l.substr(1) : l;
  if (body == "inf" || body == "infinity" || body == "nan") {
    *out = body == "nan" ? NAN : (l[0] == '-' ? -INFINITY : INFINITY);
    return true;
  }
  for (char c : body)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) return false;
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return end && *end == 0;
}

// A sort / unique key: strings lower-cased unless case_sensitive.
inline Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py::lower(v.str()));
  return v;
}

// Jinja2's make_attrgetter: "a.b.0" through getitem, each part.
inline Value get_attribute(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_number() && !attribute.is_float()) return in.getitem(item, attribute);
  const std::string path = need_str(attribute, "attribute");
  Value v = item;
  size_t b = 0;
  while (true) {
    const size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    int64_t idx;
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        parse_int(part, 10, &idx))
      v = in.getitem(v, Value(idx));
    else
      v = in.getitem(v, Value(part));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return v;
}

inline bool less_than(const Value& a, const Value& b) { return interp_detail::order(a, b, "<") < 0; }

inline std::vector<Value> sorted(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> idx(items.size());
  for (size_t k = 0; k < idx.size(); ++k) idx[k] = k;
  // Python's sort is stable, and reverse=True keeps equal items in their order.
  std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
    return reverse ? less_than(keys[y], keys[x]) : less_than(keys[x], keys[y]);
  });
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t k : idx) out.push_back(std::move(items[k]));
  return out;
}

// ---- filters --------------------------------------------------------------------------------------
inline Value f_length(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("length", 0);
  switch (v.kind()) {
    case Value::String: return Value(int64_t(py::length(v.str())));
    case Value::List:
      if (v.is_generator()) eval_fail("object of type '", v.type_name(), "' has no len()");
      return Value(int64_t(v.items().size()));
    case Value::Dict:
    case Value::Namespace: return Value(int64_t(v.dict_obj().items.size()));
    case Value::Undefined: return Value(int64_t(0));
    case Value::Loop: return Value(int64_t(v.loop_state()->items.size()));
    default: (void)in; eval_fail("object of type '", v.type_name(), "' has no len()");
  }
}
// A string result that stays Markup when its input was (markupsafe's str methods keep the type).
inline Value like(const Value& in, std::string s) { return in.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s)); }
inline Value f_string(Interpreter&, const Value& v, CallArgs& a) { a.expect("string", 0); return like(v, soft_str(v)); }
inline Value f_safe(Interpreter&, const Value& v, CallArgs& a) { a.expect("safe", 0); return Value::markup(soft_str(v)); }
inline Value f_upper(Interpreter&, const Value& v, CallArgs& a) { a.expect("upper", 0); return like(v, py::upper(soft_str(v))); }
inline Value f_lower(Interpreter&, const Value& v, CallArgs& a) { a.expect("lower", 0); return like(v, py::lower(soft_str(v))); }
inline Value f_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("capitalize", 0);
  return like(v, py::capitalize(soft_str(v)));
}
// Jinja2's title: the first letter of each piece after -, whitespace, (, {, [ or < upper-cased.
inline Value f_title(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("title", 0);
  const std::string s = soft_str(v);
  std::string out;
  bool at_start = true;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    if (sep) {
      py::append_cp(out, c);
      at_start = true;
    } else {
      if (at_start && c == 0xDF) out += "Ss";
      else py::append_cp(out, at_start ? py::to_upper(c) : py::to_lower(c));
      at_start = false;
    }
  }
  return Value(std::move(out));
}
inline Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("trim", 1, "chars");
  const Value chars = a.get(0, "chars", Value::none());
  if (chars.is_string()) return like(v, py::strip(soft_str(v), true, true, &chars.str()));
  return like(v, py::strip(soft_str(v), true, true));
}
inline Value f_escape(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("escape", 0);
  if (v.is_markup()) return v;
  return Value::markup(py::html_escape(soft_str(v)));
}
inline Value f_forceescape(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("forceescape", 0);
  return Value::markup(py::html_escape(soft_str(v)));
}
inline Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("default", 2, "default_value,boolean");
  const Value def = a.get(0, "default_value", Value(""));
  const bool boolean = a.get(1, "boolean", Value(false)).truthy();
  if (v.is_undefined() || (boolean && !v.truthy())) return def;
  return v;
}
inline Value f_list(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("list", 0);
  return Value::list(in.iterate(v));
}
inline Value f_first(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("first", 0);
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}
inline Value f_last(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("last", 0);
  if (v.is_generator()) eval_fail("'", v.type_name(), "' object is not reversible");
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}
inline Value f_reverse(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("reverse", 0);
  if (v.is_string()) {
    std::vector<uint32_t> cps = py::code_points(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(py::from_cps(cps.data(), cps.size()));
  }
  // reversed(): an iterator over a list or dict; a generator becomes a reversed list.
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_generator()) return Value::list(std::move(items));
  if (v.is_dict()) return Value::iterator(std::move(items), "dict_reversekeyiterator");
  if (v.is_list()) return Value::iterator(std::move(items), v.is_tuple() ? "reversed" : "list_reverseiterator");
  if (v.is_undefined()) return Value::iterator(std::move(items), "reversed");
  eval_fail("argument to reversed() must be a sequence");
}
inline Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("join", 2, "d,attribute");
  const std::string sep = soft_str(a.get(0, "d", Value("")));
  const Value attribute = a.get(1, "attribute", Value::none());
  std::string out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += (attribute.is_none() ? item : get_attribute(in, item, attribute)).to_str();
    in.check_size(out.size());
  }
  return Value(std::move(out));
}
inline Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("items", 0);
  if (v.is_undefined()) return Value::iterator({}, "generator");
  if (!v.is_dict()) eval_fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& kv : v.dict_obj().items) out.push_back(Value::list({kv.first, kv.second}, true));
  return Value::iterator(std::move(out), "generator");
}
inline Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("dictsort", 3, "case_sensitive,by,reverse");
  if (!v.is_dict()) eval_fail("dictsort: expected a mapping, got ", v.type_name());
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const std::string by = soft_str(a.get(1, "by", Value("key")));
  if (by != "key" && by != "value") eval_fail("You can only sort by either 'key' or 'value'");
  const bool rev = a.get(2, "reverse", Value(false)).truthy();
  std::vector<Value> items, keys;
  for (const auto& kv : v.dict_obj().items) {
    items.push_back(Value::list({kv.first, kv.second}, true));
    keys.push_back(fold(by == "key" ? kv.first : kv.second, cs));
  }
  return Value::list(sorted(std::move(items), keys, rev));
}
inline Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("sort", 3, "reverse,case_sensitive,attribute");
  const bool rev = a.get(0, "reverse", Value(false)).truthy();
  const bool cs = a.get(1, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(2, "attribute", Value::none());
  std::vector<Value> items = in.iterate(v), keys;
  for (const auto& x : items) keys.push_back(fold(attribute.is_none() ? x : get_attribute(in, x, attribute), cs));
  return Value::list(sorted(std::move(items), keys, rev));
}
inline Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("unique", 2, "case_sensitive,attribute");
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(1, "attribute", Value::none());
  std::vector<Value> out, seen;
  for (const auto& x : in.iterate(v)) {
    const Value key = fold(attribute.is_none() ? x : get_attribute(in, x, attribute), cs);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    out.push_back(x);
  }
  return Value::iterator(std::move(out), "generator");
}
inline Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  a.expect(want_max ? "max" : "min", 2, "case_sensitive,attribute");
  const bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
  const Value attribute = a.get(1, "attribute", Value::none());
  const std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = fold(attribute.is_none() ? items[0] : get_attribute(in, items[0], attribute), cs);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = fold(attribute.is_none() ? items[k] : get_attribute(in, items[k], attribute), cs);
    if (want_max ? less_than(best_key, key) : less_than(key, best_key)) best = k, best_key = std::move(key);
  }
  return items[best];
}
inline Value f_min(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }
inline Value f_max(Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
inline Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("sum", 2, "attribute,start");
  const Value attribute = a.get(0, "attribute", Value::none());
  Value total = a.get(1, "start", Value(int64_t(0)));
  CallArgs none;
  for (const auto& x : in.iterate(v)) {
    const Value item = attribute.is_none() ? x : get_attribute(in, x, attribute);
    if (!total.is_number() || !item.is_number())
      eval_fail("unsupported operand type(s) for +: '", total.type_name(), "' and '", item.type_name(), "'");
    if (total.is_float() || item.is_float()) total = Value(total.as_double() + item.as_double());
    else {
      int64_t r = 0;
      if (__builtin_add_overflow(total.as_int(), item.as_int(), &r)) eval_fail("integer overflow");
      total = Value(r);
    }
  }
  return total;
}
inline Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("abs", 0);
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN) eval_fail("integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  eval_fail("bad operand type for abs(): '", v.type_name(), "'");
}
inline Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("int", 2, "default,base");
  const Value def = a.get(0, "default", Value(int64_t(0)));
  const int base = int(need_int(a.get(1, "base", Value(int64_t(10))), "int base"));
  if (v.is_bool()) return Value(v.as_int());
  if (v.is_int()) return v;
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return def;
    return Value(int64_t(d));
  }
  if (v.is_string()) {
    int64_t i;
    if (parse_int(v.str(), base, &i)) return Value(i);
    double d;
    if (parse_float(v.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(int64_t(d));
    return def;
  }
  if (v.is_undefined()) eval_fail(Interpreter::undefined_message(v));
  return def;
}
inline Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("float", 1, "default");
  const Value def = a.get(0, "default", Value(0.0));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    double d;
    if (parse_float(v.str(), &d)) return Value(d);
    return def;
  }
  if (v.is_undefined()) eval_fail(Interpreter::undefined_message(v));
  return def;
}
// Python's round(x, n): correctly rounded, ties to even (as printf's %.nf of the exact binary value).
inline double py_round(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    if (n > 300) return x;
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", int(n), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, double(-n));
  const double y = x / p;
  double r = std::nearbyint(y);
  return r * p;
}
inline Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("round", 2, "precision,method");
  const int64_t prec = need_int(a.get(0, "precision", Value(int64_t(0))), "round precision");
  const std::string method = soft_str(a.get(1, "method", Value("common")));
  if (!v.is_number()) eval_fail("round: expected a number, got ", v.type_name());
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    return Value(py_round(v.as_double(), prec));
  }
  if (method != "ceil" && method != "floor") eval_fail("method must be common, ceil or floor");
  const double p = std::pow(10.0, double(prec));
  const double x = v.as_double() * p;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}
inline Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("replace", 3, "old,new,count");
  const std::string s = soft_str(v);
  const std::string old = soft_str(a.get(0, "old"));
  const std::string repl = soft_str(a.get(1, "new"));
  const Value count = a.get(2, "count", Value::none());
  const int64_t n = count.is_none() ? -1 : need_int(count, "replace count");
  if (!old.empty() && repl.size() > old.size()) {
    size_t hits = 0;
    for (size_t k = s.find(old); k != std::string::npos; k = s.find(old, k + old.size())) ++hits;
    in.check_size(s.size() + hits * (repl.size() - old.size()));
  } else if (old.empty()) {
    in.check_size(s.size() + (py::length(s) + 1) * repl.size());
  }
  return Value(py::replace(s, old, repl, n));
}
inline Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("indent", 3, "width,first,blank");
  const Value width = a.get(0, "width", Value(int64_t(4)));
  const bool first = a.get(1, "first", Value(false)).truthy();
  const bool blank = a.get(2, "blank", Value(false)).truthy();
  const std::string ind = width.is_string() ? width.str()
                                            : std::string(size_t(std::clamp<int64_t>(need_int(width, "indent width"), 0, 1024)), ' ');
  const std::string s = soft_str(v) + "\n";
  const std::vector<std::string> lines = splitlines(s);
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
      in.check_size(rv.size());
    }
  }
  if (first) rv = ind + rv;
  return like(v, std::move(rv));
}
inline Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("wordcount", 0);
  const std::string s = soft_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    // \w: letters, digits and _; outside ASCII every non-space, non-punctuation character counts.
    const bool w = (c < 0x80) ? (std::isalnum(int(c)) || c == '_')
                              : !(py::is_space(c) || (c >= 0x2000 && c <= 0x206F) || (c >= 0x3000 && c <= 0x303F) ||
                                  (c >= 0xFF00 && c <= 0xFF0F) || (c >= 0xA0 && c <= 0xBF) || c == 0xD7 || c == 0xF7);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}
inline Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  a.expect("center", 1, "width");
  return like(v, center(soft_str(v), std::min<int64_t>(need_int(a.get(0, "width", Value(int64_t(80))), "center width"), 1 << 20)));
}
inline Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  if (!a.kw.empty() && !a.pos.empty()) eval_fail("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Value m = Value::dict();
    for (auto& kv : a.kw) m.dict_obj().set(Value(kv.first), kv.second);
    return Value(percent_format(soft_str(v), {}, &m));
  }
  if (a.pos.size() == 1 && a.pos[0].is_dict()) return Value(percent_format(soft_str(v), {}, &a.pos[0]));
  return like(v, percent_format(soft_str(v), a.pos, nullptr));
}
inline Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("attr", 1, "name");
  return in.getattr(v, need_str(a.get(0, "name"), "attr"));
}
inline Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  a.expect("batch", 2, "linecount,fill_with");
  const int64_t n = need_int(a.get(0, "linecount"), "batch");
  if (n <= 0) eval_fail("batch: linecount must be positive");
  const bool fill = a.has(1, "fill_with");
  const Value fill_with = a.get(1, "fill_with", Value::none());
  std::vector<Value> out, cur;
  for (const auto& x : in.iterate(v)) {
    cur.push_back(x);
    if (int64_t(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (fill)
      while (int64_t(cur.size()) < n) cur.push_back(fill_with);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::iterator(std::move(out), "generator");
}

// map / select / reject / selectattr / rejectattr.
// Jinja2's map / select family are generators that look at their input only when it is true.
inline Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!v.truthy()) return Value::iterator({}, "generator");
  bool by_attr = false;
  Value attribute, def;
  for (auto& kv : a.kw) {
    if (kv.first == "attribute") by_attr = true, attribute = kv.second;
    else if (kv.first == "default") def = kv.second;
  }
  if (by_attr) {
    for (auto& kv : a.kw)
      if (kv.first != "attribute" && kv.first != "default") eval_fail("Unexpected keyword argument '", kv.first, "'");
    for (const auto& x : in.iterate(v)) {
      Value r = get_attribute(in, x, attribute);
      if (r.is_undefined() && a.has(99, "default")) r = def;
      out.push_back(std::move(r));
    }
    return Value::iterator(std::move(out), "generator");
  }
  if (a.pos.empty()) eval_fail("map requires a filter argument");
  const std::string name = need_str(a.pos[0], "map");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const auto& x : in.iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.apply_filter(name, x, copy));
  }
  return Value::iterator(std::move(out), "generator");
}
inline Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  if (!v.truthy()) return Value::iterator({}, "generator");
  size_t i = 0;
  Value attribute;
  if (by_attr) {
    if (a.pos.empty()) eval_fail("selectattr / rejectattr need an attribute");
    attribute = a.pos[0];
    i = 1;
  }
  std::string test;
  if (i < a.pos.size()) test = need_str(a.pos[i++], "test name");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + long(std::min(i, a.pos.size())), a.pos.end());
  rest.kw = a.kw;
  std::vector<Value> out;
  for (const auto& x : in.iterate(v)) {
    const Value subject = by_attr ? get_attribute(in, x, attribute) : x;
    bool ok;
    if (test.empty()) {
      ok = subject.truthy();
    } else {
      CallArgs copy = rest;
      ok = in.apply_test(test, subject, copy);
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::iterator(std::move(out), "generator");
}
inline Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
inline Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
inline Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
inline Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

inline Value f_unsupported(Interpreter&, const Value&, CallArgs&) {
  eval_fail("this Jinja2 filter is not supported by edgellm's template engine");
}

// ---- tests ------------------------------------------------------------------------------------------
inline bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
inline bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
inline bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
inline bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
inline bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
inline bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.is_namespace();
}
inline bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || (v.is_list() && !v.is_iterator()) || v.is_dict() || v.is_undefined();
}
inline bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
inline bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
inline bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
inline bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
inline bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
inline bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
inline bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }
inline bool t_odd(Interpreter&, const Value& v, CallArgs&) { return need_int(v, "odd") % 2 != 0; }
inline bool t_even(Interpreter&, const Value& v, CallArgs&) { return need_int(v, "even") % 2 == 0; }
inline bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t n = need_int(a.get(0, "num"), "divisibleby");
  if (n == 0) eval_fail("integer division or modulo by zero");
  return need_int(v, "divisibleby") % n == 0;
}
// str.islower() / str.isupper(): some character of the case, none of the other.
inline bool all_cased_as(const Value& v, bool (*is_case)(uint32_t), bool (*is_other)(uint32_t)) {
  const std::string s = soft_str(v);
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = py::next_cp(s, i);
    if (is_other(c)) return false;
    cased = cased || is_case(c);
  }
  return cased;
}
inline bool t_lower(Interpreter&, const Value& v, CallArgs&) { return all_cased_as(v, py::is_lower, py::is_upper); }
inline bool t_upper(Interpreter&, const Value& v, CallArgs&) { return all_cased_as(v, py::is_upper, py::is_lower); }
inline bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return v == a.get(0, "other"); }
inline bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !(v == a.get(0, "other")); }
inline bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return interp_detail::order(v, a.get(0, "other"), "<") == -1; }
inline bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  const int c = interp_detail::order(v, a.get(0, "other"), "<=");
  return c == -1 || c == 0;
}
inline bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return interp_detail::order(v, a.get(0, "other"), ">") == 1; }
inline bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  const int c = interp_detail::order(v, a.get(0, "other"), ">=");
  return c == 1 || c == 0;
}
inline bool t_in(Interpreter&, const Value& v, CallArgs& a) { return interp_detail::contains(a.get(0, "seq"), v); }
inline bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value o = a.get(0, "other");
  if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool()) return v.kind() == o.kind() && v == o;
  return v.same(o);
}
inline bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && filter_table().count(v.str()); }
inline bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && test_table().count(v.str()); }
inline bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

// ---- methods ------------------------------------------------------------------------------------------
inline Value method(const Value& self, const std::string& name, Value (*fn)(Interpreter&, const Value&, CallArgs&)) {
  return Value::function(name, [self, fn](Interpreter& in, CallArgs& a) { return fn(in, self, a); });
}

inline bool starts_or_ends(const Value& self, CallArgs& a, bool ends, const char* what) {
  const Value arg = a.get(0, "prefix");
  const std::vector<uint32_t> cps = py::code_points(self.str());
  int64_t n = int64_t(cps.size());
  int64_t b = 0, e = n;
  auto norm = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
  if (a.pos.size() > 1 && !a.pos[1].is_none()) b = norm(need_int(a.pos[1], what));
  if (a.pos.size() > 2 && !a.pos[2].is_none()) e = norm(need_int(a.pos[2], what));
  if (b > e) return false;
  const std::string sub = py::from_cps(cps.data() + b, size_t(e - b));
  auto one = [&](const Value& p) {
    const std::string s = need_str(p, what);
    if (s.size() > sub.size()) return false;
    return ends ? sub.compare(sub.size() - s.size(), s.size(), s) == 0 : sub.compare(0, s.size(), s) == 0;
  };
  if (arg.is_list() && arg.is_tuple()) {
    for (const auto& p : arg.items())
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

inline Value str_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& a) {
  const std::string& s = self.str();
  // An optional string argument (absent or None: not given).
  auto opt_str = [&](size_t i, const char* nm) -> std::optional<std::string> {
    const Value v = a.get(i, nm, Value::none());
    if (v.is_none()) return std::nullopt;
    return need_str(v, nm);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    a.expect(name.c_str(), 1);
    const std::optional<std::string> chars = opt_str(0, "chars");
    return Value(py::strip(s, name != "rstrip", name != "lstrip", chars ? &*chars : nullptr));
  }
  if (name == "split" || name == "rsplit") {
    a.expect(name.c_str(), 2, "sep,maxsplit");
    const std::optional<std::string> sep = opt_str(0, "sep");
    const int64_t maxsplit = need_int(a.get(1, "maxsplit", Value(int64_t(-1))), "maxsplit");
    std::vector<Value> out;
    for (auto& p : py::split(s, sep ? &*sep : nullptr, maxsplit, name == "rsplit")) out.emplace_back(std::move(p));
    return Value::list(std::move(out));
  }
  if (name == "startswith" || name == "endswith") return Value(starts_or_ends(self, a, name == "endswith", name.c_str()));
  if (name == "replace") {
    CallArgs b;
    b.pos = a.pos;
    if (b.pos.size() > 3) eval_fail("replace() takes at most 3 arguments");
    return f_replace(in, self, b);
  }
  if (name == "upper") return Value(py::upper(s));
  if (name == "lower") return Value(py::lower(s));
  if (name == "title") return Value(py::title(s));
  if (name == "capitalize") return Value(py::capitalize(s));
  if (name == "swapcase") {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const uint32_t c = py::next_cp(s, i);
      py::append_cp(out, py::is_upper(c) ? py::to_lower(c) : py::to_upper(c));
    }
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string sub = need_str(a.get(0, "sub"), name.c_str());
    const std::vector<uint32_t> cps = py::code_points(s);
    const int64_t n = int64_t(cps.size());
    auto norm = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
    int64_t b = 0, e = n;
    if (a.pos.size() > 1 && !a.pos[1].is_none()) b = norm(need_int(a.pos[1], name.c_str()));
    if (a.pos.size() > 2 && !a.pos[2].is_none()) e = norm(need_int(a.pos[2], name.c_str()));
    const std::vector<uint32_t> needle = py::code_points(sub);
    const int64_t m = int64_t(needle.size());
    if (name == "count") {
      if (m == 0) return Value(e >= b ? e - b + 1 : 0);
      int64_t c = 0;
      for (int64_t i = b; i + m <= e;) {
        if (std::equal(needle.begin(), needle.end(), cps.begin() + i)) c++, i += m;
        else ++i;
      }
      return Value(c);
    }
    int64_t found = -1;
    if (name == "find" || name == "index") {
      for (int64_t i = b; i + m <= e; ++i)
        if (std::equal(needle.begin(), needle.end(), cps.begin() + i)) { found = i; break; }
    } else {
      for (int64_t i = e - m; i >= b; --i)
        if (std::equal(needle.begin(), needle.end(), cps.begin() + i)) { found = i; break; }
    }
    if (found < 0 && (name == "index" || name == "rindex")) eval_fail("substring not found");
    return Value(found);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& x : in.iterate(a.get(0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += need_str(x, "join");
      in.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(brace_format(in, s, a));
  if (name == "splitlines") {
    std::vector<Value> out;
    for (auto& l : splitlines(s)) out.emplace_back(std::move(l));
    return Value::list(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    const int64_t width = std::min<int64_t>(need_int(a.get(0, "width"), name.c_str()), 1 << 20);
    const int64_t len = int64_t(py::length(s));
    if (width <= len) return self;
    if (name == "zfill") {
      const size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
      return Value(s.substr(0, sign) + std::string(size_t(width - len), '0') + s.substr(sign));
    }
    const std::string fill = a.pos.size() > 1 ? need_str(a.pos[1], name.c_str()) : " ";
    if (name == "center") return Value(center(s, width, fill));
    std::string pad;
    for (int64_t k = len; k < width; ++k) pad += fill;
    return Value(name == "ljust" ? s + pad : pad + s);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string x = need_str(a.get(0, "prefix"), name.c_str());
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    if (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) return Value(s.substr(0, s.size() - x.size()));
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    const std::string sep = need_str(a.get(0, "sep"), name.c_str());
    if (sep.empty()) eval_fail("empty separator");
    const size_t k = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (k == std::string::npos)
      return name == "partition" ? Value::list({self, Value(""), Value("")}, true) : Value::list({Value(""), Value(""), self}, true);
    return Value::list({Value(s.substr(0, k)), Value(sep), Value(s.substr(k + sep.size()))}, true);
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" || name == "isalnum" ||
      name == "isspace" || name == "islower" || name == "isupper") {
    if (s.empty()) return Value(false);
    if (name == "islower" || name == "isupper") {
      CallArgs none;
      return Value(name == "islower" ? t_lower(in, self, none) : t_upper(in, self, none));
    }
    for (size_t i = 0; i < s.size();) {
      const uint32_t c = py::next_cp(s, i);
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = c < 0x80 ? std::isalpha(int(c)) != 0 : py::is_cased(c) || (c >= 0x3040 && !py::is_space(c));
      bool ok;
      if (name == "isspace") ok = py::is_space(c);
      else if (name == "isalpha") ok = alpha;
      else if (name == "isalnum") ok = alpha || digit;
      else ok = digit;
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  eval_fail("'str' object has no attribute '", name, "'");
}

}  // namespace builtin_detail

namespace interp_detail {

inline Value string_method(const Value& self, const std::string& name, bool* found) {
  static const char* const kNames[] = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower", "title",
      "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "join", "format", "splitlines", "center",
      "ljust", "rjust", "zfill", "removeprefix", "removesuffix", "partition", "rpartition", "isdigit", "isnumeric",
      "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  for (const char* n : kNames)
    if (name == n) {
      *found = true;
      return Value::function(name, [self, name](Interpreter& in, CallArgs& a) {
        return builtin_detail::str_method(in, self, name, a);
      });
    }
  return Value();
}

inline Value dict_method(const Value& self, const std::string& name, bool* found) {
  *found = true;
  if (name == "items")
    return Value::function(name, [self](Interpreter&, CallArgs& a) {
      a.expect("items", 0);
      std::vector<Value> out;
      for (const auto& kv : self.dict_obj().items) out.push_back(Value::list({kv.first, kv.second}, true));
      return Value::iterator(std::move(out), "dict_items", true);
    });
  if (name == "keys")
    return Value::function(name, [self](Interpreter& in, CallArgs& a) {
      a.expect("keys", 0);
      return Value::iterator(in.iterate(self), "dict_keys", true);
    });
  if (name == "values")
    return Value::function(name, [self](Interpreter&, CallArgs& a) {
      a.expect("values", 0);
      std::vector<Value> out;
      for (const auto& kv : self.dict_obj().items) out.push_back(kv.second);
      return Value::iterator(std::move(out), "dict_values", true);
    });
  if (name == "get")
    return Value::function(name, [self](Interpreter&, CallArgs& a) {
      if (a.pos.empty() || a.pos.size() > 2 || !a.kw.empty()) eval_fail("get() takes a key and an optional default");
      if (const Value* v = self.dict_obj().find(a.pos[0])) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  if (name == "copy") return Value::function(name, [self](Interpreter&, CallArgs&) {
      Value d = Value::dict();
      d.dict_obj() = self.dict_obj();
      return d;
    });
  if (interp_detail::mutating_method(self, name)) return Value();  // refused by the caller
  *found = false;
  return Value();
}

inline Value list_method(const Value& self, const std::string& name, bool* found) {
  *found = true;
  if (name == "index" || name == "count")
    return Value::function(name, [self, name](Interpreter&, CallArgs& a) -> Value {
      const Value x = a.get(0, "value");
      int64_t c = 0;
      for (size_t k = 0; k < self.items().size(); ++k)
        if (self.items()[k] == x) {
          if (name == "index") return Value(int64_t(k));
          ++c;
        }
      if (name == "index") eval_fail(x.repr(), " is not in list");
      return Value(c);
    });
  if (name == "copy" && !self.is_tuple())
    return Value::function(name, [self](Interpreter&, CallArgs&) { return Value::list(self.items()); });
  *found = false;
  return Value();
}

inline Value loop_attr(const Value& self, const std::string& name, bool* found) {
  const LoopState& st = *self.loop_state();
  const int64_t n = int64_t(st.items.size()), i = int64_t(st.index0);
  *found = true;
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(int64_t(st.depth));
  if (name == "depth0") return Value(int64_t(st.depth - 1));
  if (name == "previtem") return i > 0 ? st.items[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? st.items[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle")
    return Value::function("cycle", [self](Interpreter&, CallArgs& a) {
      if (a.pos.empty()) eval_fail("no items for cycling given");
      return a.pos[self.loop_state()->index0 % a.pos.size()];
    });
  if (name == "changed")
    return Value::function("changed", [self](Interpreter&, CallArgs& a) {
      LoopState& s = *self.loop_state();
      Value now = Value::list(a.pos, true);
      if (!s.has_changed || !(s.last_changed == now)) {
        s.last_changed = now;
        s.has_changed = true;
        return Value(true);
      }
      return Value(false);
    });
  *found = false;
  return Value();
}

}  // namespace interp_detail

inline const std::unordered_map<std::string, FilterFn>& filter_table() {
  using namespace builtin_detail;
  static const std::unordered_map<std::string, FilterFn> kTable = {
      {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
      {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
      {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"forceescape", f_forceescape}, {"format", f_format},
      {"indent", f_indent}, {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
      {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round}, {"safe", f_safe},
      {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort}, {"string", f_string}, {"sum", f_sum},
      {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"unique", f_unique}, {"upper", f_upper},
      {"wordcount", f_wordcount},
      // Jinja2 filters chat templates do not use: known names (a template that merely mentions
      // them still renders), an error when one is applied.
      {"filesizeformat", f_unsupported}, {"groupby", f_unsupported}, {"pprint", f_unsupported},
      {"random", f_unsupported}, {"slice", f_unsupported}, {"striptags", f_unsupported}, {"truncate", f_unsupported},
      {"urlencode", f_unsupported}, {"urlize", f_unsupported}, {"wordwrap", f_unsupported}, {"xmlattr", f_unsupported},
  };
  return kTable;
}

inline const std::unordered_map<std::string, TestFn>& test_table() {
  using namespace builtin_detail;
  static const std::unordered_map<std::string, TestFn> kTable = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
      {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge}, {"gt", t_gt}, {"greaterthan", t_gt},
      {">", t_gt}, {"in", t_in}, {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le},
      {"lower", t_lower}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"mapping", t_mapping}, {"ne", t_ne},
      {"!=", t_ne}, {"none", t_none}, {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas},
      {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined},
      {"upper", t_upper},
  };
  return kTable;
}

// The globals every template sees: range, dict, namespace, cycler-free Jinja2 globals used by chat
// templates, and Hugging Face's raise_exception / strftime_now.
inline void add_globals(Frame& g, std::function<std::string(const std::string&)> strftime_now) {
  g.set("range", Value::function("range", [](Interpreter& in, CallArgs& a) {
          if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) eval_fail("range expected 1 to 3 integer arguments");
          int64_t start = 0, stop, step = 1;
          if (a.pos.size() == 1) {
            stop = builtin_detail::need_int(a.pos[0], "range");
          } else {
            start = builtin_detail::need_int(a.pos[0], "range");
            stop = builtin_detail::need_int(a.pos[1], "range");
            if (a.pos.size() == 3) step = builtin_detail::need_int(a.pos[2], "range");
          }
          if (step == 0) eval_fail("range() arg 3 must not be zero");
          const long double count = step > 0 ? (stop > start ? ((long double)stop - start + step - 1) / step : 0)
                                             : (start > stop ? ((long double)start - stop - step - 1) / -step : 0);
          if (count > (long double)in.limits().max_range)
            eval_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", in.limits().max_range, ").");
          std::vector<Value> out;
          for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) out.emplace_back(v);
          return Value::list(std::move(out));
        }));
  g.set("dict", Value::function("dict", [](Interpreter& in, CallArgs& a) {
          Value d = Value::dict();
          if (a.pos.size() > 1) eval_fail("dict expected at most 1 argument");
          if (!a.pos.empty()) {
            const Value& src = a.pos[0];
            if (src.is_dict()) d.dict_obj() = src.dict_obj();
            else
              for (const auto& kv : in.iterate(src)) {
                if (!kv.is_list() || kv.items().size() != 2) eval_fail("dict: each element must be a pair");
                d.dict_obj().set(kv.items()[0], kv.items()[1]);
              }
          }
          for (auto& kv : a.kw) d.dict_obj().set(Value(kv.first), kv.second);
          return d;
        }));
  g.set("namespace", Value::function("namespace", [](Interpreter& in, CallArgs& a) {
          Value ns = Value::ns();
          in.own_namespace(ns);
          if (a.pos.size() > 1) eval_fail("namespace expected at most 1 positional argument");
          if (!a.pos.empty()) {
            if (!a.pos[0].is_dict()) eval_fail("namespace: the positional argument must be a mapping");
            ns.dict_obj() = a.pos[0].dict_obj();
          }
          for (auto& kv : a.kw) ns.dict_obj().set(Value(kv.first), kv.second);
          return ns;
        }));
  g.set("raise_exception", Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
          throw TemplateError(a.get(0, "message").to_str(), a.line, true);
        }));
  g.set("strftime_now", Value::function("strftime_now", [strftime_now](Interpreter&, CallArgs& a) {
          return Value(strftime_now(builtin_detail::need_str(a.get(0, "format"), "strftime_now")));
        }));
  g.set("joiner", Value::function("joiner", [](Interpreter&, CallArgs& a) {
          const std::string sep = a.get(0, "sep", Value(", ")).to_str();
          auto used = std::make_shared<bool>(false);
          return Value::function("joiner", [sep, used](Interpreter&, CallArgs&) {
            if (!*used) {
              *used = true;
              return Value("");
            }
            return Value(sep);
          });
        }));
}

// strftime_now's default: the local time now, formatted by the C library's strftime.
inline std::string strftime_local_now(const std::string& fmt) {
  if (fmt.size() > 256) eval_fail("strftime_now: format too long");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
#if defined(_WIN32)
  localtime_s(&tm, &now);
#else
  localtime_r(&now, &tm);
#endif
  char buf[1024];
  const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  if (n == 0 && !fmt.empty()) return std::string();
  return std::string(buf, n);
}

}  // namespace jinja
}  // namespace edgellm
