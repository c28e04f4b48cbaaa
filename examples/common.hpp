// Shared by the tools in examples/: argument parsing, the flags several tools take (model, threads,
// context, KV type, memory budget), and the tool contract (result on stdout, logs
// on stderr, exit 0 on success, exit 1 with one "error: ..." line otherwise).
#pragma once
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <edgellm/core/dtype.hpp>
#include <edgellm/core/error.hpp>
#include <edgellm/core/json.hpp>
#include <edgellm/grammar/constrained_sampler.hpp>
#include <edgellm/grammar/json_schema.hpp>
#include <edgellm/text/chat.hpp>
#include <edgellm/text/chat_template.hpp>
#include <edgellm/text/reasoning.hpp>
#include <edgellm/version.hpp>

namespace tool {

// Limits shared by every tool that takes the flag.
constexpr long long kMaxThreads = 1024;
constexpr long long kMaxContext = 1 << 24;  // tokens
constexpr long long kMaxTokens = 1 << 24;   // -n and similar counts

// Minimal flag parser: flags with or without a value, numbers range-checked, unknown flags rejected.
class Args {
 public:
  Args(int argc, char** argv) : argv_(argv + 1, argv + argc) {}

  // Next flag (or "" at the end). Positional arguments are collected separately.
  bool next(std::string& flag) {
    while (i_ < argv_.size()) {
      const std::string a = argv_[i_++];
      if (a.size() > 1 && a[0] == '-' && !is_number(a)) {
        flag = a;
        return true;
      }
      positional_.push_back(a);
    }
    return false;
  }
  std::string value(const std::string& flag) {
    if (i_ >= argv_.size()) edgellm::throw_error("option ", flag, " needs a value");
    return argv_[i_++];
  }
  // A whole decimal integer in [lo, hi]: anything else (not a number, overflow, out of range) is an
  // error naming the flag and the range.
  long long integer(const std::string& flag, long long lo, long long hi) {
    const std::string v = value(flag);
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno == ERANGE || x < lo || x > hi)
      edgellm::throw_error("option ", flag, ": expected an integer in [", lo, ", ", hi, "], got '", v, "'");
    return x;
  }
  int integer32(const std::string& flag, long long lo, long long hi) { return static_cast<int>(integer(flag, lo, hi)); }
  // A finite number in [lo, hi].
  double number(const std::string& flag, double lo, double hi) {
    const std::string v = value(flag);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !std::isfinite(x) || x < lo || x > hi)
      edgellm::throw_error("option ", flag, ": expected a number in [", lo, ", ", hi, "], got '", v, "'");
    return x;
  }
  const std::vector<std::string>& positional() const { return positional_; }
  // Rejects positional arguments for tools that take none.
  void no_positional() const {
    if (!positional_.empty()) edgellm::throw_error("unexpected argument '", positional_[0], "' (see --help)");
  }

 private:
  static bool is_number(const std::string& s) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return end && *end == 0;
  }
  std::vector<std::string> argv_;
  size_t i_ = 0;
  std::vector<std::string> positional_;
};

// -t N: 0 = every hardware thread. More threads than the machine has is allowed (a container may
// see fewer cores than it can use) but said, since it usually makes a run much slower.
inline int threads_flag(Args& args, const std::string& flag) {
  const int n = args.integer32(flag, 0, kMaxThreads);
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw > 0 && unsigned(n) > hw)
    std::fprintf(stderr, "warning: %s %d is more than the %u hardware threads: expect a slower run\n", flag.c_str(), n, hw);
  return n;
}

// --chunks N (perplexity, imatrix): how many chunks of the text to use, -1 = all of them.
inline int chunks_flag(Args& args, const std::string& flag) {
  const int n = args.integer32(flag, -1, INT32_MAX);
  if (n == 0) edgellm::throw_error("option ", flag, ": 0 chunks leave nothing to do (-1 = every chunk of the text)");
  return n;
}

// The flags of the tools that read a text in chunks (perplexity, imatrix): -f / --file TEXT,
// -c / --ctx-size N (tokens per chunk, >= 4), --chunks N. Consumes f when it is one; false otherwise.
inline bool chunked_text_flag(Args& args, const std::string& f, std::string& text, int& n_ctx, int& chunks) {
  if (f == "-f" || f == "--file") text = args.value(f);
  else if (f == "-c" || f == "--ctx-size") n_ctx = args.integer32(f, 4, kMaxContext);
  else if (f == "--chunks") chunks = chunks_flag(args, f);
  else return false;
  return true;
}

// -c N: 0 = the model's training context (each tool says its cap in --help).
inline int ctx_flag(Args& args, const std::string& flag) { return args.integer32(flag, 0, kMaxContext); }

// --kv-type / -ctk / -ctv: the KV cache storage types the paged cache has.
inline edgellm::DType kv_type_from(const std::string& name, const std::string& flag) {
  edgellm::DType t = edgellm::DType::F32;
  if (!edgellm::dtype_from_name(name, &t) ||
      (t != edgellm::DType::F32 && t != edgellm::DType::F16 && t != edgellm::DType::Q8_0))
    edgellm::throw_error("option ", flag, ": '", name, "' is not a KV cache type (f32, f16 or q8_0)");
  return t;
}

