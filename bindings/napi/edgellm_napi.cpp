// edgellm as a Node-API module, one source for two hosts: Node.js (edgellm.node, registered through
// NAPI_MODULE) and an OpenHarmony app (libedgellm.so built with -DEDGELLM_OHOS against the SDK's
// napi/native_api.h, registered with napi_module_register from a constructor function). Only the C
// napi_* functions both hosts implement are used: classes, wrap, async work, thread-safe functions.
//
// Nothing blocks the JS thread: loadModel and embed run on the host's worker pool
// (napi_create_async_work), generate on a thread of its own (a long generation must not hold one
// of libuv's 4 pool threads, which fs and dns share); generated pieces and the end come back
// through a thread-safe function, so onToken always runs on the JS thread. A Model holds a shared_ptr to the loaded weights and each Session
// another one: model.close() (or the GC) drops the model's own reference and the weights go when
// the last session using them is closed. The surface is declared in index.d.ts next to this file.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <edgellm/engine/embedding.hpp>
#include <edgellm/engine/session.hpp>
#include <edgellm/grammar/constrained_sampler.hpp>
#include <edgellm/grammar/json_schema.hpp>
#include <edgellm/grammar/tool_calls.hpp>
#include <edgellm/kernels/select.hpp>
#include <edgellm/model/memory_plan.hpp>
#include <edgellm/text/chat.hpp>
#include <edgellm/text/chat_template.hpp>
#include <edgellm/version.hpp>

#ifdef EDGELLM_OHOS
#include "napi/native_api.h"
#else
#include <node_api.h>
#endif

namespace {

// ---- napi helpers: a failed napi call or bad argument throws; guarded() turns it into a JS error ----

struct NapiFailed : std::exception {
  const char* what() const noexcept override { return "napi call failed"; }
};

void check(napi_env env, napi_status s) {
  if (s == napi_ok) return;
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) throw NapiFailed();  // the JS exception already set is the one reported
  const napi_extended_error_info* info = nullptr;
  napi_get_last_error_info(env, &info);
  edgellm::throw_error("napi: ", info && info->error_message ? info->error_message : "call failed");
}

// Runs a native callback body: any C++ exception becomes a JS Error carrying its text.
template <class F>
napi_value guarded(napi_env env, F&& body) {
  try {
    return body();
  } catch (const NapiFailed&) {
  } catch (const std::exception& e) {
    napi_throw_error(env, nullptr, e.what());
  } catch (...) {
    napi_throw_error(env, nullptr, "unknown C++ exception");
  }
  return nullptr;
}

// The same for the functions that return a promise: a bad argument rejects it (await and .catch()
// see every error the same way).
template <class F>
napi_value guarded_promise(napi_env env, F&& body) {
  napi_value err = nullptr;
  try {
    return body();
  } catch (const NapiFailed&) {
    napi_get_and_clear_last_exception(env, &err);
  } catch (const std::exception& e) {
    napi_value msg;
    if (napi_create_string_utf8(env, e.what(), NAPI_AUTO_LENGTH, &msg) == napi_ok) napi_create_error(env, nullptr, msg, &err);
  }
  napi_deferred d;
  napi_value promise = nullptr;
  if (err && napi_create_promise(env, &d, &promise) == napi_ok) napi_reject_deferred(env, d, err);
  return promise;
}

napi_valuetype type_of(napi_env env, napi_value v) {
  napi_valuetype t = napi_undefined;
  check(env, napi_typeof(env, v, &t));
  return t;
}

napi_value make_string(napi_env env, const std::string& s) {
  napi_value v;
  check(env, napi_create_string_utf8(env, s.data(), s.size(), &v));
  return v;
}
napi_value make_number(napi_env env, double x) {
  napi_value v;
  check(env, napi_create_double(env, x, &v));
  return v;
}
napi_value make_object(napi_env env) {
  napi_value v;
  check(env, napi_create_object(env, &v));
  return v;
}
napi_value make_id_array(napi_env env, const std::vector<int32_t>& ids) {
  napi_value arr;
  check(env, napi_create_array_with_length(env, ids.size(), &arr));
  for (size_t i = 0; i < ids.size(); ++i) check(env, napi_set_element(env, arr, static_cast<uint32_t>(i), make_number(env, ids[i])));
  return arr;
}
void set(napi_env env, napi_value obj, const char* name, napi_value v) { check(env, napi_set_named_property(env, obj, name, v)); }

std::string string_of(napi_env env, napi_value v, const std::string& what) {
  if (type_of(env, v) != napi_string) edgellm::throw_error(what, " must be a string");
  size_t n = 0;
  check(env, napi_get_value_string_utf8(env, v, nullptr, 0, &n));
  std::string s(n, '\0');
  check(env, napi_get_value_string_utf8(env, v, &s[0], n + 1, &n));
  return s;
}

// Options objects: a missing or undefined field keeps the default; a present one must be valid.
struct Options {
  napi_env env;
  napi_value obj;  // nullptr: no options given
  std::string where;

  Options(napi_env e, napi_value o, std::string w) : env(e), obj(nullptr), where(std::move(w)) {
    if (!o) return;
    const napi_valuetype t = type_of(env, o);
    if (t == napi_undefined || t == napi_null) return;
    if (t != napi_object) edgellm::throw_error(where, " must be an object");
    obj = o;
  }
  napi_value get(const char* name) const {
    if (!obj) return nullptr;
    napi_value v;
    check(env, napi_get_named_property(env, obj, name, &v));
    return type_of(env, v) == napi_undefined ? nullptr : v;
  }
  std::string field(const char* name) const { return where + "." + name; }
  double number(const char* name, double lo, double hi, double def) const {
    napi_value v = get(name);
    if (!v) return def;
    double x = NAN;
    if (type_of(env, v) == napi_number) check(env, napi_get_value_double(env, v, &x));
    if (!std::isfinite(x) || x < lo || x > hi) edgellm::throw_error(field(name), " must be a number in [", lo, ", ", hi, "]");
    return x;
  }
  int64_t integer(const char* name, int64_t lo, int64_t hi, int64_t def) const {
    const double x = number(name, static_cast<double>(lo), static_cast<double>(hi), static_cast<double>(def));
    if (x != std::floor(x)) edgellm::throw_error(field(name), " must be an integer, got ", x);
    return static_cast<int64_t>(x);
  }
  bool boolean(const char* name, bool def) const {
    napi_value v = get(name);
    if (!v) return def;
    bool b = false;
    if (type_of(env, v) != napi_boolean) edgellm::throw_error(field(name), " must be a boolean");
    check(env, napi_get_value_bool(env, v, &b));
    return b;
  }
  std::string text(const char* name, const std::string& def) const {
    napi_value v = get(name);
    return v ? string_of(env, v, field(name)) : def;
  }
};

