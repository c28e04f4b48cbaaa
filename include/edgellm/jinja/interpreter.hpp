// The Jinja2 interpreter: renders a parsed template against a context, with Jinja2's semantics
// as Hugging Face runs chat templates (ImmutableSandboxedEnvironment: lists and dicts cannot be
// mutated, only namespace attributes set; default Undefined; Python's arithmetic, comparisons
// and str / list / dict methods) and bounds on work, output and recursion.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "edgellm/jinja/parser.hpp"
#include "edgellm/jinja/value.hpp"

namespace edgellm {
namespace jinja {

// Variables of one scope; lookups go up the parent chain.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;

  const Value* find(std::string_view name) const {
    for (const Frame* f = this; f; f = f->parent.get())
      for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it)
        if (it->first == name) return &it->second;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& kv : vars)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using FrameP = std::shared_ptr<Frame>;

class Interpreter;
using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const std::unordered_map<std::string, FilterFn>& filter_table();
const std::unordered_map<std::string, TestFn>& test_table();

class Interpreter {
 public:
  explicit Interpreter(const Limits& lim) : lim_(lim) {}
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  // A namespace is the one mutable object, so `{% set ns.me = ns %}` (or a list or loop holding ns)
  // makes a reference cycle that shared ownership never frees; Python's collector does. Nothing the
  // render made outlives it (it returns text), so the namespaces it made are emptied here.
  ~Interpreter() {
    for (const auto& w : namespaces_)
      if (auto d = w.lock()) {
        auto items = std::move(d->items);  // destroyed after d's list is empty
        d->items.clear();
      }
  }

  std::string render(const Body& body, FrameP globals) {
    std::string out;
    out_ = &out;
    exec_body(body, globals);
    return out;
  }

