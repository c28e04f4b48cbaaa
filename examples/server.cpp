// edgellm-server: an OpenAI-compatible HTTP endpoint, as llama-server serves one —
// POST /v1/chat/completions, POST /v1/completions (JSON or SSE streams), GET /v1/models,
// GET /health. Up to --parallel requests decode together in one batch (BatchScheduler: one
// forward pass per step, a paged-KV sequence each, common prompt prefixes shared); more wait in a
// queue; a new prompt is read a chunk per step beside the running requests' tokens. A client that
// closes its connection cancels its request before the next token, streamed or not (the
// scheduler probes the connection's socket, edgellm/tools/client_socket.hpp). Request parsing and
// response shapes are edgellm/tools/openai.hpp; this file is the HTTP transport (cpp-httplib),
// authentication and flags.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

#include <httplib.h>

#include <edgellm/engine/batch_scheduler.hpp>
#include <edgellm/model/memory_plan.hpp>
#include <edgellm/text/chat_template.hpp>
#include <edgellm/tools/client_socket.hpp>
#include <edgellm/tools/openai.hpp>

#include "common.hpp"

namespace {

const char* kUsage =
    "usage: edgellm-server -m MODEL.gguf [options]\n"
    "  -m, --model FILE       GGUF model\n"
    "  --host ADDR            address to listen on (default 127.0.0.1: this machine only)\n"
    "  --port N               TCP port (default 8080; 0 = any free port, printed at start)\n"
    "  -c, --ctx-size N       context per request in tokens (default 0 = the model's training context,\n"
    "                         at most 4096)\n"
    "  --parallel N           requests decoded together in one batch (default 4); more wait in a queue\n"
    "  --max-queue N          requests waiting beyond --parallel before 503 (default 256)\n"
    "  --api-key KEY          require 'Authorization: Bearer KEY' on every endpoint but /health\n"
    "  --timeout-s N          HTTP read/write timeout in seconds (default 600)\n"
    "  --max-body-kb N        request bodies larger than this are refused with 413 (default 1024)\n"
    "  --threads-http N       HTTP connection threads (default 4 x --parallel, at least 16)\n"
    "  --alias NAME           model id in /v1/models and responses (default: the file name)\n"
    "  --chat-template NAME   chat format (default: recognised from the GGUF, else chatml)\n"
    "  -b, --batch-size N     prompt tokens per forward pass (default 512)\n"
    "  --prefill-chunk N      prompt tokens a new request evaluates per step, in the same forward pass\n"
    "                         as the next token of every running request (default 64, at most -b;\n"
    "                         0 = -b): a long prompt delays running streams by one chunk a token\n"
    "  -t, --threads N        compute threads (default 0 = every hardware thread)\n"
    "  --kv-block N --kv-type T --kv-recent N --kv-budget-mb X   KV cache as in edgellm-cli; the byte\n"
    "                         budget is shared by every request\n"
    "  --no-repack            keep every weight matrix as stored in the file\n"
    "  --mem-budget MIB       memory the model may use (see edgellm-cli --help)\n"
    "  --version              print the version\n"
    "Requests take OpenAI's fields (messages / prompt, max_tokens, temperature, top_p, seed, stop,\n"
    "stream, stream_options.include_usage) and llama-server's top_k, min_p, repeat_penalty, n_probs,\n"
    "cache_prompt, plus deadline_ms: the answer ends before this budget (finish_reason \"deadline\").\n";

using edgellm::openai::ApiError;
using edgellm::openai::Endpoint;

struct Server {
  std::unique_ptr<edgellm::BatchScheduler> sched;
  std::shared_ptr<const edgellm::Tokenizer> tok;
  std::string chat_template;
  std::string model_id;
  std::string api_key;
  edgellm::openai::ApiLimits limits;
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> n_requests{0}, n_refused{0};  // HTTP requests to the completion endpoints; refused with 4xx/503
};

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type,
                const std::string& param = "") {
  res.status = status;
  res.set_content(edgellm::openai::error_body(status, message, type, param), "application/json");
}