uint32_t array_length(napi_env env, napi_value v, const std::string& what) {
  bool is_array = false;
  check(env, napi_is_array(env, v, &is_array));
  if (!is_array) edgellm::throw_error(what, " must be an array");
  uint32_t n = 0;
  check(env, napi_get_array_length(env, v, &n));
  return n;
}
napi_value element(napi_env env, napi_value arr, uint32_t i) {
  napi_value v;
  check(env, napi_get_element(env, arr, i, &v));
  return v;
}

// A JS value as JSON, through the engine's own JSON.stringify (objects, arrays, strings, numbers,
// booleans, null; functions and undefined members are dropped as JSON.stringify drops them).
edgellm::Json json_of(napi_env env, napi_value v, const std::string& what) {
  napi_value global, json, stringify, out;
  check(env, napi_get_global(env, &global));
  check(env, napi_get_named_property(env, global, "JSON", &json));
  check(env, napi_get_named_property(env, json, "stringify", &stringify));
  if (napi_call_function(env, json, stringify, 1, &v, &out) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    edgellm::throw_error(what, " cannot be written as JSON (a cycle or a BigInt?)");
  }
  if (type_of(env, out) != napi_string) edgellm::throw_error(what, " cannot be written as JSON");
  return edgellm::Json::parse(string_of(env, out, what), 64);
}

// Up to N arguments and `this`.
template <size_t N>
struct Args {
  napi_value argv[N] = {};
  size_t argc = N;
  napi_value self = nullptr;
  void* data = nullptr;
  Args(napi_env env, napi_callback_info info) {
    check(env, napi_get_cb_info(env, info, &argc, argv, &self, &data));
    for (size_t i = argc; i < N; ++i) argv[i] = nullptr;
  }
};

// ---- state shared by the JS objects and the worker threads ----

struct ModelState {
  std::shared_ptr<const edgellm::LlamaModel> model;
  std::shared_ptr<const edgellm::Tokenizer> tok;
  edgellm::SessionParams defaults;  // n_ctx, n_threads, kv_type from loadModel's options
  edgellm::ChatTemplate chat;       // the file's own (Jinja) template, else chatml
  std::string path;
  // Grammars compiled for this vocabulary (grammar / jsonSchema / tools), shared by its sessions;
  // made at the first constrained call.
  std::shared_ptr<edgellm::GrammarCache> grammars;
  std::mutex grammars_mu;
  edgellm::GrammarCache& grammar_cache() {
    std::lock_guard<std::mutex> lock(grammars_mu);
    if (!grammars) grammars = std::make_shared<edgellm::GrammarCache>(*tok);
    return *grammars;
  }
};

struct SessionState {
  std::shared_ptr<ModelState> model;  // keeps the weights alive while this session lives
  std::unique_ptr<edgellm::Session> session;
  std::string system_prompt;
  edgellm::ChatTemplate chat;
  edgellm::Json chat_kwargs;    // chatTemplateKwargs: extra template variables
  std::atomic<bool> cancel{false};
  bool busy = false;            // a generate() is running (JS thread only)
};

// What a JS Model / Session object owns (napi_wrap); close() empties it, the GC deletes it.
struct ModelBox {
  std::shared_ptr<ModelState> s;
};
struct SessionBox {
  std::shared_ptr<SessionState> s;
};

// Per-module data: the two classes' constructors.
struct ModuleData {
  napi_ref model_ctor = nullptr;
  napi_ref session_ctor = nullptr;
};

template <class Box>
void delete_box(napi_env, void* data, void*) {
  delete static_cast<Box*>(data);
}

template <class Box>
Box* unwrap(napi_env env, napi_value self, const char* what) {
  void* p = nullptr;
  if (!self || napi_unwrap(env, self, &p) != napi_ok || !p) edgellm::throw_error("this is not a ", what);
  return static_cast<Box*>(p);
}
ModelState& open_model(napi_env env, napi_value self) {
  ModelBox* b = unwrap<ModelBox>(env, self, "Model");
  if (!b->s) edgellm::throw_error("the model is closed");
  return *b->s;
}
std::shared_ptr<SessionState> open_session(napi_env env, napi_value self) {
  SessionBox* b = unwrap<SessionBox>(env, self, "Session");
  if (!b->s) edgellm::throw_error("the session is closed");
  return b->s;
}

// new Model / new Session from native code: the box travels as an external the constructor wraps.
napi_value construct(napi_env env, napi_ref ctor, void* box) {
  napi_value c, ext, obj;
  check(env, napi_get_reference_value(env, ctor, &c));
  check(env, napi_create_external(env, box, nullptr, nullptr, &ext));
  check(env, napi_new_instance(env, c, 1, &ext, &obj));
  return obj;
}
template <class Box>
napi_value class_constructor(napi_env env, napi_callback_info info, const char* made_by) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    void* box = nullptr;
    if (!a.argv[0] || type_of(env, a.argv[0]) != napi_external)
      edgellm::throw_error("use ", made_by, ", not new");
    check(env, napi_get_value_external(env, a.argv[0], &box));
    check(env, napi_wrap(env, a.self, box, delete_box<Box>, nullptr, nullptr));
    return a.self;
  });
}

napi_value reject_or_resolve(napi_env env, napi_deferred d, const std::string& error, napi_value value) {
  if (error.empty()) {
    napi_resolve_deferred(env, d, value);
  } else {
    napi_value msg, err;
    napi_create_string_utf8(env, error.data(), error.size(), &msg);
    napi_create_error(env, nullptr, msg, &err);
    napi_reject_deferred(env, d, err);
  }
  return nullptr;
}

// Queues w (a work struct with deferred and work members) as async work named `name`; returns its
// promise. complete() owns w from here on.
template <class W>
napi_value queue_promise_work(napi_env env, const char* name, napi_async_execute_callback execute,
                              napi_async_complete_callback complete, std::unique_ptr<W>& w) {
  napi_value promise, resource_name;
  check(env, napi_create_promise(env, &w->deferred, &promise));
  check(env, napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name));
  check(env, napi_create_async_work(env, nullptr, resource_name, execute, complete, w.get(), &w->work));
  check(env, napi_queue_async_work(env, w->work));
  w.release();
  return promise;
}

edgellm::DType kv_type_of(const std::string& name, const std::string& field) {
  edgellm::DType t = edgellm::DType::F32;
  if (!edgellm::dtype_from_name(name, &t) || (t != edgellm::DType::F32 && t != edgellm::DType::F16 && t != edgellm::DType::Q8_0))
    edgellm::throw_error(field, ": '", name, "' is not a KV cache type (f32, f16 or q8_0)");
  return t;
}

