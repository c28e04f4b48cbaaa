// jinja::Template: a Jinja2 template (a chat template, as Hugging Face renders it) parsed once and
// rendered many times. Header-only, standard library only.
//
//   jinja::Template t(source);                 // throws TemplateError naming the line
//   std::string s = t.render(context_json);    // context: a JSON object of variables
//
// Errors (syntax, undefined values used where Jinja2 fails, the template's raise_exception, limits)
// are jinja::TemplateError (an edgellm::Error); rendering never crashes or hangs (Limits).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edgellm/core/json.hpp"
#include "edgellm/jinja/builtins.hpp"
#include "edgellm/jinja/interpreter.hpp"
#include "edgellm/jinja/parser.hpp"
#include "edgellm/jinja/value.hpp"

namespace edgellm {
namespace jinja {

struct RenderOptions {
  // strftime_now(format); default: the local time now.
  std::function<std::string(const std::string&)> strftime_now;
};

namespace template_detail {

// Jinja2 resolves filters and tests when it compiles a template: an unknown name is an error
// before anything renders, except inside an `if` statement or an inline if, where it is an error
// only when reached. The same here.
inline void check_names(const Expr* e, bool conditional) {
  if (!e) return;
  if (!conditional) {
    if (e->kind == Expr::Filter && !filter_table().count(e->name)) syntax_error(e->line, "no filter named '" + e->name + "'");
    if (e->kind == Expr::Test && !test_table().count(e->name)) syntax_error(e->line, "no test named '" + e->name + "'");
  }
  const bool inner = conditional || e->kind == Expr::CondExpr;
  for (const auto& a : e->args) check_names(a.get(), inner);
  for (const auto& kv : e->kwargs) check_names(kv.second.get(), inner);
}
inline void check_names(const Body& body, bool conditional) {
  for (const auto& s : body) {
    const bool inner = conditional || s->kind == Stmt::If;
    check_names(s->expr.get(), conditional);
    check_names(s->cond.get(), conditional);
    check_names(s->filter.get(), conditional);
    for (const auto& d : s->defaults) check_names(d.get(), conditional);
    for (const auto& w : s->withs) check_names(w.second.get(), conditional);
    check_names(s->body, inner);
    check_names(s->else_body, inner);
  }
}

}  // namespace template_detail

class Template {
 public:
  explicit Template(std::string_view source, const Limits& limits = Limits())
      : limits_(limits), body_(std::make_shared<Body>(parse_template(source, limits_))) {
    template_detail::check_names(*body_, false);
  }

  // Renders with the members of `context` (a JSON object) as variables.
  std::string render(const Json& context, const RenderOptions& opt = RenderOptions()) const {
    if (!context.is_object()) throw TemplateError("the template context must be a JSON object", 0, false);
    std::vector<std::pair<std::string, Value>> vars;
    vars.reserve(context.size());
    for (const auto& kv : context.as_object()) vars.emplace_back(kv.first, Value::from_json(kv.second));
    return render(std::move(vars), opt);
  }

  std::string render(std::vector<std::pair<std::string, Value>> vars, const RenderOptions& opt = RenderOptions()) const {
    auto globals = std::make_shared<Frame>();
    add_globals(*globals, opt.strftime_now ? opt.strftime_now : strftime_local_now);
    auto ctx = std::make_shared<Frame>();
    ctx->parent = globals;
    ctx->vars = std::move(vars);
    Interpreter in(limits_);
    try {
      return in.render(*body_, ctx);
    } catch (const EvalError& e) {  // raised outside any statement (not expected)
      throw TemplateError(e.message, 0, false);
    }
  }

  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  std::shared_ptr<const Body> body_;
};

}  // namespace jinja
}  // namespace edgellm