bool authorized(const Server& s, const httplib::Request& req) {
  if (s.api_key.empty()) return true;
  const std::string want = "Bearer " + s.api_key;
  const std::string got = req.get_header_value("Authorization");
  // Compares every byte whatever the mismatch, so the time taken does not say how much matched.
  unsigned diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned>(want[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

edgellm::Json health_json(const Server& s) {
  const auto st = s.sched->stats();
  edgellm::Json h = edgellm::Json::object();
  h.set("status", "ok");
  h.set("slots_idle", s.sched->params().n_parallel - st.slots_busy);
  h.set("slots_processing", st.slots_busy);
  h.set("slots_prefilling", st.slots_prefilling);
  h.set("requests_queued", st.queued);
  h.set("requests_total", static_cast<int64_t>(s.n_requests.load()));
  h.set("requests_refused", static_cast<int64_t>(s.n_refused.load()));
  h.set("requests_finished", static_cast<int64_t>(st.finished));
  h.set("requests_cancelled", static_cast<int64_t>(st.cancelled));
  h.set("requests_failed", static_cast<int64_t>(st.failed));
  h.set("kv_blocks_used", st.kv_blocks_used);
  h.set("kv_blocks_allocated", st.kv_blocks_allocated);
  h.set("kv_sequences", st.kv_sequences);
  h.set("cached_sequences", st.cached_sequences);
  h.set("decode_steps", static_cast<int64_t>(st.steps));
  h.set("decode_step_tokens", static_cast<int64_t>(st.step_tokens));
  h.set("max_step_tokens", st.max_step_tokens);
  h.set("prompt_tokens_reused", static_cast<int64_t>(st.prompt_tokens_reused));
  h.set("prefill_chunks", static_cast<int64_t>(st.prefill_chunks));
  h.set("prefill_tokens", static_cast<int64_t>(st.prefill_tokens));
  return h;
}

edgellm::Json models_json(const Server& s) {
  const auto& cfg = s.sched->model().config();
  edgellm::Json meta = edgellm::Json::object();
  meta.set("n_ctx_train", cfg.n_ctx_train);
  meta.set("n_ctx", s.limits.n_ctx);
  meta.set("n_vocab", cfg.n_vocab);
  meta.set("n_embd", cfg.n_embd);
  meta.set("n_layer", cfg.n_layer);
  meta.set("size", static_cast<int64_t>(s.sched->model().file().file_size()));
  edgellm::Json m = edgellm::Json::object();
  m.set("id", s.model_id);
  m.set("object", "model");
  m.set("created", static_cast<int64_t>(std::time(nullptr)));
  m.set("owned_by", "edgellm");
  m.set("meta", std::move(meta));
  edgellm::Json data = edgellm::Json::array();
  data.push_back(std::move(m));
  edgellm::Json o = edgellm::Json::object();
  o.set("object", "list");
  o.set("data", std::move(data));
  return o;
}

void complete(Server& s, Endpoint ep, const httplib::Request& req, httplib::Response& res) {
  ++s.n_requests;
  edgellm::openai::ApiRequest r;
  std::shared_ptr<edgellm::Job> job;
  // This request's connection, probed by the scheduler before each token: a client that closed it
  // cancels the request. Detached before the connection can close (after the answer, or when
  // httplib releases the stream), so a reused descriptor is never probed.
  auto conn = std::make_shared<edgellm::ClientSocket>(
      edgellm::find_connection(req.local_addr, req.local_port, req.remote_addr, req.remote_port));
  std::function<bool()> client_gone;
  if (conn->attached()) client_gone = [conn] { return conn->gone(); };
  try {
    r = edgellm::openai::parse_request(req.body, ep, s.limits);
    const std::string text = edgellm::openai::prompt_text(r, s.chat_template);
    std::vector<int32_t> toks = s.tok->encode(text, s.tok->add_bos(), true);
    if (toks.empty()) throw ApiError(400, "the prompt has no tokens", "invalid_request_error", ep == Endpoint::Chat ? "messages" : "prompt");
    edgellm::openai::check_fits(r, toks.size(), s.limits.n_ctx);
    try {
      job = s.sched->submit(std::move(toks), r.gp, r.cache_prompt, r.n_probs, r.stream, client_gone);
    } catch (const edgellm::Error& e) {
      throw ApiError(503, e.what(), "unavailable_error");
    }
  } catch (const ApiError& e) {
    ++s.n_refused;
    send_error(res, e.status(), e.what(), e.type(), e.param());
    return;
  } catch (const edgellm::Error& e) {  // e.g. a chat format that cannot hold these roles
    ++s.n_refused;
    send_error(res, 400, e.what(), "invalid_request_error");
    return;
  }
  edgellm::openai::ResponseId rid;
  rid.id = std::string(ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(s.next_id++);
  rid.created = static_cast<int64_t>(std::time(nullptr));
  rid.model = s.model_id;

  if (!r.stream) {
    const edgellm::JobResult& jr = job->wait_done();
    conn->detach();
    std::vector<edgellm::TokenAlternatives> probs;
    for (auto& piece : job->wait(std::chrono::milliseconds(0)).pieces)
      if (piece.probs.id >= 0) probs.push_back(std::move(piece.probs));
    if (!jr.error.empty()) {
      send_error(res, 500, jr.error, "server_error");
      return;
    }
    res.set_content(edgellm::openai::response_json(r, rid, jr, probs, *s.tok).dump(), "application/json");
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  auto first = std::make_shared<bool>(true);
  res.set_chunked_content_provider(
      "text/event-stream",
      [&s, job, r, rid, first](size_t, httplib::DataSink& sink) {
        auto out = job->wait(std::chrono::milliseconds(100));
        auto send = [&](const std::string& ev) {
          if (sink.write(ev.data(), ev.size())) return true;
          job->cancel();  // the client went away (if the probe has not seen it yet)
          return false;
        };
        // One event per token, as llama-server streams (the first chat chunk carries the role).
        std::string events;
        for (const auto& piece : out.pieces) {
          std::vector<edgellm::TokenAlternatives> probs;
          if (piece.probs.id >= 0) probs.push_back(piece.probs);
          if (piece.text.empty() && probs.empty()) continue;
          events += edgellm::openai::sse_event(edgellm::openai::chunk_json(r, rid, piece.text, probs, *s.tok, nullptr, *first));
          *first = false;
        }
        if (!events.empty() && !send(events)) return false;
        if (!out.done) return true;
        const edgellm::JobResult& jr = job->result();
        std::string tail;
        if (!jr.error.empty()) tail = "data: " + edgellm::openai::error_body(500, jr.error, "server_error") + "\n\n";
        else tail = edgellm::openai::sse_event(edgellm::openai::chunk_json(r, rid, "", {}, *s.tok, &jr, *first));
        tail += "data: [DONE]\n\n";
        if (!send(tail)) return false;
        sink.done();
        return true;
      },
      [job, conn](bool success) {
        conn->detach();  // the connection may close from here on
        if (!success) job->cancel();
      });
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] {
    tool::Args args(argc, argv);
    tool::ModelFlags m;
    std::string host = "127.0.0.1", chat_template, alias, api_key;
    int port = 8080, timeout_s = 600, threads_http = 0;
    long long max_body_kb = 1024;
    bool repack = true;
    edgellm::SchedulerParams p;
    p.session.n_ctx = 0;
    p.max_queue = 256;
    for (std::string f; args.next(f);) {
      if (tool::standard_flag(f, kUsage, "edgellm-server")) return 0;
      else if (tool::model_flag(args, f, m)) continue;
      else if (tool::kv_flag(args, f, p.session)) continue;
      else if (f == "--host") host = args.value(f);
      else if (f == "--port") port = args.integer32(f, 0, 65535);
      else if (f == "-c" || f == "--ctx-size") p.session.n_ctx = tool::ctx_flag(args, f);
      else if (f == "-b" || f == "--batch-size") p.session.n_batch = args.integer32(f, 1, tool::kMaxContext);
      else if (f == "--prefill-chunk") p.prefill_chunk = args.integer32(f, 0, tool::kMaxContext);
      else if (f == "--parallel" || f == "-np") p.n_parallel = args.integer32(f, 1, 256);
      else if (f == "--max-queue") p.max_queue = args.integer32(f, 0, 1 << 20);
      else if (f == "--api-key") api_key = args.value(f);
      else if (f == "--timeout-s" || f == "--timeout" || f == "-to") timeout_s = args.integer32(f, 1, 86400);
      else if (f == "--max-body-kb") max_body_kb = args.integer(f, 1, 1 << 20);
      else if (f == "--threads-http") threads_http = args.integer32(f, 1, 1024);
      else if (f == "--alias" || f == "-a") alias = args.value(f);
      else if (f == "--chat-template") chat_template = args.value(f);
      else if (f == "--no-repack") repack = false;
      else tool::unknown(f);
    }
    args.no_positional();
    if (m.path.empty()) edgellm::throw_error("-m MODEL.gguf is required");
    if (host.empty()) edgellm::throw_error("option --host: empty address");
    if (!api_key.empty() && api_key.size() < 8) edgellm::throw_error("option --api-key: use at least 8 characters");
    if (!chat_template.empty()) edgellm::render_chat(chat_template, {}, true);  // an unknown name fails here, naming the known ones
    p.session.n_threads = m.threads;

    edgellm::LoadOptions load;
    load.repack = repack;
    load.mem_budget = m.mem_budget;
    auto model = edgellm::LlamaModel::load(m.path, [&] {
      edgellm::SessionParams plan_sp = p.session;
      if (plan_sp.n_ctx == 0) plan_sp.n_ctx = 4096;
      load.plan = edgellm::memory_plan_params(plan_sp, p.n_parallel);
      return load;
    }());
    const auto& cfg = model->config();
    if (p.session.n_ctx == 0) p.session.n_ctx = std::min(cfg.n_ctx_train, 4096);
    if (p.session.n_ctx > cfg.n_ctx_train)
      std::fprintf(stderr, "warning: -c %d is above the model's training context %d\n", p.session.n_ctx, cfg.n_ctx_train);
    if (chat_template.empty()) chat_template = tool::model_chat_template(model->file().get_string_or("tokenizer.chat_template", ""));
    if (alias.empty()) {
      alias = m.path;
      const size_t slash = alias.find_last_of('/');
      if (slash != std::string::npos) alias = alias.substr(slash + 1);
    }

    Server s;
    s.tok = std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(model->file()));
    s.sched.reset(new edgellm::BatchScheduler(model, s.tok, p));
    s.chat_template = chat_template;
    s.model_id = alias;
    s.api_key = api_key;
    s.limits.model_id = alias;
    s.limits.n_ctx = p.session.n_ctx;

    // SIGINT / SIGTERM end the server from a thread of its own (sigwait), not in a signal handler;
    // every thread started from here on inherits the blocked mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    httplib::Server http;
    const int n_http = threads_http > 0 ? threads_http : std::max(16, 4 * p.n_parallel);
    http.new_task_queue = [n_http] { return new httplib::ThreadPool(static_cast<size_t>(n_http)); };
    http.set_payload_max_length(static_cast<size_t>(max_body_kb) * 1024);
    http.set_read_timeout(timeout_s, 0);
    http.set_write_timeout(timeout_s, 0);
    http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || authorized(s, req)) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401, "Invalid API Key", "authentication_error");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses without a body of ours (404, 405, 413 from httplib) get an OpenAI error object too.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) send_error(res, 413, "request body is larger than --max-body-kb", "invalid_request_error");
      else if (res.status == 404) send_error(res, 404, "no endpoint " + req.method + " " + req.path, "not_found_error");
      else send_error(res, res.status, "HTTP error", "invalid_request_error");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, 500, what, "server_error");
    });

    auto json_reply = [](httplib::Response& res, const edgellm::Json& j) { res.set_content(j.dump(), "application/json"); };
    http.Get("/health", [&](const httplib::Request&, httplib::Response& res) { json_reply(res, health_json(s)); });
    for (const char* path : {"/v1/models", "/models"})
      http.Get(path, [&](const httplib::Request&, httplib::Response& res) { json_reply(res, models_json(s)); });
    for (const char* path : {"/v1/chat/completions", "/chat/completions"})
      http.Post(path, [&](const httplib::Request& req, httplib::Response& res) { complete(s, Endpoint::Chat, req, res); });
    for (const char* path : {"/v1/completions", "/completions"})
      http.Post(path, [&](const httplib::Request& req, httplib::Response& res) { complete(s, Endpoint::Completion, req, res); });

    int bound = port;
    if (port == 0) bound = http.bind_to_any_port(host);
    else if (!http.bind_to_port(host, port)) bound = -1;
    if (bound <= 0) edgellm::throw_error("cannot listen on ", host, ":", port, " (address in use, or not an address of this machine)");

    s.sched->start();
    std::thread signals([&] {
      int sig = 0;
      sigwait(&sigs, &sig);
      std::fprintf(stderr, "edgellm-server: signal %d, stopping\n", sig);
      http.stop();
    });
    signals.detach();
    std::fprintf(stderr, "edgellm-server: model %s (%d layers, vocab %d), chat template %s, context %d per request, "
                         "%d parallel, KV %s\n",
                 alias.c_str(), cfg.n_layer, cfg.n_vocab, chat_template.c_str(), p.session.n_ctx, p.n_parallel,
                 edgellm::dtype_name(p.session.kv_type));
    std::fprintf(stderr, "edgellm-server: listening on http://%s:%d%s\n", host.c_str(), bound,
                 api_key.empty() ? "" : " (API key required)");
    std::fflush(stderr);
    if (!http.listen_after_bind()) edgellm::throw_error("the HTTP server stopped with an error");
    s.sched->stop();
    return 0;
  });
}