  // ---- used by the builtins ----
  const Limits& limits() const { return lim_; }
  void own_namespace(const Value& ns) { namespaces_.push_back(ns.dict_handle()); }
  void check_size(size_t n) const {
    if (n > lim_.max_output)
      eval_fail("a value or the output would be ", n, " bytes, more than the limit of ", lim_.max_output);
  }
  void step() {
    if (++steps_ > lim_.max_steps) eval_fail("the template took more than ", lim_.max_steps, " steps");
  }
  Value call(const Value& callee, CallArgs& args) {
    if (callee.is_callable()) return callee.fn().fn(*this, args);
    if (callee.is_undefined()) eval_fail(undefined_message(callee));
    eval_fail("'", callee.type_name(), "' object is not callable");
  }
  static std::string undefined_message(const Value& u) {
    return u.str().empty() ? std::string("value is undefined") : u.str();
  }
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // Python iteration: list / tuple items, dict keys, a string's characters; Undefined is empty.
  std::vector<Value> iterate(const Value& v) const;
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
    const auto& t = filter_table();
    auto it = t.find(name);
    if (it == t.end()) eval_fail("no filter named '", name, "'");
    return it->second(*this, v, args);
  }
  bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
    const auto& t = test_table();
    auto it = t.find(name);
    if (it == t.end()) eval_fail("no test named '", name, "'");
    return it->second(*this, v, args);
  }

 private:
  enum class Flow { Normal, Break, Continue };
  const Limits& lim_;
  std::string* out_ = nullptr;
  std::vector<std::weak_ptr<DictObj>> namespaces_;  // the namespaces namespace() made
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int loop_depth_ = 0;

  void emit(std::string_view s) {
    if (out_->size() + s.size() > lim_.max_output)
      eval_fail("the output would be more than the limit of ", lim_.max_output, " bytes");
    out_->append(s);
  }

  // Renders body into a string of its own (macro calls, block sets, filter blocks).
  std::string capture(const Body& body, const FrameP& frame) {
    std::string buf;
    std::string* saved = out_;
    out_ = &buf;
    try {
      exec_body(body, frame);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    return buf;
  }

  Flow exec_body(const Body& body, const FrameP& frame) {
    for (const auto& s : body) {
      const Flow f = exec(*s, frame);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s, const FrameP& frame) {
    try {
      step();
      switch (s.kind) {
        case Stmt::Output: emit(s.text); return Flow::Normal;
        case Stmt::Print: {
          const Value v = eval(*s.expr, frame);
          if (v.is_string()) emit(v.str());
          else emit(v.to_str());
          return Flow::Normal;
        }
        case Stmt::If:
          return eval(*s.expr, frame).truthy() ? exec_body(s.body, frame) : exec_body(s.else_body, frame);
        case Stmt::For: return exec_for(s, frame);
        case Stmt::Set: assign(*s.target, eval(*s.expr, frame), frame, s.line); return Flow::Normal;
        case Stmt::SetBlock: {
          Value v(capture(s.body, frame));
          if (s.filter) v = eval_filter_chain(*s.filter, v, frame);
          assign(*s.target, std::move(v), frame, s.line);
          return Flow::Normal;
        }
        case Stmt::FilterBlock: {
          Value v(capture(s.body, frame));
          v = eval_filter_chain(*s.filter, v, frame);
          emit(v.to_str());
          return Flow::Normal;
        }
        case Stmt::Macro: frame->set(s.text, make_macro(s, frame, nullptr)); return Flow::Normal;
        case Stmt::CallBlock: {
          // The call's callee gets `caller`: a macro rendering this block's body.
          Value caller = make_macro(s, frame, "caller");
          const Expr& call = *s.expr;
          Value callee = eval(*call.args[0], frame);
          CallArgs a = eval_args(call, frame, 1);
          a.kw.emplace_back("caller", caller);
          const Value v = this->call(callee, a);
          emit(v.to_str());
          return Flow::Normal;
        }
        case Stmt::With: {
          auto inner = std::make_shared<Frame>();
          inner->parent = frame;
          for (const auto& w : s.withs) assign(*w.first, eval(*w.second, frame), inner, s.line);
          return exec_body(s.body, inner);
        }
        case Stmt::Break:
          if (loop_depth_ == 0) eval_fail("'break' outside a loop");
          return Flow::Break;
        case Stmt::Continue:
          if (loop_depth_ == 0) eval_fail("'continue' outside a loop");
          return Flow::Continue;
      }
    } catch (const EvalError& e) {
      throw TemplateError(e.message, s.line, false);
    }
    return Flow::Normal;
  }

  Flow exec_for(const Stmt& s, const FrameP& frame) {
    const Value seq = eval(*s.expr, frame);
    if (!(seq.is_list() || seq.is_dict() || seq.is_string() || seq.is_undefined() || seq.is_namespace()))
      eval_fail("'", seq.type_name(), "' object is not iterable");
    std::vector<Value> items = iterate(seq);
    if (s.cond) {
      std::vector<Value> kept;
      for (auto& it : items) {
        step();
        auto tmp = std::make_shared<Frame>();
        tmp->parent = frame;
        assign(*s.target, it, tmp, s.line);
        if (eval(*s.cond, tmp).truthy()) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.else_body, frame);
    auto st = std::make_shared<LoopState>();
    st->items = std::move(items);
    const Value loop = Value::loop(st);
    ++loop_depth_;
    struct Dec {
      int& d;
      ~Dec() { --d; }
    } dec{loop_depth_};
    for (size_t k = 0; k < st->items.size(); ++k) {
      step();
      st->index0 = k;
      // Each iteration is a scope of its own: what the body sets does not outlive it.
      auto inner = std::make_shared<Frame>();
      inner->parent = frame;
      inner->vars.emplace_back("loop", loop);
      assign(*s.target, st->items[k], inner, s.line);
      const Flow f = exec_body(s.body, inner);
      if (f == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void assign(const Expr& target, Value v, const FrameP& frame, int line) {
    switch (target.kind) {
      case Expr::Name: frame->set(target.name, std::move(v)); return;
      case Expr::TupleLit: {
        if (!v.is_list() && !v.is_string() && !v.is_dict())
          eval_fail("cannot unpack non-iterable ", v.type_name(), " object");
        std::vector<Value> parts = iterate(v);
        if (parts.size() != target.args.size())
          eval_fail(parts.size() > target.args.size() ? "too many values to unpack (expected "
                                                      : "not enough values to unpack (expected ",
                    target.args.size(), ", got ", parts.size(), ")");
        for (size_t k = 0; k < parts.size(); ++k) assign(*target.args[k], std::move(parts[k]), frame, line);
        return;
      }
      case Expr::Getattr: {
        const Value* obj = frame->find(target.args[0]->name);
        if (!obj || !obj->is_namespace())
          eval_fail("cannot assign attribute on non-namespace object ('", target.args[0]->name, "')");
        Value ns = *obj;  // shares the namespace's dict
        ns.dict_obj().set(Value(target.name), std::move(v));
        return;
      }
      default: eval_fail("cannot assign to this expression");
    }
  }

  Value make_macro(const Stmt& s, const FrameP& frame, const char* name_override) {
    const Stmt* def = &s;
    // The scope the macro was defined in, held weakly: that scope holds the macro, and a strong
    // reference both ways would never be freed. (A macro called after its scope ended is an error.)
    std::weak_ptr<Frame> closure = frame;
    const std::string name = name_override ? name_override : s.text;
    return Value::function(name, [def, closure, name](Interpreter& in, CallArgs& a) -> Value {
      if (in.call_depth_ >= in.lim_.max_call_depth)
        eval_fail("macro calls nested more than ", in.lim_.max_call_depth, " deep (recursion?)");
      auto f = std::make_shared<Frame>();
      f->parent = closure.lock();
      if (!f->parent) eval_fail("macro '", name, "' called after the scope it was defined in ended");
      if (a.pos.size() > def->params.size())
        eval_fail("macro '", name, "' takes not more than ", def->params.size(), " argument(s)");
      for (size_t k = 0; k < def->params.size(); ++k) {
        const std::string& p = def->params[k];
        bool bound = false;
        for (auto& kv : a.kw)
          if (kv.first == p) {
            if (k < a.pos.size()) eval_fail("macro '", name, "' got multiple values for argument '", p, "'");
            f->set(p, kv.second);
            bound = true;
          }
        if (bound) continue;
        if (k < a.pos.size()) f->set(p, a.pos[k]);
        else if (def->defaults[k]) f->set(p, in.eval(*def->defaults[k], f));
        else f->set(p, Value::undefined("parameter '" + p + "' of macro '" + name + "' was not given"));
      }
      for (auto& kv : a.kw) {
        bool known = kv.first == "caller";
        for (const auto& p : def->params) known = known || p == kv.first;
        if (!known) eval_fail("macro '", name, "' takes no keyword argument '", kv.first, "'");
        if (kv.first == "caller") f->set("caller", kv.second);
      }
      ++in.call_depth_;
      std::string text;
      try {
        text = in.capture(def->body, f);
      } catch (...) {
        --in.call_depth_;
        throw;
      }
      --in.call_depth_;
      return Value(std::move(text));
    });
  }

  CallArgs eval_args(const Expr& e, const FrameP& frame, size_t first) {
    CallArgs a;
    a.line = e.line;
    for (size_t k = first; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], frame));
    for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, frame));
    return a;
  }

  // A Filter chain whose innermost operand is empty, applied to v.
  Value eval_filter_chain(const Expr& e, const Value& v, const FrameP& frame) {
    Value in = e.args[0] ? eval_filter_chain(*e.args[0], v, frame) : v;
    CallArgs a = eval_args(e, frame, 1);
    return apply_filter(e.name, in, a);
  }

 public:
  Value eval(const Expr& e, const FrameP& frame) {
    try {
      step();
      return eval_node(e, frame);
    } catch (const EvalError& err) {
      throw TemplateError(err.message, e.line, false);
    }
  }

 private:
  Value eval_node(const Expr& e, const FrameP& frame);
  Value binary(const std::string& op, const Value& a, const Value& b);
  bool compare(const std::string& op, const Value& a, const Value& b);
};

// ---- arithmetic and comparison ----------------------------------------------------------------
namespace interp_detail {

inline void undefined_operand(const Value& v) {
  if (v.is_undefined()) eval_fail(Interpreter::undefined_message(v));
}

// Python's ordering for <, <=, >, >=: numbers, strings (code point order = UTF-8 byte order),
// lists / tuples element by element.
inline int order(const Value& a, const Value& b, const char* op) {
  undefined_operand(a);
  undefined_operand(b);
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    const double x = a.as_double(), y = b.as_double();
    if (std::isnan(x) || std::isnan(y)) return 2;  // every comparison false
    return x < y ? -1 : x > y;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (x[k] == y[k]) continue;
      return order(x[k], y[k], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  eval_fail("'", op, "' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

inline bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::String:
      if (!item.is_string()) eval_fail("'in <string>' requires string as left operand, not ", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::List:
      for (const auto& x : container.items())
        if (x == item) return true;
      return false;
    case Value::Dict:
    case Value::Namespace: return container.dict_obj().find(item) != nullptr;
    case Value::Undefined: return false;  // iterates as empty
    default: eval_fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

inline Value repeat(const Value& seq, int64_t n, const Interpreter& in) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    in.check_size(uint64_t(seq.str().size()) * uint64_t(n) > in.limits().max_output ? in.limits().max_output + 1
                                                                                     : seq.str().size() * size_t(n));
    std::string out;
    out.reserve(seq.str().size() * size_t(n));
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  const size_t total = seq.items().size() * size_t(std::min<int64_t>(n, int64_t(in.limits().max_output)));
  in.check_size(total);
  std::vector<Value> out;
  out.reserve(total);
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

inline double floor_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// x + y, x - y or x * y (op '+', '-', '*') of the int64 operands: Python's ints do not wrap, so an
// overflow is an error.
inline Value checked_int_op(char op, int64_t x, int64_t y) {
  int64_t r = 0;
  const bool overflow = op == '+'   ? __builtin_add_overflow(x, y, &r)
                        : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                    : __builtin_mul_overflow(x, y, &r);
  if (overflow) eval_fail("integer overflow");
  return Value(r);
}

}  // namespace interp_detail

inline Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  using namespace interp_detail;
  undefined_operand(a);
  undefined_operand(b);
  const char o = op[0];
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  auto type_error = [&]() -> Value {
    eval_fail("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  };
  if (op == "+") {
    if (ints) return checked_int_op(o, a.as_int(), b.as_int());
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      check_size(a.str().size() + b.str().size());
      if (a.is_markup() || b.is_markup())
        return Value::markup((a.is_markup() ? a.str() : py::html_escape(a.str())) +
                             (b.is_markup() ? b.str() : py::html_escape(b.str())));
      return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_iterator() && !b.is_iterator()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    return type_error();
  }
  if (op == "-") {
    if (ints) return checked_int_op(o, a.as_int(), b.as_int());
    if (nums) return Value(a.as_double() - b.as_double());
    return type_error();
  }
  if (op == "*") {
    if (ints) return checked_int_op(o, a.as_int(), b.as_int());
    if (nums) return Value(a.as_double() * b.as_double());
    auto seq = [](const Value& v) { return v.is_string() || (v.is_list() && !v.is_iterator()); };
    if (seq(a) && b.is_number() && !b.is_float()) return repeat(a, b.as_int(), *this);
    if (seq(b) && a.is_number() && !a.is_float()) return repeat(b, a.as_int(), *this);
    return type_error();
  }
  if (op == "/") {
    if (!nums) return type_error();
    if (b.as_double() == 0) eval_fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) return type_error();
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) eval_fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) eval_fail("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    if (b.as_double() == 0) eval_fail("float floor division by zero");
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (o == '%') {
    if (a.is_string()) {
      CallArgs args;
      if (b.is_list() && b.is_tuple()) args.pos = b.items();
      else args.pos.push_back(b);
      if (a.is_markup())  // Markup % args escapes the string arguments
        for (auto& x : args.pos)
          if (x.is_string() && !x.is_markup()) x = Value::markup(py::html_escape(x.str()));
      return apply_filter("format", a, args);
    }
    if (!nums) return type_error();
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) eval_fail("integer division or modulo by zero");
      if (y == -1) return Value(int64_t(0));
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    if (b.as_double() == 0) eval_fail("float modulo");
    return Value(floor_mod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) return type_error();
    if (ints && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int(), e = b.as_int();
      while (e > 0) {
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) eval_fail("integer overflow");
        e >>= 1;
        if (e && __builtin_mul_overflow(base, base, &base)) eval_fail("integer overflow");
      }
      return Value(r);
    }
    if (a.as_double() == 0 && b.as_double() < 0) eval_fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  eval_fail("unknown operator ", op);
}

inline bool Interpreter::compare(const std::string& op, const Value& a, const Value& b) {
  using namespace interp_detail;
  if (op == "==") return a == b;
  if (op == "!=") return !(a == b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  const int c = order(a, b, op.c_str());
  if (c == 2) return false;
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;  // ">="
}

inline std::vector<Value> Interpreter::iterate(const Value& v) const {
  switch (v.kind()) {
    case Value::List: return v.items();
    case Value::Dict:
    case Value::Namespace: {
      std::vector<Value> keys;
      keys.reserve(v.dict_obj().items.size());
      for (const auto& kv : v.dict_obj().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::String: {
      std::vector<Value> chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t b = i;
        py::next_cp(s, i);
        chars.emplace_back(s.substr(b, i - b));
      }
      return chars;
    }
    case Value::Undefined: return {};
    default: eval_fail("'", v.type_name(), "' object is not iterable");
  }
}

// ---- attribute and item access ------------------------------------------------------------------
namespace interp_detail {

// Methods Jinja2's immutable sandbox refuses (they would change a list or dict).
inline bool mutating_method(const Value& obj, const std::string& name) {
  static const char* const kList[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};
  static const char* const kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (obj.is_list() && !obj.is_tuple()) {
    for (const char* m : kList)
      if (name == m) return true;
  } else if (obj.is_dict()) {
    for (const char* m : kDict)
      if (name == m) return true;
  }
  return false;
}

Value string_method(const Value& self, const std::string& name, bool* found);
Value dict_method(const Value& self, const std::string& name, bool* found);
Value list_method(const Value& self, const std::string& name, bool* found);
Value loop_attr(const Value& self, const std::string& name, bool* found);

inline std::string object_name(const Value& v) { return std::string("'") + v.type_name() + " object'"; }

}  // namespace interp_detail

inline Value Interpreter::getattr(const Value& obj, const std::string& name) {
  using namespace interp_detail;
  if (!name.empty() && name[0] == '_')
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe");
  if (obj.is_undefined()) eval_fail(undefined_message(obj));
  if (mutating_method(obj, name))
    return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe");
  bool found = false;
  Value m;
  switch (obj.kind()) {
    case Value::String: m = string_method(obj, name, &found); break;
    case Value::Dict: m = dict_method(obj, name, &found); break;
    case Value::List:
      if (!obj.is_iterator()) m = list_method(obj, name, &found);
      break;
    case Value::Loop: m = loop_attr(obj, name, &found); break;
    case Value::Namespace: {
      if (const Value* v = obj.dict_obj().find(std::string_view(name))) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    default: break;
  }
  if (found) return m;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict_obj().find(std::string_view(name))) return *v;
  }
  return Value::undefined(object_name(obj) + " has no attribute '" + name + "'");
}

inline Value Interpreter::getitem(const Value& obj, const Value& key) {
  using namespace interp_detail;
  if (obj.is_undefined()) eval_fail(undefined_message(obj));
  switch (obj.kind()) {
    case Value::Dict:
      if (const Value* v = obj.dict_obj().find(key)) return *v;
      break;
    case Value::List:
      if (obj.is_iterator()) return Value::undefined("'" + std::string(obj.type_name()) + "' object is not subscriptable");
      if (key.is_number() && !key.is_float()) {
        int64_t i = key.as_int();
        const int64_t n = int64_t(obj.items().size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.items()[size_t(i)];
        return Value::undefined(object_name(obj) + " has no element " + std::to_string(key.as_int()));
      }
      break;
    case Value::String:
      if (key.is_number() && !key.is_float()) {
        const std::vector<uint32_t> cps = py::code_points(obj.str());
        int64_t i = key.as_int();
        const int64_t n = int64_t(cps.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(py::from_cps(&cps[size_t(i)], 1));
        return Value::undefined(object_name(obj) + " has no element " + std::to_string(key.as_int()));
      }
      break;
    case Value::Namespace:
    case Value::Loop:
      if (key.is_string()) return getattr(obj, key.str());
      break;
    default: break;
  }
  if (key.is_string() && !obj.is_dict()) {
    Value v = getattr(obj, key.str());
    if (!v.is_undefined()) return v;
  } else if (key.is_string() && obj.is_dict()) {
    // d['items'] without such a key: the method, as Python's getattr fallback gives.
    bool found = false;
    Value m = interp_detail::dict_method(obj, key.str(), &found);
    if (found && !interp_detail::mutating_method(obj, key.str())) return m;
  }
  return Value::undefined(object_name(obj) + " has no attribute " + key.repr());
}

// Python slicing obj[start:stop:step] of a list, tuple or string.
inline Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) eval_fail(Interpreter::undefined_message(obj));
  auto as_index = [](const Value& v, const char* what) -> std::pair<bool, int64_t> {
    if (v.is_none() || v.is_undefined()) return {false, 0};
    if (!v.is_number() || v.is_float()) eval_fail("slice ", what, " must be an integer or None");
    return {true, v.as_int()};
  };
  const auto st = as_index(step, "step");
  const int64_t k = st.first ? st.second : 1;
  if (k == 0) eval_fail("slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = py::code_points(obj.str());
    n = int64_t(cps.size());
  } else if (obj.is_list()) {
    if (obj.is_iterator()) return Value::undefined("'" + std::string(obj.type_name()) + "' object is not subscriptable");
    n = int64_t(obj.items().size());
  } else {
    eval_fail("'", obj.type_name(), "' object is not subscriptable");
  }
  auto norm = [&](std::pair<bool, int64_t> v, int64_t def) {
    if (!v.first) return def;
    int64_t i = v.second;
    if (i < 0) i += n;
    if (k > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = norm(as_index(start, "start"), k > 0 ? 0 : n - 1);
  const int64_t e = norm(as_index(stop, "stop"), k > 0 ? n : -1);
  std::vector<int64_t> idx;
  if (k > 0)
    for (int64_t i = b; i < e; i += k) idx.push_back(i);
  else
    for (int64_t i = b; i > e; i += k) idx.push_back(i);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i : idx) py::append_cp(out, cps[size_t(i)]);
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.items()[size_t(i)]);
  return Value::list(std::move(out), obj.is_tuple());
}

inline Value Interpreter::eval_node(const Expr& e, const FrameP& frame) {
  switch (e.kind) {
    case Expr::Const: return e.value;
    case Expr::Name: {
      if (const Value* v = frame->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::ListLit:
    case Expr::TupleLit: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, frame));
      return Value::list(std::move(items), e.kind == Expr::TupleLit);
    }
    case Expr::DictLit: {
      Value d = Value::dict();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k], frame);
        if (key.is_list() && !key.is_tuple()) eval_fail("unhashable type: 'list'");
        if (key.is_dict()) eval_fail("unhashable type: 'dict'");
        d.dict_obj().set(std::move(key), eval(*e.args[k + 1], frame));
      }
      return d;
    }
    case Expr::Getattr: return getattr(eval(*e.args[0], frame), e.name);
    case Expr::Getitem: {
      const Value obj = eval(*e.args[0], frame);
      return getitem(obj, eval(*e.args[1], frame));
    }
    case Expr::Slice: {
      const Value obj = eval(*e.args[0], frame);
      auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k], frame) : Value::none(); };
      return slice_value(obj, part(1), part(2), part(3));
    }
    case Expr::Call: {
      const Value callee = eval(*e.args[0], frame);
      CallArgs a = eval_args(e, frame, 1);
      return call(callee, a);
    }
    case Expr::Filter: {
      const Value v = eval(*e.args[0], frame);
      CallArgs a = eval_args(e, frame, 1);
      return apply_filter(e.name, v, a);
    }
    case Expr::Test: {
      const Value v = eval(*e.args[0], frame);
      CallArgs a = eval_args(e, frame, 1);
      return Value(apply_test(e.name, v, a) != e.negated);
    }
    case Expr::Not: return Value(!eval(*e.args[0], frame).truthy());
    case Expr::Neg:
    case Expr::Pos: {
      const Value v = eval(*e.args[0], frame);
      interp_detail::undefined_operand(v);
      if (!v.is_number()) eval_fail("bad operand type for unary ", e.kind == Expr::Neg ? "-" : "+", ": '", v.type_name(), "'");
      if (e.kind == Expr::Pos) return v.is_float() ? v : Value(v.as_int());
      if (v.is_float()) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) eval_fail("integer overflow");
      return Value(-v.as_int());
    }
    case Expr::Binary: {
      const Value a = eval(*e.args[0], frame);
      return binary(e.name, a, eval(*e.args[1], frame));
    }
    case Expr::And: {
      Value a = eval(*e.args[0], frame);
      return a.truthy() ? eval(*e.args[1], frame) : a;
    }
    case Expr::Or: {
      Value a = eval(*e.args[0], frame);
      return a.truthy() ? a : eval(*e.args[1], frame);
    }
    case Expr::Compare: {
      Value left = eval(*e.args[0], frame);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1], frame);
        if (!compare(e.ops[k], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::CondExpr: {
      if (eval(*e.args[0], frame).truthy()) return eval(*e.args[1], frame);
      if (e.args[2]) return eval(*e.args[2], frame);
      return Value::undefined("the inline if expression evaluated to false and no else section was defined");
    }
    case Expr::Concat: {
      std::string s;
      for (const auto& a : e.args) {
        s += eval(*a, frame).to_str();
        check_size(s.size());
      }
      return Value(std::move(s));
    }
  }
  eval_fail("unknown expression");
}

}  // namespace jinja
}  // namespace edgellm
