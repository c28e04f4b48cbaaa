// GBNF grammars (llama.cpp's grammars/README.md syntax): the parser and the compiled form the
// matcher runs on. Standard library and core/ only; no vocabulary, no sampler.
//
// The compiled form is llama.cpp's: every rule is a flat list of elements, alternatives split by
// Alt, ended by End; repetitions and groups become generated rules (S* -> S' ::= S S' | ), so
// both engines accept the same strings. Positions are indices into one element array.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/core/json.hpp"

namespace edgellm {

enum class GType : uint8_t {
  End,           // end of a rule
  Alt,           // start of the next alternative
  RuleRef,       // value: rule id
  Char,          // value: code point; starts a positive class (a literal char is a 1-char class)
  CharNot,       // value: code point; starts a negated class [^...]
  CharRngUpper,  // value: upper bound of a range whose lower bound is the previous element
  CharAlt,       // value: one more code point (or range start) of the current class
  CharAny,       // "." any code point
};

struct GElem {
  GType type;
  uint32_t value;
};

// One character class as the matcher tests it: ranges, negation, an ASCII bitmap for speed.
struct GTerminal {
  bool negated = false;
  uint64_t ascii[2] = {0, 0};                   // code points < 128 that match (negation applied)
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // [lo, hi] as written (negation not applied)
  uint32_t next = 0;                            // position after the class; kNoPos: end of alternative

  bool matches(uint32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    bool in = false;
    for (const auto& r : ranges) in = in || (r.first <= cp && cp <= r.second);
    return in != negated;
  }
  // For a token that ends inside a UTF-8 sequence: could the code points [lo, hi] it may still
  // become match? llama.cpp's answer (llama_grammar_match_partial_char), kept for equal masks:
  // a negated class refuses any span it touches.
  bool may_match(uint32_t lo, uint32_t hi) const {
    for (const auto& r : ranges)
      if (r.first <= hi && lo <= r.second) return !negated;
    return negated;
  }
  // The exact answer, for pruning: some code point in [lo, hi] matches.
  bool can_match_some(uint32_t lo, uint32_t hi) const {
    if (!negated) return may_match(lo, hi);
    for (const auto& r : merged)
      if (r.first <= lo && hi <= r.second) return false;  // the whole span is excluded
    return true;
  }
  std::vector<std::pair<uint32_t, uint32_t>> merged;  // ranges sorted, overlapping/adjacent merged
};

class Grammar {
 public:
  static constexpr uint32_t kNoPos = 0xFFFFFFFFu;
  static constexpr uint64_t kMaxRepetition = 2000;   // as llama.cpp's MAX_REPETITION_THRESHOLD
  static constexpr size_t kMaxElements = 1u << 22;   // bounds memory on adversarial input

  // Parses GBNF text; throws Error with line and column on bad input.
  static Grammar parse(std::string_view text, std::string_view root = "root");

  uint32_t root() const { return root_; }
  size_t n_rules() const { return rule_start_.size(); }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }
  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  const GElem& elem(uint32_t pos) const { return elems_[pos]; }
  size_t n_elems() const { return elems_.size(); }
  bool is_end_of_seq(uint32_t pos) const {
    return elems_[pos].type == GType::End || elems_[pos].type == GType::Alt;
  }
  // The class starting at pos (pos must hold Char / CharNot / CharAny).
  const GTerminal& terminal(uint32_t pos) const { return terminals_[terminal_of_[pos]]; }
  bool is_terminal(uint32_t pos) const { return terminal_of_[pos] != kNoPos; }

  // GBNF text of the compiled rules (generated rules included), for debugging and tests.
  std::string to_string() const;

 private:
  friend class GbnfParser;
  void compile_terminals();
  void check_left_recursion(const std::vector<size_t>& rule_offsets, std::string_view text) const;