// ctx / threads / kvType: loadModel's options, and a session's overrides of them.
edgellm::SessionParams session_params(const Options& o, edgellm::SessionParams sp) {
  sp.n_ctx = static_cast<int>(o.integer("ctx", 0, 1 << 24, sp.n_ctx));
  sp.n_threads = static_cast<int>(o.integer("threads", 0, 1024, sp.n_threads));
  if (o.get("kvType")) sp.kv_type = kv_type_of(o.text("kvType", ""), o.field("kvType"));
  return sp;
}

// ---- loadModel(path, options) -> Promise<Model> ----

struct LoadWork {
  ModuleData* mod;
  std::string path;
  edgellm::LoadOptions load;
  edgellm::SessionParams defaults;
  napi_deferred deferred = nullptr;
  napi_async_work work = nullptr;
  std::shared_ptr<ModelState> result;
  std::string error;
  // onProgress / signal: fractions come to the JS thread through tsfn, which calls onProgress and
  // reads signal.aborted; `cancel` is what the loader's progress callback answers.
  napi_threadsafe_function tsfn = nullptr;
  napi_ref signal = nullptr;
  std::atomic<bool> cancel{false};
};

bool signal_aborted(napi_env env, napi_value signal) {
  napi_value v;
  bool aborted = false;
  if (napi_get_named_property(env, signal, "aborted", &v) == napi_ok) napi_get_value_bool(env, v, &aborted);
  return aborted;
}

// On the JS thread, for each fraction the loader reports: onProgress(fraction) (a throw or a
// false return cancels the load, as an aborted signal does).
void load_progress_call(napi_env env, napi_value cb, void* context, void* data) {
  std::unique_ptr<float> f(static_cast<float*>(data));
  auto* w = static_cast<LoadWork*>(context);
  if (!env) return;
  napi_valuetype t = napi_undefined;
  if (cb && napi_typeof(env, cb, &t) == napi_ok && t == napi_function) {
    napi_value undefined, arg, ret;
    napi_get_undefined(env, &undefined);
    napi_create_double(env, *f, &arg);
    if (napi_call_function(env, undefined, cb, 1, &arg, &ret) != napi_ok) {
      napi_value exc;
      napi_get_and_clear_last_exception(env, &exc);
      w->cancel.store(true);
    } else if (napi_typeof(env, ret, &t) == napi_ok && t == napi_boolean) {
      bool go_on = true;
      napi_get_value_bool(env, ret, &go_on);
      if (!go_on) w->cancel.store(true);
    }
  }
  napi_value signal;
  if (w->signal && napi_get_reference_value(env, w->signal, &signal) == napi_ok && signal && signal_aborted(env, signal)) w->cancel.store(true);
}

void load_settle(napi_env env, LoadWork* w);
void load_progress_finalize(napi_env env, void* data, void*) { load_settle(env, static_cast<LoadWork*>(data)); }

// loadModel's onProgress and signal options: the loader's progress callback posts each fraction
// (blocking on a queue of one, so the load runs at most a step ahead of the JS side) and stops
// the load once the JS side said so.
void load_progress_options(napi_env env, const Options& o, LoadWork* w, napi_value name) {
  napi_value on_progress = o.get("onProgress"), signal = o.get("signal");
  if (on_progress && type_of(env, on_progress) != napi_function) edgellm::throw_error(o.field("onProgress"), " must be a function");
  if (signal && type_of(env, signal) != napi_object) edgellm::throw_error(o.field("signal"), " must be an AbortSignal");
  if (signal && signal_aborted(env, signal)) edgellm::throw_error("load cancelled (the signal was already aborted)");
  if (!on_progress && !signal) return;
  if (signal) check(env, napi_create_reference(env, signal, 1, &w->signal));
  check(env, napi_create_threadsafe_function(env, on_progress, nullptr, name, 1, 1, w, load_progress_finalize, w,
                                             load_progress_call, &w->tsfn));
  w->load.progress = [w](float f) {
    auto* p = new float(f);
    if (napi_call_threadsafe_function(w->tsfn, p, napi_tsfn_blocking) != napi_ok) delete p;
    return !w->cancel.load();
  };
}

void load_execute(napi_env, void* data) {
  auto* w = static_cast<LoadWork*>(data);
  try {
    auto st = std::make_shared<ModelState>();
    st->model = edgellm::LlamaModel::load(w->path, w->load);
    st->tok = std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(st->model->file()));
    st->defaults = w->defaults;
    if (st->defaults.n_ctx == 0) st->defaults.n_ctx = edgellm::default_context(st->model->config());
    const std::string src = st->model->file().get_string_or("tokenizer.chat_template", "");
    try {
      st->chat = edgellm::ChatTemplate::from_model(src, *st->tok);
    } catch (const edgellm::jinja::TemplateError&) {  // unparsable: the built-in format it resembles
      const std::string name = edgellm::detect_chat_template(src);
      st->chat = edgellm::ChatTemplate::builtin(name.empty() ? "chatml" : name);
    }
    st->path = w->path;
    w->result = std::move(st);
  } catch (const std::exception& e) {
    w->error = e.what();
  }
}

void load_complete(napi_env env, napi_status, void* data) {
  auto* w = static_cast<LoadWork*>(data);
  napi_delete_async_work(env, w->work);
  w->work = nullptr;
  if (w->tsfn) napi_release_threadsafe_function(w->tsfn, napi_tsfn_release);  // its finalizer settles
  else load_settle(env, w);
}

// Settles loadModel's promise: after the last progress call (the thread-safe function's
// finalizer), or from the async work's completion when there is none.
void load_settle(napi_env env, LoadWork* raw) {
  std::unique_ptr<LoadWork> w(raw);
  if (w->signal) napi_delete_reference(env, w->signal);
  napi_value model = nullptr;
  if (w->error.empty()) {
    auto* box = new ModelBox{std::move(w->result)};
    try {
      model = construct(env, w->mod->model_ctor, box);
    } catch (const std::exception& e) {
      delete box;  // not wrapped
      w->error = e.what();
    }
  }
  reject_or_resolve(env, w->deferred, w->error, model);
}

napi_value LoadModel(napi_env env, napi_callback_info info) {
  return guarded_promise(env, [&]() -> napi_value {
    Args<2> a(env, info);
    if (!a.argv[0]) edgellm::throw_error("loadModel(path, options?): path is required");
    auto w = std::make_unique<LoadWork>();
    w->mod = static_cast<ModuleData*>(a.data);
    w->path = string_of(env, a.argv[0], "loadModel: path");
    const Options o(env, a.argv[1], "loadModel options");
    w->defaults = session_params(o, edgellm::SessionParams{});
    w->load.mem_budget = static_cast<uint64_t>(o.number("memBudgetMiB", 1, 1024.0 * 1024 * 1024, 0) * 1024 * 1024);
    w->load.repack = o.boolean("repack", true);
    w->load.plan = edgellm::memory_plan_params(w->defaults);
    napi_value name;
    check(env, napi_create_string_utf8(env, "edgellm.loadModel", NAPI_AUTO_LENGTH, &name));
    load_progress_options(env, o, w.get(), name);
    return queue_promise_work(env, "edgellm.loadModel", load_execute, load_complete, w);
  });
}

