// edgellm-eval -m MODEL -f TASK.jsonl [...]: accuracy evals (engine/eval.hpp). Multiple-choice tasks
// report acc and acc_norm; generation tasks (greedy) one row per budget (--max-tokens / --deadline-ms
// lists). Every row: requests/s, mean and p90 latency, mean tokens, peak RSS. CSV on stdout.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <edgellm/tools/eval_tasks.hpp>
#include <edgellm/engine/session.hpp>
#include <edgellm/runtime/memory_stats.hpp>
#include <edgellm/runtime/timer.hpp>

#include "common.hpp"
#include "server/http_client.hpp"  // the project's HTTP client (examples/server/)

namespace {

using namespace edgellm;

const char* kUsage =
    "usage: edgellm-eval -m MODEL.gguf -f TASK.jsonl [--task mc|gen] [--limit N] [-t THREADS] [-c CTX]\n"
    "                    [--max-tokens N[,N...]] [--deadline-ms MS[,MS...]] [--budget-hint]\n"
    "                    [--template TEXT] [--stop TEXT]... [--csv FILE] [--mem-budget MIB] [-v]\n"
    "       edgellm-eval --server URL -f TASK.jsonl [--api-key KEY] [...]   generation tasks through an\n"
    "                    OpenAI-compatible endpoint (edgellm-server, llama-server): POST URL/v1/completions\n"
    "  --outputs FILE: generation tasks also write each item's text and answer as JSONL\n"
    "  --mem-budget MIB: memory the model may use; what does not fit streams from storage\n"
    "  multiple choice (lines with \"choices\"/\"endings\"/\"sol1\"): acc and acc_norm by log-likelihood\n"
    "  generation (lines with \"question\" and \"answer\"): greedy, answer from \\boxed{}, ####, or the\n"
    "    last number; one CSV row per budget (max-tokens x deadline-ms); --budget-hint adds\n"
    "    \"(Answer in under N tokens.)\" to the prompt; template placeholders {question} {hint}\n";

const char* kDefaultTemplate = "Question: {question}\n{hint}Answer:";

struct Options {
  tool::ModelFlags m;
  std::string task_file, task, tmpl = kDefaultTemplate, csv;
  int limit = -1, n_ctx = 0;
  std::vector<int> max_tokens;
  std::vector<double> deadlines;
  std::vector<std::string> stops;
  bool hint = false, verbose = false, stop_given = false;
  std::string server, api_key;  // --server: generation through URL/v1/completions
  std::string outputs;          // --outputs: JSONL of every generated text
};

// What one generation returned, in-process or from the server.
struct GenOutput {
  std::string text;
  int n_tokens = 0;
  std::string stop;  // why it ended
};

// Greedy generation through an OpenAI-compatible server, as the DAYU200 study's harness called it.
class ServerClient {
 public:
  ServerClient(const std::string& url, const std::string& api_key) : url_(url), api_key_(api_key), client_(make_client(url)) {
    get("/v1/models");  // fails here, before any output, when nothing answers at url
  }
  GenOutput generate(const std::string& prompt, const GenerateParams& gp) {
    Json body = Json::object();
    body.set("prompt", prompt);
    body.set("max_tokens", gp.max_tokens);
    body.set("temperature", 0);
    Json stop = Json::array();
    for (const auto& st : gp.stop) stop.push_back(st);
    body.set("stop", std::move(stop));
    if (gp.deadline_ms > 0) body.set("deadline_ms", gp.deadline_ms);
    const std::string reply = post("/v1/completions", body.dump());
    Json j;
    try {
      j = Json::parse(reply);
    } catch (const Error& e) {
      throw_error("--server ", url_, ": the reply is not JSON (", e.what(), ")");
    }
    if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].size() == 0)
      throw_error("--server ", url_, ": unexpected reply ", reply.substr(0, 300));
    GenOutput out;
    const Json& c = j["choices"].at(0);
    out.text = c["text"].as_string();
    out.stop = c.contains("finish_reason") && c["finish_reason"].is_string() ? c["finish_reason"].as_string() : "";
    if (j.contains("usage") && j["usage"].contains("completion_tokens")) out.n_tokens = static_cast<int>(j["usage"]["completion_tokens"].as_int());
    return out;
  }

 private:
  std::string post(const std::string& path, const std::string& body) {
    return request(path, &body);
  }
  std::string get(const std::string& path) { return request(path, nullptr); }
  // POST body (or GET without one); the reply body of a 200, else Error naming the URL.
  std::string request(const std::string& path, const std::string* body) {
    std::vector<std::pair<std::string, std::string>> h;
    if (body) h.emplace_back("Content-Type", "application/json");
    if (!api_key_.empty()) h.emplace_back("Authorization", "Bearer " + api_key_);
    http::Response res;
    try {
      res = client_.request(body ? "POST" : "GET", path, body, h);
    } catch (const Error& e) {
      throw_error("--server ", e.what());
    }
    if (res.status != 200) throw_error("--server ", url_, path, ": HTTP ", res.status, ": ", res.body.substr(0, 300));
    return res.body;
  }
  static http::Client make_client(const std::string& url) {
    try {
      return http::Client(url, 3600);
    } catch (const Error& e) {
      throw_error("--server: ", e.what());
    }
  }
  std::string url_, api_key_;
  http::Client client_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("file ", path, ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --deadline-ms: a comma list of positive numbers up to hi ("500,2000").
std::vector<double> parse_number_list(const std::string& flag, const std::string& v, double hi) {
  std::vector<double> out;
  for (const std::string& item : split_list(v, flag)) {
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !(x > 0 && x <= hi)) throw_error("option ", flag, ": '", item, "' is not a number in (0, ", hi, "]");
    out.push_back(x);
  }
  return out;
}