  std::vector<GElem> elems_;
  std::vector<uint32_t> rule_start_;
  std::vector<std::string> rule_names_;
  std::vector<GTerminal> terminals_;
  std::vector<uint32_t> terminal_of_;  // [n_elems] index into terminals_, kNoPos if none
  uint32_t root_ = 0;
};

namespace grammar_detail {

// "line L, column C" (1-based; the column counts code points) of byte offset `off`.
inline std::string where(std::string_view text, size_t off) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < off && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

// Decodes one UTF-8 sequence at s[i]; returns the byte length, 0 when invalid or truncated.
inline size_t decode_utf8(std::string_view s, size_t i, uint32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t v = len == 1 ? b0 : (b0 & (0x7F >> len));
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  return len;
}

using json_detail::append_utf8;

inline bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

}  // namespace grammar_detail

// Recursive-descent parser over the text, llama.cpp's grammar-parser structure with offsets kept
// so every error names a line and column.
class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar run(std::string_view root_name) {
    size_t pos = skip_space(0, true);
    while (pos < s_.size()) pos = parse_rule(pos);
    Grammar g;
    // Undefined rules: referenced but never given a definition.
    for (uint32_t id = 0; id < rules_.size(); ++id)
      if (!defined_[id])
        fail(first_ref_[id], "undefined rule '", names_[id], "'");
    auto root = ids_.find(std::string(root_name));
    if (root == ids_.end() || !defined_[root->second])
      throw_error("grammar: no '", root_name, "' rule (the grammar's start symbol)");
    g.root_ = root->second;
    std::vector<size_t> offsets(rules_.size());
    for (uint32_t id = 0; id < rules_.size(); ++id) {
      g.rule_start_.push_back(static_cast<uint32_t>(g.elems_.size()));
      g.elems_.insert(g.elems_.end(), rules_[id].begin(), rules_[id].end());
      offsets[id] = def_at_[id];
    }
    g.rule_names_ = names_;
    g.compile_terminals();
    g.check_left_recursion(offsets, s_);
    return g;
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(size_t off, Args&&... args) const {
    throw_error("grammar: ", std::forward<Args>(args)..., " at ", grammar_detail::where(s_, off));
  }
  char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }

  size_t skip_space(size_t pos, bool newline_ok) const {
    while (pos < s_.size()) {
      const char c = s_[pos];
      if (c == '#') {
        while (pos < s_.size() && s_[pos] != '\r' && s_[pos] != '\n') ++pos;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos;
      } else {
        break;
      }
    }
    return pos;
  }

  uint32_t symbol(const std::string& name, size_t ref_at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return new_rule(name, ref_at);
  }
  uint32_t new_rule(const std::string& name, size_t at_off) {
    const auto id = static_cast<uint32_t>(names_.size());
    ids_.emplace(name, id);
    names_.push_back(name);
    rules_.emplace_back();
    defined_.push_back(false);
    first_ref_.push_back(at_off);
    def_at_.push_back(at_off);
    return id;
  }
  uint32_t generated_rule(const std::string& base, size_t at_off) {
    const uint32_t id = new_rule(base + "_" + std::to_string(names_.size()), at_off);
    defined_[id] = true;
    return id;
  }
  void set_rule(uint32_t id, std::vector<GElem> rule) {
    n_elems_ += rule.size();
    if (n_elems_ > Grammar::kMaxElements) throw_error("grammar: too large (more than ", Grammar::kMaxElements, " elements)");
    rules_[id] = std::move(rule);
  }

  size_t parse_rule(size_t pos) {
    const size_t name_at = pos;
    size_t end = pos;
    while (grammar_detail::is_word_char(at(end))) ++end;
    if (end == pos) fail(pos, "expected a rule name");
    const std::string name(s_.substr(pos, end - pos));
    pos = skip_space(end, false);
    if (s_.substr(pos, 3) != "::=") fail(pos, "expected '::=' after rule name '", name, "'");
    const uint32_t id = symbol(name, name_at);
    if (defined_[id]) fail(name_at, "rule '", name, "' is defined twice");
    defined_[id] = true;
    def_at_[id] = name_at;
    pos = parse_alternates(skip_space(pos + 3, true), name, id, false);
    if (at(pos) == '\r') {
      pos += at(pos + 1) == '\n' ? 2 : 1;
    } else if (at(pos) == '\n') {
      ++pos;
    } else if (pos < s_.size()) {
      fail(pos, "expected newline or end of input, got '", s_[pos], "'");
    }
    return skip_space(pos, true);
  }

  size_t parse_alternates(size_t pos, const std::string& name, uint32_t id, bool nested) {
    if (++depth_ > kMaxNesting) fail(pos, "groups nested deeper than ", kMaxNesting);
    std::vector<GElem> rule;
    pos = parse_sequence(pos, name, rule, nested);
    while (at(pos) == '|') {
      rule.push_back({GType::Alt, 0});
      pos = parse_sequence(skip_space(pos + 1, true), name, rule, nested);
    }
    rule.push_back({GType::End, 0});
    set_rule(id, std::move(rule));
    --depth_;
    return pos;
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  uint32_t parse_char(size_t& pos) {
    if (pos >= s_.size()) fail(pos, "unexpected end of input");
    if (s_[pos] == '\\') {
      const char e = at(pos + 1);
      const size_t start = pos;
      pos += 2;
      switch (e) {
        case 'x': return parse_hex(pos, 2, start);
        case 'u': return parse_hex(pos, 4, start);
        case 'U': return parse_hex(pos, 8, start);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': return uint32_t(e);
        default:
          fail(start, "bad escape '\\", e == '\0' ? std::string() : std::string(1, e), "'");
      }
    }
    uint32_t cp = 0;
    const size_t len = grammar_detail::decode_utf8(s_, pos, &cp);
    if (len == 0) fail(pos, "invalid UTF-8");
    pos += len;
    return cp;
  }
  uint32_t parse_hex(size_t& pos, int n, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++pos) {
      const char c = at(pos);
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail(start, "bad escape: expected ", n, " hex digits");
      v = (v << 4) | uint32_t(d);
    }
    if (v > 0x10FFFF) fail(start, "bad escape: code point above U+10FFFF");
    return v;
  }
  uint64_t parse_int(size_t& pos) {
    const size_t start = pos;
    uint64_t v = 0;
    while (at(pos) >= '0' && at(pos) <= '9') {
      v = v * 10 + uint64_t(at(pos) - '0');
      if (v > 1000000000ull) fail(start, "number too large");
      ++pos;
    }
    if (pos == start) fail(pos, "expected an integer");
    return v;
  }

  size_t parse_sequence(size_t pos, const std::string& name, std::vector<GElem>& rule, bool nested) {
    size_t last_sym = rule.size();
    uint64_t n_prev_rules = 1;  // rules one repetition copies (llama.cpp's bound on nested {m,n})
    while (pos < s_.size()) {
      const char c = s_[pos];
      if (c == '"') {
        const size_t open = pos++;
        last_sym = rule.size();
        n_prev_rules = 1;
        while (at(pos) != '"') {
          if (pos >= s_.size() || at(pos) == '\n' || at(pos) == '\r') fail(open, "unterminated literal");
          rule.push_back({GType::Char, parse_char(pos)});
        }
        pos = skip_space(pos + 1, nested);
      } else if (c == '[') {
        const size_t open = pos++;
        GType start = GType::Char;
        if (at(pos) == '^') {
          ++pos;
          start = GType::CharNot;
        }
        last_sym = rule.size();
        n_prev_rules = 1;
        while (at(pos) != ']') {
          if (pos >= s_.size() || at(pos) == '\n' || at(pos) == '\r') fail(open, "unterminated character class");
          const uint32_t lo = parse_char(pos);
          rule.push_back({last_sym < rule.size() ? GType::CharAlt : start, lo});
          if (at(pos) == '-' && at(pos + 1) != ']' && pos + 1 < s_.size()) {
            const size_t range_at = pos;
            ++pos;
            const uint32_t hi = parse_char(pos);
            if (hi < lo) fail(range_at, "character range is backwards");
            rule.push_back({GType::CharRngUpper, hi});
          }
        }
        if (last_sym == rule.size()) fail(open, "empty character class");
        pos = skip_space(pos + 1, nested);
      } else if (grammar_detail::is_word_char(c)) {
        size_t end = pos;
        while (grammar_detail::is_word_char(at(end))) ++end;
        const uint32_t ref = symbol(std::string(s_.substr(pos, end - pos)), pos);
        last_sym = rule.size();
        n_prev_rules = 1;
        rule.push_back({GType::RuleRef, ref});
        pos = skip_space(end, nested);
      } else if (c == '(') {
        const size_t open = pos;
        pos = skip_space(pos + 1, true);
        const size_t n_before = names_.size();
        const uint32_t sub = generated_rule(name, open);
        pos = parse_alternates(pos, name, sub, true);
        n_prev_rules = std::max<uint64_t>(1, names_.size() - n_before);
        last_sym = rule.size();
        rule.push_back({GType::RuleRef, sub});
        if (at(pos) != ')') fail(open, "unclosed '('");
        pos = skip_space(pos + 1, nested);
      } else if (c == '.') {
        last_sym = rule.size();
        n_prev_rules = 1;
        rule.push_back({GType::CharAny, 0});
        pos = skip_space(pos + 1, nested);
      } else if (c == '*' || c == '+' || c == '?') {
        const size_t op = pos;
        pos = skip_space(pos + 1, nested);
        repeat(rule, last_sym, n_prev_rules, c == '+' ? 1 : 0, c == '?' ? 1 : kUnbounded, name, op);
      } else if (c == '{') {
        const size_t op = pos;
        pos = skip_space(pos + 1, nested);
        const uint64_t lo = parse_int(pos);
        pos = skip_space(pos, nested);
        uint64_t hi = kUnbounded;
        if (at(pos) == '}') {
          hi = lo;
        } else if (at(pos) == ',') {
          pos = skip_space(pos + 1, nested);
          if (at(pos) >= '0' && at(pos) <= '9') {
            hi = parse_int(pos);
            pos = skip_space(pos, nested);
          }
          if (at(pos) != '}') fail(pos, "expected '}' to close the repetition");
        } else {
          fail(pos, "expected ',' or '}' in the repetition");
        }
        pos = skip_space(pos + 1, nested);
        if (lo > Grammar::kMaxRepetition || (hi != kUnbounded && hi > Grammar::kMaxRepetition))
          fail(op, "repetition count above ", Grammar::kMaxRepetition);
        if (hi != kUnbounded && hi < lo) fail(op, "repetition {", lo, ",", hi, "} has max < min");
        repeat(rule, last_sym, n_prev_rules, lo, hi, name, op);
      } else if (c == '<' || c == '!') {
        fail(pos, "token references (<...>) are not supported");
      } else {
        break;
      }
    }
    return pos;
  }

  // llama.cpp's rewrite: S{m,n} -> S x m, then S'(n-m) with S'(x) ::= S S'(x-1) | ; S{m,} -> S x m S'
  // with S' ::= S S' | .
  void repeat(std::vector<GElem>& rule, size_t last_sym, uint64_t& n_prev_rules, uint64_t lo, uint64_t hi,
              const std::string& name, size_t op) {
    if (last_sym == rule.size()) fail(op, "expected an item before the repetition operator");
    const bool no_max = hi == kUnbounded;
    const std::vector<GElem> prev(rule.begin() + std::ptrdiff_t(last_sym), rule.end());
    const uint64_t total = (!no_max && hi > 0) ? hi : lo > 0 ? lo : 1;
    if (n_prev_rules * total > Grammar::kMaxRepetition)
      fail(op, "nested repetitions expand to more than ", Grammar::kMaxRepetition, " copies");
    if (lo == 0) {
      rule.resize(last_sym);
    } else {
      for (uint64_t i = 1; i < lo; ++i) rule.insert(rule.end(), prev.begin(), prev.end());
    }
    if (rule.size() > Grammar::kMaxElements) fail(op, "repetition makes the grammar too large");
    const uint64_t n_opt = no_max ? 1 : hi - lo;
    uint32_t last_id = 0;
    for (uint64_t i = 0; i < n_opt; ++i) {
      std::vector<GElem> rec(prev);
      const uint32_t id = generated_rule(name, op);
      if (i > 0 || no_max) rec.push_back({GType::RuleRef, no_max ? id : last_id});
      rec.push_back({GType::Alt, 0});
      rec.push_back({GType::End, 0});
      set_rule(id, std::move(rec));
      last_id = id;
    }
    if (n_opt > 0) rule.push_back({GType::RuleRef, last_id});
    n_prev_rules *= total;
  }

  static constexpr uint64_t kUnbounded = ~uint64_t(0);
  static constexpr int kMaxNesting = 200;  // parentheses: bounds recursion of the parser

  std::string_view s_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<std::vector<GElem>> rules_;
  std::vector<bool> defined_;
  std::vector<size_t> first_ref_;  // offset of the first reference (for "undefined rule")
  std::vector<size_t> def_at_;     // offset of the definition (generated rules: their group)
  size_t n_elems_ = 0;
  int depth_ = 0;
};