// ---- Model methods ----

napi_value ModelCtor(napi_env env, napi_callback_info info) { return class_constructor<ModelBox>(env, info, "loadModel()"); }

napi_value ModelCreateSession(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    ModelBox* box = unwrap<ModelBox>(env, a.self, "Model");
    if (!box->s) edgellm::throw_error("the model is closed");
    const Options o(env, a.argv[0], "createSession options");
    auto st = std::make_shared<SessionState>();
    st->model = box->s;
    st->system_prompt = o.text("systemPrompt", "");
    // A built-in format's name or Jinja source; an unknown name fails here, naming the known ones.
    const std::string tmpl = o.text("chatTemplate", "");
    st->chat = tmpl.empty() ? box->s->chat : edgellm::ChatTemplate::from_flag(tmpl, *box->s->tok);
    if (napi_value kw = o.get("chatTemplateKwargs")) {
      st->chat_kwargs = json_of(env, kw, o.field("chatTemplateKwargs"));
      if (!st->chat_kwargs.is_object()) edgellm::throw_error(o.field("chatTemplateKwargs"), " must be an object");
    }
    st->session = std::make_unique<edgellm::Session>(st->model->model, st->model->tok, session_params(o, st->model->defaults));
    auto* sbox = new SessionBox{std::move(st)};
    try {
      return construct(env, static_cast<ModuleData*>(a.data)->session_ctor, sbox);
    } catch (...) {
      delete sbox;
      throw;
    }
  });
}

napi_value ModelTokenize(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<2> a(env, info);
    const ModelState& m = open_model(env, a.self);
    if (!a.argv[0]) edgellm::throw_error("tokenize(text, options?): text is required");
    const std::string text = string_of(env, a.argv[0], "tokenize: text");
    const Options o(env, a.argv[1], "tokenize options");
    // Text is text: "<|im_end|>" in it is its characters unless {special: true} asks for control
    // tokens to be matched (parseSpecial: the older name of the option).
    const bool special = o.boolean("special", o.boolean("parseSpecial", false));
    const std::vector<int32_t> ids = m.tok->encode(text, o.boolean("addBos", m.tok->add_bos()), special);
    return make_id_array(env, ids);
  });
}

std::vector<int32_t> token_ids(napi_env env, napi_value v, const char* what) {
  if (!v) edgellm::throw_error(what, " is required");
  bool typed = false;
  check(env, napi_is_typedarray(env, v, &typed));
  std::vector<int32_t> ids;
  const uint32_t n = typed ? 0 : array_length(env, v, what);
  if (typed) {  // Int32Array / Uint32Array of ids
    napi_typedarray_type t;
    size_t len = 0;
    void* p = nullptr;
    check(env, napi_get_typedarray_info(env, v, &t, &len, &p, nullptr, nullptr));
    if (t != napi_int32_array && t != napi_uint32_array) edgellm::throw_error(what, " must be an array, Int32Array or Uint32Array");
    ids.assign(static_cast<const int32_t*>(p), static_cast<const int32_t*>(p) + len);
    return ids;
  }
  for (uint32_t i = 0; i < n; ++i) {
    napi_value e = element(env, v, i);
    int32_t id = 0;
    if (type_of(env, e) != napi_number) edgellm::throw_error(what, "[", i, "] must be a number");
    check(env, napi_get_value_int32(env, e, &id));
    ids.push_back(id);
  }
  return ids;
}

napi_value ModelDetokenize(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<2> a(env, info);
    const ModelState& m = open_model(env, a.self);
    const std::vector<int32_t> ids = token_ids(env, a.argv[0], "detokenize: tokens");
    const Options o(env, a.argv[1], "detokenize options");
    return make_string(env, m.tok->decode(ids, o.boolean("removeSpecial", false), o.boolean("unparseSpecial", false)));
  });
}

napi_value ModelDescribe(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    const ModelState& m = open_model(env, a.self);
    const edgellm::LlamaConfig& c = m.model->config();
    napi_value out = make_object(env), cfg = make_object(env), def = make_object(env);
    set(env, out, "version", make_string(env, EDGELLM_VERSION_STRING));
    set(env, out, "path", make_string(env, m.path));
    set(env, out, "fileBytes", make_number(env, static_cast<double>(m.model->file().file_size())));
    const std::pair<const char*, int> shape[] = {{"nLayer", c.n_layer}, {"nEmbd", c.n_embd}, {"nHead", c.n_head}, {"nHeadKv", c.n_head_kv},
                                                 {"nFf", c.n_ff}, {"nVocab", c.n_vocab}, {"nCtxTrain", c.n_ctx_train}};
    for (const auto& kv : shape) set(env, cfg, kv.first, make_number(env, kv.second));
    set(env, out, "config", cfg);
    set(env, def, "ctx", make_number(env, m.defaults.n_ctx));
    set(env, def, "threads", make_number(env, m.defaults.n_threads > 0 ? m.defaults.n_threads : edgellm::default_thread_count()));
    set(env, def, "kvType", make_string(env, edgellm::dtype_name(m.defaults.kv_type)));
    set(env, out, "defaults", def);
    set(env, out, "chatTemplate", make_string(env, m.chat.name()));
    set(env, out, "kernels", make_string(env, edgellm::describe_kernels(m.model->kernel_table())));
    set(env, out, "repacked", make_string(env, m.model->weights().describe_repack()));
    set(env, out, "residency", make_string(env, m.model->weights().describe_residency()));
    const auto plan = edgellm::plan_memory(c, m.model->file().file_size(), edgellm::memory_plan_params(m.defaults));
    set(env, out, "memoryPlan", make_string(env, edgellm::format_memory_plan(plan)));
    return out;
  });
}

napi_value ModelClose(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    unwrap<ModelBox>(env, a.self, "Model")->s.reset();  // sessions still open keep the weights
    return nullptr;
  });
}

// ---- model.embed(texts, options?) -> Promise<Float32Array[]> ----
// On the host's worker pool, as loadModel: the texts through the batch path (engine/embedding.hpp).

struct EmbedWork {
  std::shared_ptr<ModelState> model;
  std::vector<std::string> texts;
  edgellm::EmbedParams params;
  napi_deferred deferred = nullptr;
  napi_async_work work = nullptr;
  std::vector<edgellm::Embedding> result;
  std::string error;
};

