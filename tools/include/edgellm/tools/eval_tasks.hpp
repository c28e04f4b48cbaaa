// What edgellm-eval adds around engine/eval.hpp: answer extraction and matching for generation
// tasks (GSM8K style: \boxed{}, ####, last number), task-file parsing (JSONL) and per-request
// statistics. Tools layer: not part of <edgellm.hpp>.
#pragma once
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "edgellm/core/error.hpp"
#include "edgellm/engine/eval.hpp"
#include "edgellm/tools/bench_stats.hpp"
#include "edgellm/core/json.hpp"

namespace edgellm {

// ---- answer extraction (generation tasks) ----

enum class AnswerSource { None, Boxed, Hash, LastNumber };

struct ExtractedAnswer {
  std::string value;  // normalised (numbers: no commas, no "$", no trailing ".0")
  AnswerSource source = AnswerSource::None;
};

namespace eval_detail {
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace eval_detail

// A number written as text -> canonical form: "$1,234.50" -> "1234.5", "+7" -> "7", "3." -> "3",
// "-0" -> "0". Text that is not a number comes back trimmed and unchanged.
inline std::string normalize_number(const std::string& text) {
  std::string s;
  for (char c : eval_detail::trim(text))
    if (c != ',' && c != '$' && c != ' ') s += c;
  while (!s.empty() && (s.back() == '.' || s.back() == '%')) s.pop_back();
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  const bool neg = !s.empty() && s[0] == '-';
  std::string d = neg ? s.substr(1) : s;
  bool ok = !d.empty(), dot = false;
  for (char c : d) {
    if (c == '.' && !dot) dot = true;
    else if (!eval_detail::is_digit(c)) ok = false;
  }
  if (!ok || d == ".") return eval_detail::trim(text);
  if (dot) {
    while (d.back() == '0') d.pop_back();
    if (d.back() == '.') d.pop_back();
  }
  size_t z = 0;
  while (z + 1 < d.size() && d[z] == '0' && d[z + 1] != '.') ++z;
  d = d.substr(z);
  if (d.empty() || d[0] == '.') d = "0" + d;
  if (d == "0") return "0";
  return neg ? "-" + d : d;
}

// Content of the last \boxed{...} (braces balanced), or "" when there is none.
inline std::string extract_boxed(const std::string& text) {
  const size_t at = text.rfind("\\boxed{");
  if (at == std::string::npos) return "";
  int depth = 1;
  const size_t b = at + 7;
  for (size_t i = b; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    else if (text[i] == '}' && --depth == 0) return text.substr(b, i - b);
  }
  return "";
}

// The last number in text ("-1,234.5" kept whole, a sentence's final period dropped), or "".
inline std::string extract_last_number(const std::string& text) {
  std::string last;
  for (size_t i = 0; i < text.size();) {
    const bool sign = text[i] == '-' && i + 1 < text.size() && eval_detail::is_digit(text[i + 1]) &&
                      (i == 0 || !eval_detail::is_digit(text[i - 1]));
    if (!eval_detail::is_digit(text[i]) && !sign) { ++i; continue; }
    size_t j = i + (sign ? 1 : 0);
    while (j < text.size() && (eval_detail::is_digit(text[j]) ||
                               ((text[j] == ',' || text[j] == '.') && j + 1 < text.size() && eval_detail::is_digit(text[j + 1]))))
      ++j;
    last = text.substr(i, j - i);
    i = j;
  }
  return last;
}

// The answer in a model's (or a reference) text: \boxed{} first, then the text after the last
// "####" (GSM8K's answer mark), then the last number.
inline ExtractedAnswer extract_answer(const std::string& text) {
  ExtractedAnswer a;
  const std::string boxed = extract_boxed(text);
  if (!eval_detail::trim(boxed).empty()) {
    a.value = normalize_number(boxed);
    a.source = AnswerSource::Boxed;
    return a;
  }
  const size_t h = text.rfind("####");
  if (h != std::string::npos) {
    std::string rest = text.substr(h + 4);
    rest = eval_detail::trim(rest.substr(0, rest.find('\n')));
    if (!rest.empty()) {
      const std::string num = extract_last_number(rest);  // "#### 72 apples" -> 72
      a.value = normalize_number(num.empty() ? rest : num);
      a.source = AnswerSource::Hash;
      return a;
    }
  }
  const std::string num = extract_last_number(text);
  if (!num.empty()) {
    a.value = normalize_number(num);
    a.source = AnswerSource::LastNumber;
  }
  return a;
}

// Numbers compare by value (|a - b| <= 1e-6 relative), anything else as trimmed, case-insensitive text.
inline bool answers_equal(const std::string& pred, const std::string& gold) {
  const std::string p = normalize_number(pred), g = normalize_number(gold);
  if (p.empty() || g.empty()) return false;
  char* pe = nullptr;
  char* ge = nullptr;
  const double pv = std::strtod(p.c_str(), &pe), gv = std::strtod(g.c_str(), &ge);
  if (*pe == 0 && *ge == 0) return std::fabs(pv - gv) <= 1e-6 * std::max(1.0, std::fabs(gv));
  if (p.size() != g.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(p[i])) != std::tolower(static_cast<unsigned char>(g[i]))) return false;
  return true;
}

// ---- task items ----

struct GenItem {
  std::string question;
  std::string answer;  // reference solution; its answer is extracted like the model's
};

namespace eval_detail {
inline const Json* first_of(const Json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (const Json* v = j.find(k)) return v;
  return nullptr;
}
}  // namespace eval_detail

// {"context"|"ctx"|"goal"|"question": s, "choices"|"endings": [s...] (or piqa's "sol1", "sol2"),
//  "label"|"gold": i}. `line` names the item in errors.
inline McItem parse_mc_item(const Json& j, size_t line) {
  EDGELLM_CHECK(j.is_object(), "task line ", line, ": expected a JSON object, got ", Json::type_name(j.type()));
  McItem it;
  const Json* ctx = eval_detail::first_of(j, {"context", "ctx", "goal", "question"});
  EDGELLM_CHECK(ctx && ctx->is_string(), "task line ", line, ": no string \"context\"");
  it.context = ctx->as_string();
  if (const Json* ch = eval_detail::first_of(j, {"choices", "endings"})) {
    EDGELLM_CHECK(ch->is_array(), "task line ", line, ": \"choices\" must be an array");
    for (const Json& c : ch->as_array()) {
      EDGELLM_CHECK(c.is_string(), "task line ", line, ": every choice must be a string");
      it.choices.push_back(c.as_string());
    }
  } else {
    for (const char* k : {"sol1", "sol2"})
      if (const Json* s = j.find(k)) it.choices.push_back(" " + s->as_string());
  }
  EDGELLM_CHECK(it.choices.size() >= 2, "task line ", line, ": need at least 2 choices, got ", it.choices.size());
  const Json* label = eval_detail::first_of(j, {"label", "gold"});
  EDGELLM_CHECK(label && label->is_int(), "task line ", line, ": no integer \"label\"");
  const int64_t l = label->as_int();
  EDGELLM_CHECK(l >= 0 && l < static_cast<int64_t>(it.choices.size()), "task line ", line, ": label ", l, " outside [0, ",
                it.choices.size(), ")");
  it.label = static_cast<int>(l);
  return it;
}

// {"question": s, "answer": s or number}.
inline GenItem parse_gen_item(const Json& j, size_t line) {
  EDGELLM_CHECK(j.is_object(), "task line ", line, ": expected a JSON object, got ", Json::type_name(j.type()));
  const Json* q = j.find("question");
  const Json* a = j.find("answer");
  EDGELLM_CHECK(q && q->is_string(), "task line ", line, ": no string \"question\"");
  EDGELLM_CHECK(a && (a->is_string() || a->is_number()), "task line ", line, ": no \"answer\"");
  GenItem it;
  it.question = q->as_string();
  it.answer = a->is_string() ? a->as_string() : a->dump();
  return it;
}

// "{question}" and "{hint}" in tmpl replaced (every occurrence).
inline std::string render_prompt(const std::string& tmpl, const std::string& question, const std::string& hint) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 10, "{question}") == 0) { out += question; i += 10; }
    else if (tmpl.compare(i, 6, "{hint}") == 0) { out += hint; i += 6; }
    else out += tmpl[i++];
  }
  return out;
}

// ---- run statistics ----

// Per-request figures of one eval run (one budget).
struct EvalStats {
  int n = 0;
  int correct = 0;
  int correct_norm = 0;          // multiple choice: acc_norm
  std::vector<double> latency_ms;  // per request
  std::vector<int> tokens;         // generated (generation) or evaluated (multiple choice) per request
  double wall_s = 0;

  void add(bool ok, double ms, int n_tokens, bool ok_norm = false) {
    ++n;
    correct += ok ? 1 : 0;
    correct_norm += ok_norm ? 1 : 0;
    latency_ms.push_back(ms);
    tokens.push_back(n_tokens);
  }
  double accuracy() const { return n ? double(correct) / n : 0.0; }
  double accuracy_norm() const { return n ? double(correct_norm) / n : 0.0; }
  double mean_latency_ms() const {
    double s = 0;
    for (double x : latency_ms) s += x;
    return n ? s / n : 0.0;
  }
  double p90_latency_ms() const { return stats_percentile(latency_ms, 90); }
  double mean_tokens() const {
    double s = 0;
    for (int x : tokens) s += x;
    return n ? s / n : 0.0;
  }
  double requests_per_s() const { return wall_s > 0 ? n / wall_s : 0.0; }
};

}  // namespace edgellm