inline Grammar Grammar::parse(std::string_view text, std::string_view root) {
  return GbnfParser(text).run(root);
}

inline void Grammar::compile_terminals() {
  terminal_of_.assign(elems_.size(), kNoPos);
  for (uint32_t p = 0; p < elems_.size(); ++p) {
    const GType t = elems_[p].type;
    if (t != GType::Char && t != GType::CharNot && t != GType::CharAny) continue;
    GTerminal term;
    term.negated = t == GType::CharNot;
    uint32_t q = p;
    do {
      if (elems_[q].type == GType::CharAny) {
        // Any value, even past U+10FFFF (as llama.cpp: a 0xF5..0xFF lead byte is a 4-byte lead).
        term.ranges.push_back({0, 0xFFFFFFFFu});
        q += 1;
      } else if (elems_[q + 1].type == GType::CharRngUpper) {
        term.ranges.push_back({elems_[q].value, elems_[q + 1].value});
        q += 2;
      } else {
        term.ranges.push_back({elems_[q].value, elems_[q].value});
        q += 1;
      }
    } while (elems_[q].type == GType::CharAlt);
    for (uint32_t cp = 0; cp < 128; ++cp) {
      bool in = false;
      for (const auto& r : term.ranges) in = in || (r.first <= cp && cp <= r.second);
      if (in != term.negated) term.ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
    }
    term.merged = term.ranges;
    std::sort(term.merged.begin(), term.merged.end());
    size_t k = 0;
    for (size_t j = 1; j < term.merged.size(); ++j) {
      if (term.merged[j].first <= term.merged[k].second + 1) {
        term.merged[k].second = std::max(term.merged[k].second, term.merged[j].second);
      } else {
        term.merged[++k] = term.merged[j];
      }
    }
    if (!term.merged.empty()) term.merged.resize(k + 1);
    term.next = is_end_of_seq(q) ? kNoPos : q;
    terminal_of_[p] = static_cast<uint32_t>(terminals_.size());
    terminals_.push_back(std::move(term));
  }
}