void embed_execute(napi_env, void* data) {
  auto* w = static_cast<EmbedWork*>(data);
  try {
    edgellm::Embedder e(w->model->model, w->model->tok, w->params);
    w->result = e.embed(w->texts);
  } catch (const std::exception& e) {
    w->error = e.what();
  }
}

napi_value make_float32_array(napi_env env, const std::vector<float>& v) {
  void* bytes = nullptr;
  napi_value buf, arr;
  check(env, napi_create_arraybuffer(env, v.size() * sizeof(float), &bytes, &buf));
  if (!v.empty()) std::copy(v.begin(), v.end(), static_cast<float*>(bytes));
  check(env, napi_create_typedarray(env, napi_float32_array, v.size(), buf, 0, &arr));
  return arr;
}

void embed_complete(napi_env env, napi_status, void* data) {
  std::unique_ptr<EmbedWork> w(static_cast<EmbedWork*>(data));
  napi_delete_async_work(env, w->work);
  napi_value out = nullptr;
  if (w->error.empty()) {
    try {
      check(env, napi_create_array_with_length(env, w->result.size(), &out));
      for (size_t i = 0; i < w->result.size(); ++i)
        check(env, napi_set_element(env, out, static_cast<uint32_t>(i), make_float32_array(env, w->result[i].data)));
    } catch (const std::exception& e) {
      w->error = e.what();
    }
  }
  reject_or_resolve(env, w->deferred, w->error, out);
}

napi_value ModelEmbed(napi_env env, napi_callback_info info) {
  return guarded_promise(env, [&]() -> napi_value {
    Args<2> a(env, info);
    auto w = std::make_unique<EmbedWork>();
    open_model(env, a.self);  // "the model is closed" otherwise
    w->model = unwrap<ModelBox>(env, a.self, "Model")->s;  // the weights live until the work completes
    if (!a.argv[0]) edgellm::throw_error("embed(texts, options?): texts is required");
    if (type_of(env, a.argv[0]) == napi_string) {
      w->texts.push_back(string_of(env, a.argv[0], "embed: texts"));
    } else {
      const uint32_t n = array_length(env, a.argv[0], "embed: texts");
      for (uint32_t i = 0; i < n; ++i) w->texts.push_back(string_of(env, element(env, a.argv[0], i), "embed: texts[" + std::to_string(i) + "]"));
    }
    const Options o(env, a.argv[1], "embed options");
    if (o.get("pooling")) w->params.pooling = edgellm::parse_pooling(o.text("pooling", ""), o.field("pooling"));
    w->params.normalize = o.boolean("normalize", true);
    w->params.n_batch = static_cast<int>(o.integer("batchSize", 1, 1 << 20, w->params.n_batch));
    w->params.n_ctx = w->model->defaults.n_ctx;
    w->params.n_threads = w->model->defaults.n_threads;
    return queue_promise_work(env, "edgellm.embed", embed_execute, embed_complete, w);
  });
}

// ---- session.generate(prompt | messages, options?, onToken?) -> Promise<Result> ----

struct GenerateWork {
  std::shared_ptr<SessionState> st;
  std::string prompt;     // the text evaluated after the session's history
  std::vector<int32_t> tokens;  // messages: the whole conversation, tokenized
  bool chat = false;
  edgellm::GenerateParams gp;
  // grammar / jsonSchema / tools: compiled on the generating thread (a grammar's compile may take
  // most of a second; the model's cache keeps it for the next call).
  std::string gbnf;
  std::vector<std::string> triggers;
  bool tools = false;
  edgellm::ToolCallFormat tool_format = edgellm::ToolCallFormat::None;
  edgellm::ToolChoice tool_choice;
  napi_threadsafe_function tsfn = nullptr;  // pieces to onToken (when given); its finalizer settles
  bool streaming = false;       // onToken was given
  bool stream_stopped = false;  // onToken returned false or threw (JS thread)
  napi_ref stream_error = nullptr;
  napi_deferred deferred = nullptr;
  edgellm::GenerateResult result;
  std::string error;
};

const char* stop_reason_js(edgellm::StopReason r) {
  switch (r) {
    case edgellm::StopReason::EndOfGeneration: return "eos";
    case edgellm::StopReason::StopString: return "stop";
    case edgellm::StopReason::MaxTokens: return "maxTokens";
    case edgellm::StopReason::Deadline: return "deadline";
    case edgellm::StopReason::ContextFull: return "contextFull";
    case edgellm::StopReason::Cancelled: return "cancelled";
    case edgellm::StopReason::None: break;
  }
  return "none";
}

void generate_execute(napi_env, void* data) {
  auto* w = static_cast<GenerateWork*>(data);
  SessionState& st = *w->st;
  try {
    if (st.cancel.load()) {  // cancelled before the worker started
      w->result.reason = edgellm::StopReason::Cancelled;
      return;
    }
    auto on_piece = [w](const std::string& piece) {
      if (w->streaming) {
        auto* p = new std::string(piece);
        // Blocking on a queue of one: decoding runs at most a piece ahead of the JS callback.
        if (napi_call_threadsafe_function(w->tsfn, p, napi_tsfn_blocking) != napi_ok) delete p;
      }
      return !w->st->cancel.load();
    };
    if (!w->gbnf.empty()) {
      w->gp.grammar.masker = st.model->grammar_cache().get(w->gbnf);
      w->gp.grammar.triggers = w->triggers;
    }
    if (w->chat) {
      // What the KV cache holds of the conversation so far is kept (the longest common prefix
      // of tokens): only the rest is evaluated; an edited history starts over where it differs.
      std::vector<int32_t> delta = st.session->keep_common_prefix(w->tokens);
      w->result = st.session->generate(delta, w->gp, on_piece);
    } else {
      w->result = st.session->generate(w->prompt, w->gp, on_piece);
    }
  } catch (const std::exception& e) {
    w->error = e.what();
  }
}