double mib(uint64_t b) { return double(b) / 1048576.0; }

// A CSV line to stdout and, with --csv, to the file too.
void emit(std::FILE* csv, const std::string& line) {
  std::fputs(line.c_str(), stdout);
  if (csv) std::fputs(line.c_str(), csv);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string stats_columns(const EvalStats& s) {
  return fmt("%.2f", s.mean_tokens()) + "," + fmt("%.2f", s.mean_latency_ms()) + "," + fmt("%.2f", s.p90_latency_ms()) + "," +
         fmt("%.3f", s.requests_per_s()) + "," + fmt("%.1f", mib(peak_rss_bytes()));
}

int run_mc(const Options& o, const std::vector<Json>& lines, const LlamaModel& model, const Tokenizer& tok, std::FILE* csv) {
  ThreadPool pool(o.m.threads > 0 ? o.m.threads : default_thread_count());
  McScorer scorer(model, tok, &pool);
  EvalStats st;
  Timer wall;
  for (size_t i = 0; i < lines.size(); ++i) {
    const McItem item = parse_mc_item(lines[i], i + 1);
    Timer t;
    const std::vector<ChoiceScore> s = scorer.score(item);
    const double ms = t.ms();
    const McPick p = pick_choice(s);
    int n_tok = scorer.last_shared_tokens();
    for (const auto& c : s) n_tok += c.n_tokens;
    st.add(p.acc == item.label, ms, n_tok, p.acc_norm == item.label);
    if (o.verbose) {
      std::fprintf(stderr, "item %zu: label %d acc %d acc_norm %d shared %d tokens, logprobs", i + 1, item.label, p.acc, p.acc_norm,
                   scorer.last_shared_tokens());
      for (const auto& c : s) std::fprintf(stderr, " %.3f/%dt", c.logprob, c.n_tokens);
      std::fprintf(stderr, " (%.1f ms)\n", ms);
    }
  }
  st.wall_s = wall.seconds();
  emit(csv, "task,n,acc,acc_norm,mean_tokens_evaluated,mean_latency_ms,p90_latency_ms,requests_per_s,peak_rss_mib\n");
  emit(csv, o.task_file + "," + std::to_string(st.n) + "," + fmt("%.4f", st.accuracy()) + "," + fmt("%.4f", st.accuracy_norm()) +
                   "," + stats_columns(st) + "\n");
  return 0;
}

struct Budget {
  int max_tokens;
  double deadline_ms;
};

// Generation tasks: in-process (model given) or through o.server.
int run_gen(const Options& o, const std::vector<Json>& lines, std::shared_ptr<const LlamaModel> model,
            std::shared_ptr<const Tokenizer> tok, std::FILE* csv) {
  std::vector<GenItem> items;
  for (size_t i = 0; i < lines.size(); ++i) items.push_back(parse_gen_item(lines[i], i + 1));
  std::vector<Budget> budgets;
  const std::vector<int> mt = o.max_tokens.empty() ? std::vector<int>{256} : o.max_tokens;
  const std::vector<double> dl = o.deadlines.empty() ? std::vector<double>{0} : o.deadlines;
  for (int m : mt)
    for (double d : dl) budgets.push_back({m, d});
  std::unique_ptr<Session> sess;
  std::unique_ptr<ServerClient> server;
  if (model) {
    SessionParams sp;
    sp.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(model->config().n_ctx_train, 4096);
    sp.n_threads = o.m.threads;
    sess.reset(new Session(model, tok, sp));
  } else {
    server.reset(new ServerClient(o.server, o.api_key));
  }
  auto generate = [&](const std::string& prompt, const GenerateParams& gp) {
    if (server) return server->generate(prompt, gp);
    sess->reset();
    const GenerateResult r = sess->generate(prompt, gp);
    return GenOutput{r.text, static_cast<int>(r.tokens.size()), stop_reason_name(r.reason)};
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> outputs(nullptr, &std::fclose);
  if (!o.outputs.empty()) {
    outputs.reset(std::fopen(o.outputs.c_str(), "w"));
    if (!outputs) throw_error("file ", o.outputs, ": cannot create");
  }
  emit(csv, "task,max_tokens,deadline_ms,budget_hint,n,correct,accuracy,mean_tokens_generated,mean_latency_ms,p90_latency_ms,"
               "requests_per_s,peak_rss_mib\n");
  for (const Budget& b : budgets) {
    EvalStats st;
    Timer wall;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string hint = o.hint ? "(Answer in under " + std::to_string(b.max_tokens) + " tokens.)\n" : "";
      GenerateParams gp;
      gp.max_tokens = b.max_tokens;
      gp.deadline_ms = b.deadline_ms;
      gp.sampler.temperature = 0;  // greedy: runs are repeatable
      gp.stop = o.stops;
      Timer t;
      const GenOutput r = generate(render_prompt(o.tmpl, items[i].question, hint), gp);
      const double ms = t.ms();
      const ExtractedAnswer pred = extract_answer(r.text), gold = extract_answer(items[i].answer);
      const bool ok = answers_equal(pred.value, gold.value);
      st.add(ok, ms, r.n_tokens);
      if (outputs) {
        Json line = Json::object();
        line.set("item", static_cast<int64_t>(i + 1));
        line.set("max_tokens", b.max_tokens);
        line.set("deadline_ms", b.deadline_ms);
        line.set("tokens", r.n_tokens);
        line.set("text", r.text);
        line.set("answer", pred.value);
        line.set("gold", gold.value);
        line.set("correct", ok);
        const std::string out = line.dump() + "\n";
        if (std::fputs(out.c_str(), outputs.get()) < 0) throw_error("file ", o.outputs, ": write failed");
      }
      if (o.verbose)
        std::fprintf(stderr, "item %zu [%d tok, %.0f ms]: %d tokens, stop %s, %.1f ms, answer '%s' gold '%s' %s\n", i + 1,
                     b.max_tokens, b.deadline_ms, r.n_tokens, r.stop.c_str(), ms, pred.value.c_str(),
                     gold.value.c_str(), ok ? "ok" : "wrong");
    }
    st.wall_s = wall.seconds();
    emit(csv, o.task_file + "," + std::to_string(b.max_tokens) + "," + fmt("%.0f", b.deadline_ms) + "," + (o.hint ? "1" : "0") + "," +
                     std::to_string(st.n) + "," + std::to_string(st.correct) + "," + fmt("%.4f", st.accuracy()) + "," +
                     stats_columns(st) + "\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    Options o;
    for (std::string f; args.next(f);) {
      if (tool::standard_flag(f, kUsage, "edgellm-eval")) return 0;
      else if (tool::model_flag(args, f, o.m)) continue;
      else if (f == "-f" || f == "--file") o.task_file = args.value(f);
      else if (f == "--task") o.task = args.value(f);
      else if (f == "--limit") o.limit = args.integer32(f, 0, INT32_MAX);
      else if (f == "-c" || f == "--ctx-size") o.n_ctx = tool::ctx_flag(args, f);
      else if (f == "--max-tokens" || f == "-n") o.max_tokens = parse_int_list(args.value(f), f, 1, int(tool::kMaxTokens));
      else if (f == "--deadline-ms") o.deadlines = parse_number_list(f, args.value(f), 1e12);
      else if (f == "--budget-hint") o.hint = true;
      else if (f == "--template") o.tmpl = args.value(f);
      else if (f == "--stop") { o.stops.push_back(args.value(f)); o.stop_given = true; }
      else if (f == "--csv") o.csv = args.value(f);
      else if (f == "-v" || f == "--verbose") o.verbose = true;
      else if (f == "--server") o.server = args.value(f);
      else if (f == "--api-key") o.api_key = args.value(f);
      else if (f == "--outputs") o.outputs = args.value(f);
      else tool::unknown(f);
    }
    args.no_positional();
    if (o.m.path.empty() == o.server.empty()) throw_error("give -m MODEL or --server URL (see --help)");
    if (o.task_file.empty()) throw_error("-f TASK.jsonl is required");
    if (!o.task.empty() && o.task != "mc" && o.task != "gen") throw_error("--task must be mc or gen, got '", o.task, "'");
    if (!o.stop_given) o.stops = {"\nQuestion:"};

    std::vector<Json> lines = Json::parse_lines(read_file(o.task_file));
    if (o.limit >= 0 && lines.size() > static_cast<size_t>(o.limit)) lines.resize(static_cast<size_t>(o.limit));
    if (lines.empty()) throw_error("file ", o.task_file, ": no task items");
    std::string task = o.task;
    if (task.empty()) {
      const Json& j = lines[0];
      task = (j.contains("choices") || j.contains("endings") || j.contains("sol1")) ? "mc" : "gen";
    }
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv(nullptr, &std::fclose);
    if (!o.csv.empty()) {
      csv.reset(std::fopen(o.csv.c_str(), "w"));
      if (!csv) throw_error("file ", o.csv, ": cannot create");
    }
    if (!o.server.empty()) {
      if (task == "mc") throw_error("--server runs generation tasks only (multiple choice needs the prompt's log-likelihoods)");
      std::fprintf(stderr, "eval: %s, %zu items, task gen, through %s\n", o.task_file.c_str(), lines.size(), o.server.c_str());
      const int rc = run_gen(o, lines, nullptr, nullptr, csv.get());
      if (csv && std::fflush(csv.get()) != 0) throw_error("file ", o.csv, ": write failed");
      return rc;
    }
    LoadOptions lo;
    lo.mem_budget = o.m.mem_budget;
    lo.plan.n_ctx = o.n_ctx;  // 0: default_context(), as run_gen's session
    lo.plan.n_threads = o.m.threads;
    std::shared_ptr<const LlamaModel> model = LlamaModel::load(o.m.path, lo);
    if (o.verbose) std::fprintf(stderr, "%s", model->weights().describe_residency().c_str());
    auto tok = std::make_shared<const Tokenizer>(Vocab::from_gguf(model->file()));
    std::fprintf(stderr, "eval: %s, %zu items, task %s\n", o.task_file.c_str(), lines.size(), task.c_str());
    const int rc = task == "mc" ? run_mc(o, lines, *model, *tok, csv.get()) : run_gen(o, lines, model, tok, csv.get());
    if (csv && std::fflush(csv.get()) != 0) throw_error("file ", o.csv, ": write failed");
    return rc;
  });
}