// Refuses left recursion (rule A reaching A again before consuming a character) as llama.cpp
// does, with its notion of "may be empty": a rule with an empty alternative. Deeper hidden
// cycles (through rules empty only via other rules) are accepted as by llama.cpp; where they
// would grow stacks forever the matcher's bounds stop them with an Error. Cycles that return to
// the same stack (`( [x]* )*`) are harmless: the matcher deduplicates them.
inline void Grammar::check_left_recursion(const std::vector<size_t>& rule_offsets, std::string_view text) const {
  const size_t n = rule_start_.size();
  std::vector<bool> nullable(n, false);
  for (uint32_t r = 0; r < n; ++r) {
    bool at_start = true;
    for (uint32_t p = rule_start_[r];; ++p) {
      if (is_end_of_seq(p)) {
        if (at_start) nullable[r] = true;
        if (elems_[p].type == GType::End) break;
        at_start = true;
      } else {
        at_start = false;
      }
    }
  }
  // Edges r -> s when s can be the first thing r expands to.
  std::vector<std::vector<uint32_t>> first(n);
  for (uint32_t r = 0; r < n; ++r) {
    bool leading = true;
    for (uint32_t p = rule_start_[r];; ++p) {
      const GElem& e = elems_[p];
      if (e.type == GType::End) break;
      if (e.type == GType::Alt) {
        leading = true;
      } else if (e.type == GType::RuleRef) {
        if (leading) first[r].push_back(e.value);
        leading = leading && nullable[e.value];
      } else {
        leading = false;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    path.push_back({s, 0});
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = first[r][i++];
      if (color[t] == 1) {
        throw_error("grammar: left recursion in rule '", rule_names_[t], "' (defined at ",
                    grammar_detail::where(text, rule_offsets[t]), "): a rule may not start with itself");
      }
      if (color[t] == 0) {
        color[t] = 1;
        path.push_back({t, 0});
      }
    }
  }
}

inline std::string Grammar::to_string() const {
  std::string out;
  auto put_char = [&out](uint32_t cp) {
    if (cp == '\\' || cp == ']' || cp == '[' || cp == '"' || cp == '-') {
      out += '\\';
      out += char(cp);
    } else if (cp < 0x20 || cp == 0x7F || cp == '^') {  // GBNF has no \^: '^' as \x5E
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[cp >> 4];
      out += kHex[cp & 15];
    } else {
      grammar_detail::append_utf8(out, cp);
    }
  };
  // Generated rules are named base_N, which GBNF cannot spell: print them as base-N (plus '-'
  // until the name is free), so the text parses back.
  std::vector<std::string> names(rule_names_);
  std::unordered_map<std::string, uint32_t> taken;
  for (uint32_t r = 0; r < names.size(); ++r) taken.emplace(names[r], r);
  for (auto& n : names) {
    if (n.find('_') == std::string::npos) continue;
    std::replace(n.begin(), n.end(), '_', '-');
    while (taken.count(n)) n += '-';
    taken.emplace(n, 0);
  }
  for (uint32_t r = 0; r < rule_start_.size(); ++r) {
    out += names[r] + " ::=";
    bool alt_empty = true;  // an empty alternative is printed "" (a bare "|" would join lines)
    for (uint32_t p = rule_start_[r];; ++p) {
      const GElem& e = elems_[p];
      if ((e.type == GType::Alt || e.type == GType::End) && alt_empty) out += " \"\"";
      alt_empty = e.type == GType::Alt;
      if (e.type == GType::End) break;
      switch (e.type) {
        case GType::Alt: out += " |"; break;
        case GType::RuleRef: out += " " + names[e.value]; break;
        case GType::CharAny: out += " ."; break;
        case GType::Char:
        case GType::CharNot:
          out += e.type == GType::Char ? " [" : " [^";
          put_char(e.value);
          break;
        case GType::CharAlt: put_char(e.value); break;
        case GType::CharRngUpper:
          out += '-';
          put_char(e.value);
          break;
        case GType::End: break;
      }
      const GType t = e.type;
      const bool in_class = t == GType::Char || t == GType::CharNot || t == GType::CharAlt || t == GType::CharRngUpper;
      const GType nt = elems_[p + 1].type;
      if (in_class && nt != GType::CharAlt && nt != GType::CharRngUpper) out += ']';
    }
    out += '\n';
  }
  return out;
}

}  // namespace edgellm