napi_value result_object(napi_env env, const GenerateWork& w) {
  const edgellm::GenerateResult& r = w.result;
  napi_value out = make_object(env), t = make_object(env);
  edgellm::ParsedToolCalls calls;
  if (w.tools) calls = edgellm::parse_tool_calls(w.tool_format, r.text);
  if (calls.calls.empty()) {
    set(env, out, "text", make_string(env, r.text));
  } else {  // the text around the calls, and the calls (arguments as a JSON string, as OpenAI's)
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    set(env, out, "text", make_string(env, calls.content));
    napi_value list;
    check(env, napi_create_array_with_length(env, calls.calls.size(), &list));
    for (size_t i = 0; i < calls.calls.size(); ++i) {
      const edgellm::ToolCall& c = calls.calls[i];
      napi_value call = make_object(env);
      set(env, call, "id", make_string(env, c.id.empty() ? edgellm::new_tool_call_id(w.tool_format, rng) : c.id));
      set(env, call, "name", make_string(env, c.name));
      set(env, call, "arguments", make_string(env, c.arguments));
      check(env, napi_set_element(env, list, static_cast<uint32_t>(i), call));
    }
    set(env, out, "toolCalls", list);
  }
  set(env, out, "tokens", make_id_array(env, r.tokens));
  set(env, out, "stopReason", make_string(env, stop_reason_js(r.reason)));
  set(env, t, "promptTokens", make_number(env, r.n_prompt));
  set(env, t, "prefillMs", make_number(env, r.prefill_ms));
  set(env, t, "ttftMs", make_number(env, r.ttft_ms));
  set(env, t, "decodeMs", make_number(env, r.decode_ms));
  set(env, t, "prefillTokensPerSec", make_number(env, r.prefill_tps()));
  set(env, t, "decodeTokensPerSec", make_number(env, r.decode_tps()));
  set(env, t, "peakRssBytes", make_number(env, static_cast<double>(r.peak_rss_bytes)));
  set(env, out, "timings", t);
  return out;
}

// Settles the promise, on the JS thread after the last streamed piece was delivered (the
// thread-safe function's finalizer, once the generating thread released it).
void generate_settle(napi_env env, GenerateWork* w) {
  w->st->busy = false;
  if (w->stream_error) {  // onToken threw: its exception rejects the call
    napi_value err;
    napi_get_reference_value(env, w->stream_error, &err);
    napi_delete_reference(env, w->stream_error);
    napi_reject_deferred(env, w->deferred, err);
    return;
  }
  napi_value value = nullptr;
  if (w->error.empty()) {
    try {
      value = result_object(env, *w);
    } catch (const std::exception& e) {
      w->error = e.what();
    }
  }
  reject_or_resolve(env, w->deferred, w->error, value);
}

// finalize_data: a heap std::shared_ptr<GenerateWork>, the JS side's share of the work (the
// generating thread holds the other until it returns).
void stream_finalize(napi_env env, void* finalize_data, void*) {
  std::unique_ptr<std::shared_ptr<GenerateWork>> share(static_cast<std::shared_ptr<GenerateWork>*>(finalize_data));
  generate_settle(env, share->get());
}

napi_value no_op(napi_env, napi_callback_info) { return nullptr; }

// Generation runs on a thread of its own, not on the host's worker pool (libuv's 4 threads in
// Node: long generations there would stall fs and dns); the thread releases the thread-safe
// function when done, and its finalizer settles the promise on the JS thread.
void start_generate_thread(std::shared_ptr<GenerateWork> w) {
  try {
    std::thread([w] {
      generate_execute(nullptr, w.get());
      napi_release_threadsafe_function(w->tsfn, napi_tsfn_release);
    }).detach();
  } catch (const std::exception& e) {  // no thread to be had: the call rejects
    w->error = e.what();
    napi_release_threadsafe_function(w->tsfn, napi_tsfn_release);
  }
}

void stream_call(napi_env env, napi_value cb, void* context, void* data) {
  std::unique_ptr<std::string> piece(static_cast<std::string*>(data));
  auto* w = static_cast<GenerateWork*>(context);
  if (!env || !w->streaming || w->stream_stopped) return;  // shutting down, no onToken, or the consumer said stop
  napi_value undefined, arg, ret;
  if (napi_get_undefined(env, &undefined) != napi_ok ||
      napi_create_string_utf8(env, piece->data(), piece->size(), &arg) != napi_ok)
    return;
  if (napi_call_function(env, undefined, cb, 1, &arg, &ret) != napi_ok) {
    napi_value exc;  // onToken threw: stop, and reject with its exception
    if (napi_get_and_clear_last_exception(env, &exc) == napi_ok && !w->stream_error) napi_create_reference(env, exc, 1, &w->stream_error);
    w->stream_stopped = true;
    w->st->cancel.store(true);
    return;
  }
  bool go_on = true;
  napi_valuetype t;
  if (napi_typeof(env, ret, &t) == napi_ok && t == napi_boolean) napi_get_value_bool(env, ret, &go_on);
  if (!go_on) {
    w->stream_stopped = true;
    w->st->cancel.store(true);
  }
}

// Messages as the template sees them: role and content (a string), and the other members as
// they are (tool_calls, name, tool_call_id, reasoning_content, content parts) for Jinja templates.
std::vector<edgellm::ChatMessage> messages_of(napi_env env, napi_value arr) {
  const uint32_t n = array_length(env, arr, "generate: messages");
  std::vector<edgellm::ChatMessage> msgs;
  for (uint32_t i = 0; i < n; ++i) {
    const std::string where = "generate: messages[" + std::to_string(i) + "]";
    const Options m(env, element(env, arr, i), where);
    if (!m.obj) edgellm::throw_error(where, " must be an object {role, content}");
    edgellm::ChatMessage msg{m.text("role", ""), ""};
    if (msg.role.empty()) edgellm::throw_error(where, ".role must be a non-empty string");
    const edgellm::Json j = json_of(env, m.obj, where);
    for (const auto& kv : j.as_object()) {
      if (kv.first == "role") continue;
      if (kv.first == "content" && kv.second.is_string()) {
        msg.content = kv.second.as_string();
        continue;
      }
      if (kv.first == "content" && kv.second.is_array()) {  // text parts: their text is the content
        for (const edgellm::Json& part : kv.second.as_array())
          if (const edgellm::Json* t = part.is_object() ? part.find("text") : nullptr; t && t->is_string())
            msg.content += t->as_string();
      } else if (kv.first == "content" && !kv.second.is_null()) {
        edgellm::throw_error(where, ".content must be a string or an array of {type: 'text', text} parts");
      }
      if (msg.extra.is_null()) msg.extra = edgellm::Json::object();
      msg.extra.set(kv.first, kv.second);
    }
    msgs.push_back(std::move(msg));
  }
  if (msgs.empty()) edgellm::throw_error("generate: messages is empty");
  return msgs;
}

