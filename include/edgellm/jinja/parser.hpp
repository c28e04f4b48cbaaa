// The Jinja2 lexer and parser: template source -> a tree of statements and expressions, with
// Hugging Face's settings (trim_blocks, lstrip_blocks, loop controls) and Jinja2's grammar and
// precedence (jinja2/lexer.py, jinja2/parser.py: filters and tests bind tighter than arithmetic,
// `x if c` without else, chained comparisons, `**` left-associative, adjacent strings joined).
#pragma once
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/jinja/value.hpp"

namespace edgellm {
namespace jinja {

// ---- tokens ------------------------------------------------------------------------------------
enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Data: the text; Name / Op: the spelling; String: the decoded value
  int line;
  int64_t ival = 0;
  double fval = 0;
};

struct Limits {
  size_t max_source = 1 << 20;           // template bytes
  int max_nesting = 128;                 // blocks and expressions nested in the source
  size_t max_output = 32u << 20;         // bytes of rendered text (also any one string value)
  uint64_t max_steps = 20'000'000;       // evaluated nodes and loop iterations
  int max_call_depth = 64;               // macro calls inside macro calls
  int64_t max_range = 100000;            // range() length, as Jinja2's sandbox
};

namespace lex_detail {

inline bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool name_char(char c) { return name_start(c) || is_digit(c); }

// Python's \s over a UTF-8 string: length of the whitespace run starting at i.
inline size_t space_run(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size()) {
    size_t k = j;
    if (!py::is_space(py::next_cp(s, k))) break;
    j = k;
  }
  return j - i;
}
// str.rstrip() of Unicode whitespace.
inline std::string_view rstrip(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t b = e - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    size_t k = b;
    if (!py::is_space(py::next_cp(s, k)) || k != e) break;
    e = b;
  }
  return s.substr(0, e);
}
inline int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace lex_detail

[[noreturn]] inline void syntax_error(int line, const std::string& msg) { throw TemplateError(msg, line, false); }