// The KV cache flags of the tools that generate (cli, server): --kv-block N, --kv-type T,
// --kv-recent N, --kv-budget-mb X into a SessionParams-like P. Consumes f (and its value) when it
// is one; false otherwise.
template <class P>
bool kv_flag(Args& args, const std::string& f, P& sp) {
  if (f == "--kv-block") sp.kv_block_size = args.integer32(f, 1, 1 << 16);
  else if (f == "--kv-type") sp.kv_type = kv_type_from(args.value(f), f);
  else if (f == "--kv-recent") sp.kv_recent_f32 = args.integer32(f, 0, kMaxContext);
  else if (f == "--kv-budget-mb") sp.kv_max_bytes = static_cast<size_t>(args.number(f, 0.001, 1 << 30) * 1024 * 1024);
  else return false;
  return true;
}

// --mem-budget MIB: a positive number of MiB, as bytes.
inline uint64_t mem_budget_bytes(Args& args, const std::string& flag) {
  const double mib = args.number(flag, 1, 1024.0 * 1024 * 1024);
  return static_cast<uint64_t>(mib * 1024 * 1024);
}

// The whole file, or an error naming it and the flag that gave it (-f PROMPT_FILE and similar).
inline std::string read_text_file(const std::string& path, const std::string& flag) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) edgellm::throw_error("option ", flag, ": cannot open '", path, "'");
  std::string s;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) edgellm::throw_error("option ", flag, ": reading '", path, "' failed");
  return s;
}

// --version: one line, as every tool prints it.
inline int print_version(const char* tool_name) {
  std::printf("%s (edgellm) %s\n", tool_name, EDGELLM_VERSION_STRING);
  return 0;
}

// -h / --help and --version, as every tool answers them: prints and returns true when f is one.
inline bool standard_flag(const std::string& f, const char* usage, const char* tool_name) {
  if (f == "-h" || f == "--help") {
    std::fputs(usage, stdout);
    return true;
  }
  if (f == "--version") {
    print_version(tool_name);
    return true;
  }
  return false;
}

// The flags of every tool that loads a model: -m / --model, -t / --threads, --mem-budget.
struct ModelFlags {
  std::string path;
  int threads = 0;          // 0: every hardware thread
  uint64_t mem_budget = 0;  // 0: detected
};
// Consumes f when it is one of ModelFlags' flags (and its value); false otherwise.
inline bool model_flag(Args& args, const std::string& f, ModelFlags& m) {
  if (f == "-m" || f == "--model") m.path = args.value(f);
  else if (f == "-t" || f == "--threads") m.threads = threads_flag(args, f);
  else if (f == "--mem-budget") m.mem_budget = mem_budget_bytes(args, f);
  else return false;
  return true;
}

// Chat template flags (edgellm-cli --chat, edgellm-server), llama.cpp's names:
//   --chat-template NAME|SOURCE  a built-in format (chatml, llama3, ...) or Jinja source
//   --chat-template-file F       a Jinja template file
//   --chat-template-kwargs JSON  extra template variables, e.g. '{"enable_thinking": false}'
//   --jinja                      the model's own template through the Jinja engine (the default)
//   --reasoning-budget N         -1: unrestricted; 0: thinking off (enable_thinking = false)
//   --reasoning-format F         none | deepseek | deepseek-legacy | auto (server answers)
struct ChatFlags {
  std::string tmpl, file;
  edgellm::Json kwargs = edgellm::Json::object();
  int reasoning_budget = -1;
  edgellm::ReasoningFormat reasoning_format = edgellm::ReasoningFormat::Deepseek;
};
inline bool chat_flag(Args& args, const std::string& f, ChatFlags& c) {
  if (f == "--chat-template") {
    c.tmpl = args.value(f);
  } else if (f == "--chat-template-file") {
    c.file = args.value(f);
  } else if (f == "--chat-template-kwargs") {
    const std::string v = args.value(f);
    edgellm::Json j;
    try {
      j = edgellm::Json::parse(v, 64);
    } catch (const edgellm::Error& e) {
      edgellm::throw_error("option ", f, ": not JSON: ", e.what());
    }
    if (!j.is_object()) edgellm::throw_error("option ", f, ": expected a JSON object, e.g. '{\"enable_thinking\": false}'");
    for (const auto& kv : j.as_object()) c.kwargs.set(kv.first, kv.second);
  } else if (f == "--jinja") {
    // the default: the model's own template is rendered by the Jinja engine
  } else if (f == "--reasoning-budget") {
    c.reasoning_budget = args.integer32(f, -1, 0);
  } else if (f == "--reasoning-format") {
    try {
      c.reasoning_format = edgellm::parse_reasoning_format(args.value(f));
    } catch (const edgellm::Error& e) {
      edgellm::throw_error("option ", f, ": ", e.what());
    }
  } else {
    return false;
  }
  return true;
}