edgellm::GenerateParams generate_params(const Options& o) {
  edgellm::GenerateParams gp;
  gp.max_tokens = static_cast<int>(o.integer("maxTokens", -1, 1 << 24, gp.max_tokens));
  gp.sampler.temperature = static_cast<float>(o.number("temperature", 0, 1e6, gp.sampler.temperature));
  gp.sampler.top_p = static_cast<float>(o.number("topP", 0, 1, gp.sampler.top_p));
  gp.sampler.top_k = static_cast<int>(o.integer("topK", 0, 1 << 30, gp.sampler.top_k));
  gp.sampler.min_p = static_cast<float>(o.number("minP", 0, 1, gp.sampler.min_p));
  gp.sampler.repeat_penalty = static_cast<float>(o.number("repeatPenalty", 1e-6, 1e6, gp.sampler.repeat_penalty));
  gp.sampler.seed = static_cast<uint64_t>(o.integer("seed", 0, (int64_t{1} << 53), static_cast<int64_t>(gp.sampler.seed)));
  gp.deadline_ms = o.number("deadlineMs", 0, 1e12, 0);
  gp.ignore_eos = o.boolean("ignoreEos", false);
  if (napi_value stop = o.get("stop")) {
    const uint32_t n = array_length(o.env, stop, o.field("stop"));
    for (uint32_t i = 0; i < n; ++i) gp.stop.push_back(string_of(o.env, element(o.env, stop, i), o.field("stop") + "[" + std::to_string(i) + "]"));
  }
  return gp;
}

// grammar (GBNF text), jsonSchema (an object), or tools ([{type: "function", function: {name,
// description, parameters}}], with toolChoice "auto" | "required" | "none" | {type: "function",
// function: {name}} and parallelToolCalls; messages only: the tools go to the template, the
// calls come back as result.toolCalls in the format the template teaches).
void constraints(const Options& o, const SessionState& st, GenerateWork& w, edgellm::ChatRequest& req) {
  int given = 0;
  if (o.get("grammar")) {
    w.gbnf = o.text("grammar", "");
    ++given;
  }
  if (napi_value v = o.get("jsonSchema")) {
    try {
      w.gbnf = edgellm::json_schema_to_gbnf(json_of(o.env, v, o.field("jsonSchema")));
    } catch (const edgellm::Error& e) {
      edgellm::throw_error(o.field("jsonSchema"), ": ", e.what());
    }
    ++given;
  }
  napi_value tools = o.get("tools");
  if (!tools) {
    if (given > 1) edgellm::throw_error("generate options: give one of grammar and jsonSchema");
    return;
  }
  if (!w.chat) edgellm::throw_error(o.field("tools"), ": tools need messages (a chat), not a prompt string");
  const edgellm::Json tj = json_of(o.env, tools, o.field("tools"));
  std::vector<edgellm::ToolFunction> fns;
  try {
    fns = edgellm::tool_functions(tj);
    if (napi_value c = o.get("toolChoice")) w.tool_choice = edgellm::ToolChoice::parse(json_of(o.env, c, o.field("toolChoice")));
  } catch (const edgellm::Error& e) {
    edgellm::throw_error(o.field("tools"), ": ", e.what());
  }
  req.tools = tj;
  if (fns.empty() || w.tool_choice.mode == edgellm::ToolChoice::None) return;
  if (given > 0) edgellm::throw_error("generate options: tools and grammar / jsonSchema cannot both constrain the answer");
  w.tools = true;
  w.tool_format = edgellm::tool_call_format_of(st.chat.source());
  try {
    const edgellm::ToolCallGrammar g =
        edgellm::tool_call_grammar(w.tool_format, fns, w.tool_choice, o.boolean("parallelToolCalls", true));
    w.gbnf = g.gbnf;
    w.triggers = g.triggers;
  } catch (const edgellm::Error& e) {
    edgellm::throw_error(o.field("tools"), ": ", e.what());
  }
}

napi_value SessionGenerate(napi_env env, napi_callback_info info) {
  return guarded_promise(env, [&]() -> napi_value {
    Args<3> a(env, info);
    std::shared_ptr<SessionState> st = open_session(env, a.self);
    if (st->busy) edgellm::throw_error("generate: this session is already generating (one call at a time per session)");
    auto w = std::make_unique<GenerateWork>();
    w->st = st;
    if (!a.argv[0]) edgellm::throw_error("generate(prompt | messages, options?, onToken?): a prompt is required");
    if (type_of(env, a.argv[0]) == napi_string) {
      w->prompt = string_of(env, a.argv[0], "generate: prompt");
    } else {
      std::vector<edgellm::ChatMessage> msgs = messages_of(env, a.argv[0]);
      if (!st->system_prompt.empty() && msgs.front().role != "system") msgs.insert(msgs.begin(), {"system", st->system_prompt});
      w->chat = true;
      // Rendered with the template and tokenized with what people wrote kept as text: a
      // "<|im_end|>" typed into a chat box is those characters, not the control token.
      edgellm::ChatRequest req;
      req.messages = std::move(msgs);
      req.kwargs = st->chat_kwargs;
      if (a.argv[1] && type_of(env, a.argv[1]) == napi_object) constraints(Options(env, a.argv[1], "generate options"), *st, *w, req);
      w->tokens = st->chat.tokenize(req, *st->model->tok);
    }
    if (a.argv[1] && !a.argv[2] && type_of(env, a.argv[1]) == napi_function) std::swap(a.argv[1], a.argv[2]);  // (prompt, onToken)
    w->gp = generate_params(Options(env, a.argv[1], "generate options"));
    if (!w->chat && a.argv[1] && type_of(env, a.argv[1]) == napi_object) {
      edgellm::ChatRequest unused;
      constraints(Options(env, a.argv[1], "generate options"), *st, *w, unused);
    }
    if (a.argv[2] && type_of(env, a.argv[2]) != napi_undefined) {
      if (type_of(env, a.argv[2]) != napi_function) edgellm::throw_error("generate: onToken must be a function");
    } else {
      a.argv[2] = nullptr;
    }
    napi_value promise, name;
    check(env, napi_create_string_utf8(env, "edgellm.generate", NAPI_AUTO_LENGTH, &name));
    check(env, napi_create_promise(env, &w->deferred, &promise));
    std::shared_ptr<GenerateWork> work(w.release());
    work->streaming = a.argv[2] != nullptr;
    // A queue of one piece (onToken may be absent: the function then only settles the promise
    // from its finalizer, after the last piece was delivered).
    napi_value fn = a.argv[2];
    if (!fn) check(env, napi_create_function(env, "onToken", NAPI_AUTO_LENGTH, no_op, nullptr, &fn));  // a function for every host's NAPI
    auto* share = new std::shared_ptr<GenerateWork>(work);
    const napi_status s = napi_create_threadsafe_function(env, fn, nullptr, name, 1, 1, share, stream_finalize,
                                                          work.get(), stream_call, &work->tsfn);
    if (s != napi_ok) delete share;
    check(env, s);
    st->cancel.store(false);
    st->busy = true;
    start_generate_thread(std::move(work));
    return promise;
  });
}

napi_value SessionCtor(napi_env env, napi_callback_info info) { return class_constructor<SessionBox>(env, info, "model.createSession()"); }