// Source -> tokens. Newlines are normalized to \n and one trailing newline dropped (Jinja2's
// keep_trailing_newline=False).
inline std::vector<Token> tokenize(std::string_view source_in, const Limits& lim) {
  using namespace lex_detail;
  if (source_in.size() > lim.max_source)
    syntax_error(0, "template is " + std::to_string(source_in.size()) + " bytes, more than the limit of " +
                        std::to_string(lim.max_source));
  std::string src;
  src.reserve(source_in.size());
  for (size_t i = 0; i < source_in.size(); ++i) {
    if (source_in[i] == '\r') {
      src += '\n';
      if (i + 1 < source_in.size() && source_in[i + 1] == '\n') ++i;
    } else {
      src += source_in[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Token> toks;
  const size_t n = src.size();
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  auto emit_data = [&](std::string_view text, int at) {
    if (!text.empty()) toks.push_back(Token{Tok::Data, std::string(text), at});
  };
  // The text before a tag, stripped as the tag's sign and lstrip_blocks say.
  auto strip_before = [&](std::string_view text, char sign, bool is_var) -> std::string_view {
    if (sign == '-') return rstrip(text);
    if (sign != '+' && !is_var) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size() && space_run(text, l_pos) == text.size() - l_pos)
        return text.substr(0, l_pos);
    }
    return text;
  };
  // "{%" sign? ws* word ws* ("-%}" ws* | "%}") at p: the end offset, or npos.
  auto match_tag_word = [&](size_t p, const char* word, char* sign_out, bool* strip_after) -> size_t {
    if (src.compare(p, 2, "{%") != 0) return std::string::npos;
    size_t q = p + 2;
    char sign = 0;
    if (q < n && (src[q] == '-' || src[q] == '+')) sign = src[q++];
    q += space_run(src, q);
    const size_t wl = std::strlen(word);
    if (src.compare(q, wl, word) != 0 || (q + wl < n && name_char(src[q + wl]))) return std::string::npos;
    q += wl;
    q += space_run(src, q);
    bool strip = false;
    if (q < n && src[q] == '-' && src.compare(q + 1, 2, "%}") == 0) {
      strip = true;
      q += 3;
    } else if (q < n && src[q] == '+' && src.compare(q + 1, 2, "%}") == 0) {
      q += 3;
    } else if (src.compare(q, 2, "%}") == 0) {
      q += 2;
    } else {
      return std::string::npos;
    }
    if (sign_out) *sign_out = sign;
    if (strip_after) *strip_after = strip;
    return q;
  };

  while (pos < n) {
    size_t k = pos;
    while (true) {
      k = src.find('{', k);
      if (k == std::string::npos || k + 1 >= n) {
        k = std::string::npos;
        break;
      }
      const char c = src[k + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++k;
    }
    if (k == std::string::npos) {
      emit_data(std::string_view(src).substr(pos), line);
      break;
    }
    const std::string_view text = std::string_view(src).substr(pos, k - pos);
    const int text_line = line;
    line += count_lines(text);
    const char opener = src[k + 1];
    const char sign = (k + 2 < n && (src[k + 2] == '-' || src[k + 2] == '+')) ? src[k + 2] : 0;
    emit_data(strip_before(text, sign, opener == '{'), text_line);
    line_starting = false;

    // {% raw %} ... {% endraw %}: the text between as data.
    bool raw_strip = false;
    const size_t raw_end = opener == '%' ? match_tag_word(k, "raw", nullptr, &raw_strip) : std::string::npos;
    if (raw_end != std::string::npos) {
      line += count_lines(std::string_view(src).substr(k, raw_end - k));
      size_t body = raw_end;
      if (raw_strip) body += space_run(src, body);
      size_t q = body, end_at = std::string::npos, after = 0;
      char end_sign = 0;
      while ((q = src.find("{%", q)) != std::string::npos) {
        after = match_tag_word(q, "endraw", &end_sign, nullptr);
        if (after != std::string::npos) {
          end_at = q;
          break;
        }
        q += 2;
      }
      if (end_at == std::string::npos) syntax_error(line, "missing end of raw directive");
      const std::string_view raw_text = std::string_view(src).substr(body, end_at - body);
      emit_data(strip_before(raw_text, end_sign, false), line);
      line += count_lines(std::string_view(src).substr(body, after - body));
      pos = after;
      // The endraw tag's own end: "-%}" strips following whitespace, "%}" takes one newline.
      const std::string_view tag = std::string_view(src).substr(end_at, after - end_at);
      if (tag.size() >= 3 && tag[tag.size() - 3] == '-') {
        const size_t w = space_run(src, pos);
        line += count_lines(std::string_view(src).substr(pos, w));
        pos += w;
      } else if (!(tag.size() >= 3 && tag[tag.size() - 3] == '+') && pos < n && src[pos] == '\n') {
        ++pos;
        ++line;
      }
      line_starting = pos > 0 && src[pos - 1] == '\n';
      continue;
    }

    if (opener == '#') {
      // Comment: up to the first "#}"; "-#}" strips the whitespace after, "#}" takes one newline.
      const size_t e = src.find("#}", k + 2 + (sign ? 1 : 0));
      if (e == std::string::npos) syntax_error(line, "missing end of comment tag");
      line += count_lines(std::string_view(src).substr(k, e + 2 - k));
      pos = e + 2;
      const char before = src[e - 1];
      if (before == '-' && e - 1 >= k + 2) {
        const size_t w = space_run(src, pos);
        line += count_lines(std::string_view(src).substr(pos, w));
        pos += w;
      } else if (!(before == '+' && e - 1 >= k + 2) && pos < n && src[pos] == '\n') {
        ++pos;
        ++line;
      }
      line_starting = pos > 0 && src[pos - 1] == '\n';
      continue;
    }

    const bool is_var = opener == '{';
    toks.push_back(Token{is_var ? Tok::VarBegin : Tok::BlockBegin, "", line});
    size_t p = k + 2 + (sign ? 1 : 0);
    std::vector<char> balance;
    bool closed = false;
    while (p < n) {
      // Whitespace between tokens.
      if (ascii_space(src[p])) {
        if (src[p] == '\n') ++line;
        ++p;
        continue;
      }
      // The tag's end (not inside brackets).
      if (balance.empty()) {
        const char* end = is_var ? "}}" : "%}";
        size_t after = std::string::npos;
        bool strip = false, keep = false;
        if (src[p] == '-' && src.compare(p + 1, 2, end) == 0) after = p + 3, strip = true;
        else if (!is_var && src[p] == '+' && src.compare(p + 1, 2, end) == 0) after = p + 3, keep = true;
        else if (src.compare(p, 2, end) == 0) after = p + 2;
        if (after != std::string::npos) {
          toks.push_back(Token{is_var ? Tok::VarEnd : Tok::BlockEnd, "", line});
          p = after;
          if (strip) {
            const size_t w = space_run(src, p);
            line += count_lines(std::string_view(src).substr(p, w));
            p += w;
          } else if (!is_var && !keep && p < n && src[p] == '\n') {
            ++p;
            ++line;
          }
          closed = true;
          break;
        }
      }
      const char c = src[p];
      // Numbers: floats (1.5, 1e3, 1_000.5), integers (1_000, 0x1F, 0o17, 0b101).
      if (is_digit(c)) {
        size_t q = p;
        auto digits = [&](size_t& r) {
          const size_t s0 = r;
          while (r < n && (is_digit(src[r]) || (src[r] == '_' && r + 1 < n && is_digit(src[r + 1]) && r > s0))) ++r;
          return r > s0;
        };
        if (c == '0' && p + 1 < n && std::strchr("xXoObB", src[p + 1]) && src[p + 1] != 0) {
          const char kind = char(src[p + 1] | 0x20);
          const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
          q = p + 2;
          int64_t v = 0;
          size_t nd = 0;
          while (q < n) {
            const char d = src[q];
            int dv = -1;
            if (is_digit(d)) dv = d - '0';
            else if (d >= 'a' && d <= 'f') dv = d - 'a' + 10;
            else if (d >= 'A' && d <= 'F') dv = d - 'A' + 10;
            else if (d == '_') { ++q; continue; }
            if (dv < 0 || dv >= base) break;
            if (v > (INT64_MAX - dv) / base) syntax_error(line, "integer literal too large");
            v = v * base + dv;
            ++q;
            ++nd;
          }
          if (nd == 0) syntax_error(line, "invalid integer literal");
          Token t{Tok::Int, src.substr(p, q - p), line};
          t.ival = v;
          toks.push_back(std::move(t));
          p = q;
          continue;
        }
        digits(q);
        bool is_float = false;
        size_t r = q;
        if (r + 1 < n && src[r] == '.' && is_digit(src[r + 1])) {
          ++r;
          digits(r);
          is_float = true;
          q = r;
        }
        if (q < n && (src[q] == 'e' || src[q] == 'E')) {
          size_t e = q + 1;
          if (e < n && (src[e] == '+' || src[e] == '-')) ++e;
          if (e < n && is_digit(src[e])) {
            digits(e);
            q = e;
            is_float = true;
          }
        }
        std::string lit;
        for (size_t i = p; i < q; ++i)
          if (src[i] != '_') lit += src[i];
        Token t{is_float ? Tok::Float : Tok::Int, src.substr(p, q - p), line};
        if (is_float) {
          t.fval = std::strtod(lit.c_str(), nullptr);
        } else {
          errno = 0;
          t.ival = std::strtoll(lit.c_str(), nullptr, 10);
          if (errno == ERANGE) syntax_error(line, "integer literal too large: " + lit);
        }
        toks.push_back(std::move(t));
        p = q;
        continue;
      }
      if (name_start(c)) {
        size_t q = p;
        while (q < n && name_char(src[q])) ++q;
        toks.push_back(Token{Tok::Name, src.substr(p, q - p), line});
        p = q;
        continue;
      }
      if (c == '\'' || c == '"') {
        // Python's unicode-escape decoding of the literal's body; unknown escapes stay as written.
        const int start_line = line;
        size_t q = p + 1;
        std::string v;
        while (true) {
          if (q >= n) syntax_error(start_line, "unexpected end of string");
          const char d = src[q];
          if (d == c) {
            ++q;
            break;
          }
          if (d == '\n') ++line;
          if (d != '\\') {
            v += d;
            ++q;
            continue;
          }
          if (q + 1 >= n) syntax_error(start_line, "unexpected end of string");
          const char e = src[q + 1];
          q += 2;
          auto hex = [&](int count) -> uint32_t {
            uint32_t x = 0;
            for (int i = 0; i < count; ++i) {
              if (q >= n || !std::isxdigit(static_cast<unsigned char>(src[q])))
                syntax_error(line, "truncated \\" + std::string(1, e) + " escape in a string");
              const char h = src[q++];
              x = x * 16 + uint32_t(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            return x;
          };
          switch (e) {
            case '\n': ++line; break;  // line continuation
            case '\\': v += '\\'; break;
            case '\'': v += '\''; break;
            case '"': v += '"'; break;
            case 'a': v += '\a'; break;
            case 'b': v += '\b'; break;
            case 'f': v += '\f'; break;
            case 'n': v += '\n'; break;
            case 'r': v += '\r'; break;
            case 't': v += '\t'; break;
            case 'v': v += '\v'; break;
            case 'x': py::append_cp(v, hex(2)); break;
            case 'u': py::append_cp(v, hex(4)); break;
            case 'U': {
              const uint32_t cp = hex(8);
              if (cp > 0x10FFFF) syntax_error(line, "\\U escape out of range");
              py::append_cp(v, cp);
              break;
            }
            default:
              if (e >= '0' && e <= '7') {
                uint32_t o = uint32_t(e - '0');
                for (int i = 0; i < 2 && q < n && src[q] >= '0' && src[q] <= '7'; ++i) o = o * 8 + uint32_t(src[q++] - '0');
                py::append_cp(v, o);
              } else {
                v += '\\';
                v += e;
                if (e == '\n') ++line;
              }
          }
        }
        toks.push_back(Token{Tok::String, std::move(v), start_line});
        p = q;
        continue;
      }
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                         "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
      bool matched = false;
      for (const char* op : kOps) {
        const size_t ol = std::strlen(op);
        if (src.compare(p, ol, op) == 0) {
          if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
            balance.push_back(op[0]);
            if (int(balance.size()) > lim.max_nesting) syntax_error(line, "brackets nested too deeply");
          } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            const char want = op[0] == ')' ? '(' : op[0] == ']' ? '[' : '{';
            if (balance.empty()) syntax_error(line, std::string("unexpected '") + op[0] + "'");
            if (balance.back() != want)
              syntax_error(line, std::string("unexpected '") + op[0] + "', expected '" +
                                     (balance.back() == '(' ? ")" : balance.back() == '[' ? "]" : "}") + "'");
            balance.pop_back();
          }
          toks.push_back(Token{Tok::Op, op, line});
          p += ol;
          matched = true;
          break;
        }
      }
      if (!matched) {
        if (c == '!' ) syntax_error(line, "unexpected '!'");
        std::string shown;
        size_t q = p;
        py::append_cp(shown, py::next_cp(src, q));
        syntax_error(line, "unexpected char '" + shown + "'");
      }
    }
    if (!closed)
      syntax_error(line, is_var ? "unexpected end of template, expected 'end of print statement'"
                                : "unexpected end of template, expected 'end of statement block'");
    pos = p;
    line_starting = pos > 0 && src[pos - 1] == '\n';
  }
  toks.push_back(Token{Tok::Eof, "", line});
  return toks;
}

// ---- the tree ----------------------------------------------------------------------------------
struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  enum Kind : uint8_t {
    Const, Name, ListLit, TupleLit, DictLit, Getattr, Getitem, Slice, Call, Filter, Test,
    Not, Neg, Pos, Binary, And, Or, Compare, CondExpr, Concat
  };
  Kind kind;
  int line;
  std::string name;         // Name, Getattr's attribute, Filter / Test name, Binary op
  Value value;              // Const
  std::vector<ExprP> args;  // operands; Call / Filter / Test: args[0] is the callee / operand
  std::vector<std::pair<std::string, ExprP>> kwargs;
  std::vector<std::string> ops;  // Compare: the operators between args
  bool negated = false;          // Test: `is not`
  Expr(Kind k, int l) : kind(k), line(l) {}
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct Stmt {
  enum Kind : uint8_t { Output, Print, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue };
  Kind kind;
  int line;
  std::string text;                 // Output; Macro name
  ExprP expr;                       // Print / If test / For iterable / Set value / CallBlock call
  ExprP cond;                       // For: the `if` filter
  ExprP target;                     // For / Set targets: a Name, a TupleLit of Names, or Getattr (ns.attr)
  ExprP filter;                     // SetBlock / FilterBlock: a Filter chain whose innermost operand is empty
  Body body, else_body;
  std::vector<std::string> params;  // Macro / CallBlock parameters
  std::vector<ExprP> defaults;      // their defaults (nullptr: none)
  std::vector<std::pair<ExprP, ExprP>> withs;  // With: targets and values
  Stmt(Kind k, int l) : kind(k), line(l) {}
};

// ---- parser --------------------------------------------------------------------------------------
class Parser {
 public:
  Parser(std::vector<Token> toks, const Limits& lim) : t_(std::move(toks)), lim_(lim) {}

  Body parse() {
    Body body = subparse({});
    if (cur().type != Tok::Eof) fail("unexpected token");
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  const Limits& lim_;
  int depth_ = 0;
  std::vector<std::string> open_blocks_;  // for "unexpected 'endfor'" messages

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& pp) : p(pp) {
      if (++p.depth_ > p.lim_.max_nesting) p.fail("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  [[noreturn]] void fail(const std::string& msg) const { syntax_error(cur().line, msg); }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* nm) const { return cur().type == Tok::Name && cur().text == nm; }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "begin of print statement";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "begin of statement block";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::Eof: return "end of template";
      case Tok::String: return "string";
      case Tok::Int: return "integer";
      case Tok::Float: return "float";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected a name, got " + describe(cur()));
    std::string s = cur().text;
    next();
    return s;
  }

  // Statements until a block whose first name is one of `ends` (left current: that name).
  Body subparse(const std::vector<const char*>& ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          fail("unexpected end of template: the '" + (open_blocks_.empty() ? std::string("?") : open_blocks_.back()) +
               "' block needs " + want);
        }
        return body;
      }
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>(Stmt::Output, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt::Print, t.line);
        s->expr = parse_tuple(true, {});
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name)
          for (const char* e : ends)
            if (cur().text == e) return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After the header: expect %}, parse the body to one of `ends`; current is then the end name.
  Body parse_block_body(const std::vector<const char*>& ends) {
    expect(Tok::BlockEnd, "end of statement block");
    return subparse(ends);
  }
  void end_block(const char* endname) {
    if (!is_name(endname)) fail(std::string("expected '") + endname + "'");
    next();
    expect(Tok::BlockEnd, "end of statement block");
  }

  StmtP parse_statement() {
    DepthGuard g(*this);
    if (cur().type != Tok::Name) fail("tag name expected");
    const std::string tag = cur().text;
    const int line = cur().line;
    if (tag == "for") return parse_for();
    if (tag == "if") return parse_if();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "break" || tag == "continue") {
      next();
      expect(Tok::BlockEnd, "end of statement block");
      return std::make_unique<Stmt>(tag == "break" ? Stmt::Break : Stmt::Continue, line);
    }
    static const char* const kEnds[] = {"endfor", "endif", "elif", "else", "endset", "endmacro", "endcall",
                                        "endfilter", "endwith", "endraw"};
    for (const char* e : kEnds)
      if (tag == e) {
        std::string msg = "unexpected '" + tag + "'";
        if (!open_blocks_.empty()) msg += " (the innermost open block is '" + open_blocks_.back() + "')";
        fail(msg);
      }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "block")
      fail("tag '" + tag + "' is not supported (a chat template has no other templates to load)");
    fail("encountered unknown tag '" + tag + "'");
  }

  struct OpenBlock {
    Parser& p;
    OpenBlock(Parser& pp, const char* n) : p(pp) { p.open_blocks_.push_back(n); }
    ~OpenBlock() { p.open_blocks_.pop_back(); }
  };

  StmtP parse_for() {
    auto s = std::make_unique<Stmt>(Stmt::For, cur().line);
    OpenBlock ob(*this, "for");
    next();
    s->target = parse_assign_target(false, {"in"});
    if (!is_name("in")) fail("expected 'in', got " + describe(cur()));
    next();
    s->expr = parse_tuple(false, {"recursive"});
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) fail("recursive for loops are not supported");
    s->body = parse_block_body({"endfor", "else"});
    if (is_name("else")) {
      next();
      s->else_body = parse_block_body({"endfor"});
    }
    end_block("endfor");
    return s;
  }

  StmtP parse_if() {
    auto s = std::make_unique<Stmt>(Stmt::If, cur().line);
    OpenBlock ob(*this, "if");
    next();
    s->expr = parse_tuple(false, {});
    s->body = parse_block_body({"elif", "else", "endif"});
    Stmt* tail = s.get();
    while (true) {
      if (is_name("elif")) {
        auto e = std::make_unique<Stmt>(Stmt::If, cur().line);
        next();
        e->expr = parse_tuple(false, {});
        e->body = parse_block_body({"elif", "else", "endif"});
        Stmt* raw = e.get();
        tail->else_body.push_back(std::move(e));
        tail = raw;
      } else if (is_name("else")) {
        next();
        tail->else_body = parse_block_body({"endif"});
      } else {
        break;
      }
    }
    end_block("endif");
    return s;
  }

  StmtP parse_set() {
    const int line = cur().line;
    next();
    ExprP target = parse_assign_target(true, {});
    if (is_op("=")) {
      next();
      auto s = std::make_unique<Stmt>(Stmt::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {});
      expect(Tok::BlockEnd, "end of statement block");
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::SetBlock, line);
    OpenBlock ob(*this, "set");
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter_chain(nullptr);
    s->body = parse_block_body({"endset"});
    end_block("endset");
    return s;
  }

  // Items separated by commas up to the operator `close` (a trailing comma allowed), each read by
  // item(); consumes `close`.
  template <class Item>
  void comma_list(const char* close, Item item) {
    for (bool first = true; !is_op(close); first = false) {
      if (!first) expect_op(",");
      if (is_op(close)) break;
      item();
    }
    next();
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    comma_list(")", [&] {
      s.params.push_back(expect_name());
      if (is_op("=")) {
        next();
        s.defaults.push_back(parse_expression(true));
      } else {
        s.defaults.push_back(nullptr);
      }
    });
  }

  // A block with one body, `{% tag header %}body{% endtag %}`: header(stmt) parses what follows the tag.
  template <class Header>
  StmtP one_body_block(Stmt::Kind kind, const char* tag, const char* endtag, Header header) {
    auto s = std::make_unique<Stmt>(kind, cur().line);
    OpenBlock ob(*this, tag);
    next();
    header(*s);
    s->body = parse_block_body({endtag});
    end_block(endtag);
    return s;
  }
  StmtP parse_macro() {
    return one_body_block(Stmt::Macro, "macro", "endmacro", [&](Stmt& s) {
      s.text = expect_name();
      parse_signature(s);
    });
  }
  StmtP parse_call_block() {
    return one_body_block(Stmt::CallBlock, "call", "endcall", [&](Stmt& s) {
      if (is_op("(")) parse_signature(s);
      s.expr = parse_expression(true);
      if (s.expr->kind != Expr::Call) fail("expected call");
    });
  }
  StmtP parse_filter_block() {
    return one_body_block(Stmt::FilterBlock, "filter", "endfilter", [&](Stmt& s) {
      s.filter = parse_filter_chain(nullptr, /*start_with_pipe=*/false);
    });
  }
  StmtP parse_with() {
    return one_body_block(Stmt::With, "with", "endwith", [&](Stmt& s) {
      while (cur().type != Tok::BlockEnd) {
        if (!s.withs.empty()) expect_op(",");
        ExprP target = parse_assign_target(false, {});
        expect_op("=");
        s.withs.emplace_back(std::move(target), parse_expression(true));
      }
    });
  }

  // A name, `ns.attr` (with_namespace), or names separated by commas (a tuple).
  ExprP parse_assign_target(bool with_namespace, const std::vector<const char*>& extra_end) {
    const int line = cur().line;
    if (with_namespace && cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
      auto obj = std::make_unique<Expr>(Expr::Name, line);
      obj->name = expect_name();
      next();  // '.'
      auto e = std::make_unique<Expr>(Expr::Getattr, line);
      e->name = expect_name();
      e->args.push_back(std::move(obj));
      return e;
    }
    std::vector<ExprP> names;
    bool tuple = false;
    while (true) {
      if (is_op("(")) {
        next();
        names.push_back(parse_assign_target(false, {}));
        expect_op(")");
      } else {
        auto nm = std::make_unique<Expr>(Expr::Name, cur().line);
        nm->name = expect_name();
        if (nm->name == "true" || nm->name == "false" || nm->name == "none" || nm->name == "True" ||
            nm->name == "False" || nm->name == "None")
          fail("cannot assign to '" + nm->name + "'");
        names.push_back(std::move(nm));
      }
      if (!is_op(",")) break;
      tuple = true;
      next();
      bool end = cur().type != Tok::Name && !is_op("(");
      for (const char* e : extra_end)
        if (is_name(e)) end = true;
      if (end) break;
    }
    if (!tuple) return std::move(names[0]);
    auto t = std::make_unique<Expr>(Expr::TupleLit, line);
    t->args = std::move(names);
    return t;
  }

  // ---- expressions ----
  ExprP parse_tuple(bool with_condexpr, const std::vector<const char*>& extra_end, bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprP> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!is_op(",")) break;
        next();
        comma = true;
      }
      // End of the tuple: a closing token or an extra end name.
      if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof || is_op(")") ||
          is_op("]") || is_op("}"))
        break;
      bool end = false;
      for (const char* e : extra_end)
        if (is_name(e)) end = true;
      if (end) break;
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
    }
    if (!comma) {
      if (items.empty()) {
        if (explicit_parens) {
          auto t = std::make_unique<Expr>(Expr::TupleLit, line);
          return t;
        }
        fail("expected an expression, got " + describe(cur()));
      }
      return std::move(items[0]);
    }
    auto t = std::make_unique<Expr>(Expr::TupleLit, line);
    t->args = std::move(items);
    return t;
  }

  ExprP parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprP parse_condexpr() {
    ExprP e1 = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      ExprP test = parse_or();
      ExprP other;
      if (is_name("else")) {
        next();
        other = parse_condexpr();
      }
      auto c = std::make_unique<Expr>(Expr::CondExpr, line);
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(e1));
      c->args.push_back(std::move(other));
      e1 = std::move(c);
    }
    return e1;
  }

  ExprP binary(Expr::Kind k, const std::string& op, ExprP a, ExprP b, int line) {
    auto e = std::make_unique<Expr>(k, line);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // A left-associative level: operand (op operand)*, each op a name ("or") or an operator ("+").
  ExprP left_assoc(ExprP (Parser::*operand)(), Expr::Kind k, std::initializer_list<std::string_view> ops) {
    ExprP l = (this->*operand)();
    for (;;) {
      const Token& t = cur();
      if ((t.type != Tok::Name && t.type != Tok::Op) || std::find(ops.begin(), ops.end(), t.text) == ops.end())
        return l;
      const std::string op = t.text;
      const int line = t.line;
      next();
      l = binary(k, op, std::move(l), (this->*operand)(), line);
    }
  }
  ExprP parse_or() { return left_assoc(&Parser::parse_and, Expr::Or, {"or"}); }
  ExprP parse_and() { return left_assoc(&Parser::parse_not, Expr::And, {"and"}); }
  ExprP parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      const int line = cur().line;
      next();
      auto e = std::make_unique<Expr>(Expr::Not, line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    const int line = cur().line;
    ExprP first = parse_math1();
    std::unique_ptr<Expr> cmp;
    while (true) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(Expr::Compare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprP parse_math1() { return left_assoc(&Parser::parse_concat, Expr::Binary, {"+", "-"}); }
  ExprP parse_concat() {
    const int line = cur().line;
    ExprP first = parse_math2();
    if (!is_op("~")) return first;
    auto c = std::make_unique<Expr>(Expr::Concat, line);
    c->args.push_back(std::move(first));
    while (is_op("~")) {
      next();
      c->args.push_back(parse_math2());
    }
    return c;
  }
  ExprP parse_math2() { return left_assoc(&Parser::parse_pow, Expr::Binary, {"*", "/", "//", "%"}); }
  ExprP parse_pow() { return left_assoc(&Parser::parse_filtered, Expr::Binary, {"**"}); }
  ExprP parse_filtered() { return parse_unary(true); }
  ExprP parse_unary(bool with_filter) {
    DepthGuard g(*this);
    const int line = cur().line;
    ExprP node;
    if (is_op("-") || is_op("+")) {
      const bool neg = cur().text == "-";
      next();
      node = std::make_unique<Expr>(neg ? Expr::Neg : Expr::Pos, line);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprP parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::Name) {
      auto e = std::make_unique<Expr>(Expr::Const, line);
      if (t.text == "true" || t.text == "True") e->value = Value(true);
      else if (t.text == "false" || t.text == "False") e->value = Value(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Name;
        e->name = t.text;
      }
      next();
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().text;
        next();
      }
      auto e = std::make_unique<Expr>(Expr::Const, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      auto e = std::make_unique<Expr>(Expr::Const, line);
      e->value = t.type == Tok::Int ? Value(t.ival) : Value(t.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprP e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = std::make_unique<Expr>(Expr::ListLit, line);
      comma_list("]", [&] { e->args.push_back(parse_expression(true)); });
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = std::make_unique<Expr>(Expr::DictLit, line);
      comma_list("}", [&] {
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      });
      return e;
    }
    fail("unexpected " + describe(t));
  }

  // What may follow an operand: subscripts and calls (postfix), or, after them, filters, tests and
  // calls (filters: Jinja's parse_filter_expr; a subscript there is a syntax error, as in Jinja).
  ExprP parse_trailers(ExprP node, bool filters) {
    for (;;) {
      if (!filters && (is_op(".") || is_op("["))) {
        node = parse_subscript(std::move(node));
      } else if (filters && is_op("|")) {
        node = parse_filter_chain(std::move(node));
      } else if (filters && is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }
  ExprP parse_postfix(ExprP node) { return parse_trailers(std::move(node), false); }
  ExprP parse_filter_expr(ExprP node) { return parse_trailers(std::move(node), true); }

  ExprP parse_subscript(ExprP node) {
    const int line = cur().line;
    if (is_op(".")) {
      next();
      if (cur().type == Tok::Name) {
        auto e = std::make_unique<Expr>(Expr::Getattr, line);
        e->name = cur().text;
        next();
        e->args.push_back(std::move(node));
        return e;
      }
      if (cur().type != Tok::Int) fail("expected name or number after '.'");
      auto idx = std::make_unique<Expr>(Expr::Const, line);
      idx->value = Value(cur().ival);
      next();
      auto e = std::make_unique<Expr>(Expr::Getitem, line);
      e->args.push_back(std::move(node));
      e->args.push_back(std::move(idx));
      return e;
    }
    next();  // '['
    std::vector<ExprP> parts;
    while (!is_op("]")) {
      if (!parts.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      parts.push_back(parse_subscribed());
    }
    next();
    ExprP arg;
    if (parts.size() == 1) {
      arg = std::move(parts[0]);
    } else {
      if (parts.empty()) fail("expected a subscript");
      arg = std::make_unique<Expr>(Expr::TupleLit, line);
      arg->args = std::move(parts);
    }
    if (arg->kind == Expr::Slice) {
      arg->args.insert(arg->args.begin(), std::move(node));
      return arg;
    }
    auto e = std::make_unique<Expr>(Expr::Getitem, line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(arg));
    return e;
  }

  // An index or a slice [start]:[stop][:[step]] (Slice's args: start, stop, step, each may be null).
  ExprP parse_subscribed() {
    const int line = cur().line;
    ExprP start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto s = std::make_unique<Expr>(Expr::Slice, line);
    s->args.push_back(std::move(start));
    if (!is_op("]") && !is_op(",") && !is_op(":")) s->args.push_back(parse_expression(true));
    else s->args.push_back(nullptr);
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) s->args.push_back(parse_expression(true));
      else s->args.push_back(nullptr);
    } else {
      s->args.push_back(nullptr);
    }
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprP parse_call(ExprP node) {
    auto e = std::make_unique<Expr>(Expr::Call, cur().line);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  // `| name[(args)]` repeated; with a null operand for filter blocks and block sets.
  ExprP parse_filter_chain(ExprP node, bool start_with_pipe = true) {
    bool first = true;
    while (first ? (!start_with_pipe || is_op("|")) : is_op("|")) {
      if (!(first && !start_with_pipe)) next();  // '|'
      first = false;
      auto e = std::make_unique<Expr>(Expr::Filter, cur().line);
      e->name = expect_name();
      while (is_op(".")) {
        next();
        e->name += "." + expect_name();
      }
      e->args.push_back(std::move(node));
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprP parse_test(ExprP node) {
    auto e = std::make_unique<Expr>(Expr::Test, cur().line);
    next();  // 'is'
    if (is_name("not")) {
      next();
      e->negated = true;
    }
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    e->args.push_back(std::move(node));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Int || t.type == Tok::Float ||
                is_op("[") || is_op("{")) &&
               !(is_name("else") || is_name("or") || is_name("and"))) {
      if (is_name("is")) fail("you cannot chain multiple tests with is");
      ExprP arg = parse_primary();
      e->args.push_back(parse_postfix(std::move(arg)));
    }
    return e;
  }
};

inline Body parse_template(std::string_view source, const Limits& lim) {
  Parser p(tokenize(source, lim), lim);
  return p.parse();
}

}  // namespace jinja
}  // namespace edgellm