// The chat template the flags choose for a model: --chat-template-file, --chat-template, else the
// GGUF's tokenizer.chat_template rendered by the Jinja engine (chatml when the file has none).
// A file template that does not parse is reported, and the built-in format it resembles (or
// chatml) is used instead; a template given by flag that does not parse is an error.
inline edgellm::ChatTemplate chat_template_of(ChatFlags& c, const std::string& gguf_source, const edgellm::Tokenizer& tok) {
  if (c.reasoning_budget == 0 && !c.kwargs.contains("enable_thinking")) c.kwargs.set("enable_thinking", false);
  auto named = [](const std::string& what, auto make) {
    try {
      return make();
    } catch (const edgellm::jinja::TemplateError& e) {
      edgellm::throw_error(what, ": ", e.what());
    }
  };
  if (!c.file.empty()) {
    const std::string src = read_text_file(c.file, "--chat-template-file");
    return named("chat template " + c.file, [&] {
      return edgellm::ChatTemplate::jinja(src, tok);
    });
  }
  if (!c.tmpl.empty()) return named("option --chat-template", [&] { return edgellm::ChatTemplate::from_flag(c.tmpl, tok); });
  if (gguf_source.empty()) {
    std::fprintf(stderr, "the model has no chat template: using chatml (choose with --chat-template)\n");
    return edgellm::ChatTemplate::builtin("chatml");
  }
  try {
    return edgellm::ChatTemplate::from_model(gguf_source, tok);
  } catch (const edgellm::jinja::TemplateError& e) {
    std::string name = edgellm::detect_chat_template(gguf_source);
    if (name.empty()) name = "chatml";
    std::fprintf(stderr, "warning: the model's chat template does not parse (%s): using the built-in format %s "
                         "(choose with --chat-template or --chat-template-file)\n", e.what(), name.c_str());
    return edgellm::ChatTemplate::builtin(name);
  }
}

// Constrained output (edgellm-cli, edgellm-bench), llama.cpp's names:
//   --grammar GBNF, --grammar-file F, --json-schema JSON, --json-schema-file F
struct GrammarFlags {
  std::string gbnf;
  std::string flag;  // the flag that gave it, for errors
};
inline bool grammar_flag(Args& args, const std::string& f, GrammarFlags& g) {
  std::string text;
  if (f == "--grammar") text = args.value(f);
  else if (f == "--grammar-file") text = read_text_file(args.value(f), f);
  else if (f == "--json-schema") text = args.value(f);
  else if (f == "--json-schema-file") text = read_text_file(args.value(f), f);
  else return false;
  if (!g.flag.empty()) edgellm::throw_error("option ", f, ": ", g.flag, " already gives the grammar");
  g.flag = f;
  if (f.rfind("--json-schema", 0) == 0) {
    try {
      g.gbnf = edgellm::json_schema_to_gbnf(edgellm::Json::parse(text, 256));
    } catch (const edgellm::Error& e) {
      edgellm::throw_error("option ", f, ": ", e.what());
    }
  } else {
    g.gbnf = text;
  }
  return true;
}
// The flags' grammar compiled for a vocabulary (none: unconstrained).
inline edgellm::GrammarParams grammar_params(const GrammarFlags& g, const edgellm::Tokenizer& tok) {
  edgellm::GrammarParams p;
  if (g.flag.empty()) return p;
  try {
    p.masker = edgellm::GrammarCache(tok, 1).get(g.gbnf);  // the masker keeps its vocabulary
  } catch (const edgellm::Error& e) {
    edgellm::throw_error("option ", g.flag, ": ", e.what());
  }
  return p;
}

// LoadOptions::progress for the tools: on a terminal (`bar`) a bar redrawn on one stderr line and
// ended by a newline at 100 %; otherwise (the server's log) a line per further 10 %.
inline std::function<bool(float)> load_progress(bool bar, const std::string& path) {
  auto last = std::make_shared<int>(-1);
  return [bar, path, last](float f) {
    const int pct = static_cast<int>(f * 100.0f + 0.5f);
    if (bar) {
      if (pct == *last) return true;
      const int w = 30, n = pct * w / 100;
      std::fprintf(stderr, "\rloading %s [%s%s] %3d%%%s", path.c_str(), std::string(static_cast<size_t>(n), '#').c_str(),
                   std::string(static_cast<size_t>(w - n), ' ').c_str(), pct, pct >= 100 ? "\n" : "");
    } else {
      if (pct / 10 == *last / 10 && pct < 100) return true;
      std::fprintf(stderr, "loading %s: %d%%\n", path.c_str(), pct);
    }
    std::fflush(stderr);
    *last = pct;
    return true;
  };
}

[[noreturn]] inline void unknown(const std::string& flag) { edgellm::throw_error("unknown option ", flag, " (see --help)"); }

// Runs a tool body with the contract: any exception -> "error: ..." on stderr, exit 1.
inline int run(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "error: unknown exception\n");
    return 1;
  }
}

}  // namespace tool