napi_value SessionCancel(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    SessionBox* b = unwrap<SessionBox>(env, a.self, "Session");
    if (b->s && b->s->busy) {
      b->s->cancel.store(true);
      b->s->session->cancel();  // also stops a prompt being evaluated, between chunks
    }
    return nullptr;
  });
}

napi_value SessionReset(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    std::shared_ptr<SessionState> st = open_session(env, a.self);
    if (st->busy) edgellm::throw_error("reset: the session is generating (cancel() and await it first)");
    st->session->reset();
    return nullptr;
  });
}

napi_value SessionClose(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    SessionBox* b = unwrap<SessionBox>(env, a.self, "Session");
    if (b->s && b->s->busy) {  // the running call ends as cancelled; its work frees the session
      b->s->cancel.store(true);
      b->s->session->cancel();
    }
    b->s.reset();
    return nullptr;
  });
}

napi_value SessionNPast(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    Args<1> a(env, info);
    std::shared_ptr<SessionState> st = open_session(env, a.self);
    if (st->busy) edgellm::throw_error("nPast: the session is generating (its KV cache is changing)");
    return make_number(env, st->session->n_past());
  });
}

// ---- session.save(path) / session.restore(path) -> Promise<void> ----

// The state on storage (Session::save / restore, engine/session_file.hpp), on the worker pool; the
// session counts as busy meanwhile (generate() and another save/restore are refused).
struct StateFileWork {
  std::shared_ptr<SessionState> st;
  std::string path;
  bool save = true;
  napi_deferred deferred = nullptr;
  napi_async_work work = nullptr;
  std::string error;
};

void state_file_execute(napi_env, void* data) {
  auto* w = static_cast<StateFileWork*>(data);
  try {
    if (w->save) w->st->session->save(w->path);
    else w->st->session->restore(w->path);
  } catch (const std::exception& e) {
    w->error = e.what();
  }
}

void state_file_complete(napi_env env, napi_status, void* data) {
  std::unique_ptr<StateFileWork> w(static_cast<StateFileWork*>(data));
  napi_delete_async_work(env, w->work);
  w->st->busy = false;
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  reject_or_resolve(env, w->deferred, w->error, undefined);
}

napi_value state_file_call(napi_env env, napi_callback_info info, bool save) {
  return guarded_promise(env, [&]() -> napi_value {
    Args<1> a(env, info);
    const char* what = save ? "save" : "restore";
    std::shared_ptr<SessionState> st = open_session(env, a.self);
    if (!a.argv[0]) edgellm::throw_error(what, "(path): path is required");
    if (st->busy) edgellm::throw_error(what, ": the session is busy (a generate(), save() or restore() is running)");
    auto w = std::make_unique<StateFileWork>();
    w->st = st;
    w->save = save;
    w->path = string_of(env, a.argv[0], std::string(what) + ": path");
    napi_value promise, name;
    check(env, napi_create_promise(env, &w->deferred, &promise));
    check(env, napi_create_string_utf8(env, save ? "edgellm.save" : "edgellm.restore", NAPI_AUTO_LENGTH, &name));
    check(env, napi_create_async_work(env, nullptr, name, state_file_execute, state_file_complete, w.get(), &w->work));
    check(env, napi_queue_async_work(env, w->work));
    st->busy = true;
    w.release();  // state_file_complete owns it
    return promise;
  });
}

napi_value SessionSave(napi_env env, napi_callback_info info) { return state_file_call(env, info, true); }
napi_value SessionRestore(napi_env env, napi_callback_info info) { return state_file_call(env, info, false); }

// ---- registration ----

// Class methods as a JS class has them (writable, configurable); the module's exports enumerable
// (Object.keys and console.log show them). Plain bits: older NAPI headers lack napi_default_method.
constexpr auto kMethod = static_cast<napi_property_attributes>(napi_writable | napi_configurable);
constexpr auto kExport = napi_enumerable;
napi_property_descriptor method(const char* name, napi_callback cb, void* data, napi_property_attributes attr = kMethod) {
  return {name, nullptr, cb, nullptr, nullptr, nullptr, attr, data};
}
napi_property_descriptor exported_value(const char* name, napi_value v) { return {name, nullptr, nullptr, nullptr, nullptr, v, kExport, nullptr}; }

void module_finalize(napi_env env, void* data, void*) {
  auto* m = static_cast<ModuleData*>(data);
  napi_delete_reference(env, m->model_ctor);
  napi_delete_reference(env, m->session_ctor);
  delete m;
}

napi_value Init(napi_env env, napi_value exports) {
  return guarded(env, [&]() -> napi_value {
    auto* mod = new ModuleData;
    const napi_property_descriptor model_methods[] = {
        method("createSession", ModelCreateSession, mod), method("tokenize", ModelTokenize, mod),
        method("detokenize", ModelDetokenize, mod),       method("describe", ModelDescribe, mod),
        method("close", ModelClose, mod),                 method("embed", ModelEmbed, mod)};
    const napi_property_descriptor session_methods[] = {
        method("generate", SessionGenerate, mod), method("cancel", SessionCancel, mod), method("reset", SessionReset, mod),
        method("close", SessionClose, mod),       method("nPast", SessionNPast, mod),
        method("save", SessionSave, mod),         method("restore", SessionRestore, mod)};
    napi_value model_class, session_class;
    check(env, napi_define_class(env, "Model", NAPI_AUTO_LENGTH, ModelCtor, mod, sizeof model_methods / sizeof model_methods[0],
                                 model_methods, &model_class));
    check(env, napi_define_class(env, "Session", NAPI_AUTO_LENGTH, SessionCtor, mod,
                                 sizeof session_methods / sizeof session_methods[0], session_methods, &session_class));
    check(env, napi_create_reference(env, model_class, 1, &mod->model_ctor));
    check(env, napi_create_reference(env, session_class, 1, &mod->session_ctor));
    const napi_property_descriptor exported[] = {
        method("loadModel", LoadModel, mod, kExport), exported_value("Model", model_class),
        exported_value("Session", session_class), exported_value("version", make_string(env, EDGELLM_VERSION_STRING))};
    check(env, napi_define_properties(env, exports, sizeof exported / sizeof exported[0], exported));
    check(env, napi_wrap(env, exports, mod, module_finalize, nullptr, nullptr));  // freed with the module's exports
    return exports;
  });
}

}  // namespace

#ifdef EDGELLM_OHOS
// OpenHarmony: the runtime loads libedgellm.so for `import llm from 'libedgellm.so'` and finds the
// module through the registration a constructor function makes when the library is loaded.
static napi_module g_edgellm_module = {1, 0, nullptr, Init, "edgellm", nullptr, {nullptr}};
extern "C" __attribute__((constructor)) void edgellm_register_module() { napi_module_register(&g_edgellm_module); }
#else
NAPI_MODULE(edgellm, Init)
#endif
