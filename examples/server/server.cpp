// edgellm-server: an OpenAI-compatible HTTP endpoint, as llama-server serves one —
// POST /v1/chat/completions, POST /v1/completions (JSON or SSE streams), GET /v1/models,
// GET /health. Up to --parallel requests decode together in one batch (BatchScheduler: one
// forward pass per step, a paged-KV sequence each, common prompt prefixes shared); more wait in a
// queue; a new prompt is read a chunk per step beside the running requests' tokens. A client that
// closes its connection cancels its request before the next token, streamed or not (the
// scheduler probes the connection's socket, client_socket.hpp). Request parsing and
// response shapes are openai.hpp; the HTTP/1.1 transport (limits that hold before
// authentication, pipelining) is http_server.hpp (all three in this folder, not in the library); this file is routing, the browser
// guards (Host, Origin / CORS), authentication and flags.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/resource.h>

#include <edgellm/engine/batch_scheduler.hpp>
#include <edgellm/model/memory_plan.hpp>
#include <edgellm/text/chat_template.hpp>
#include "client_socket.hpp"
#include "embeddings_api.hpp"
#include "common.hpp"  // examples/ (the tools' shared flags)
#include "http_server.hpp"
#include "openai.hpp"
#include "operator_api.hpp"
#include "speculative_flags.hpp"

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
    "  --api-key KEY          require 'Authorization: Bearer KEY' on every endpoint but /health; without a\n"
    "                         key, requests whose Host is not this server's address, localhost or an IP\n"
    "                         address get 403 (DNS rebinding). On the command line other users of the\n"
    "                         machine can read it (/proc/PID/cmdline): prefer --api-key-file\n"
    "  --api-key-file FILE    the key from FILE (one line); without either flag: $EDGELLM_API_KEY\n"
    "  --slot-save-path DIR   serve POST /slots/{id}?action=save|restore|erase {\"filename\": F}: a kept\n"
    "                         prompt cache (id 0: the last finished request's) saved to or restored from\n"
    "                         DIR/F (a restored one is reused by requests starting with its tokens)\n"
    "  --metrics              serve GET /metrics (Prometheus text: requests, tokens, prompt and decode\n"
    "                         seconds, slots busy, KV blocks, weight bytes streamed)\n"
    "  --log-format F         the line logged per request on stderr (method, path, status, duration,\n"
    "                         tokens; never message text): text (default) or json\n"
    "  --cors ORIGIN          let browser pages from ORIGIN (e.g. http://localhost:3000; * for any) call\n"
    "                         the API; repeatable. Other cross-origin requests get 403 (default: none)\n"
    "  --timeout-s N          a request body must arrive within N s (default 600)\n"
    "  --write-timeout-s N    an answer's write that makes no progress for N s (the client stopped reading:\n"
    "                         its window and our send buffer stay full) closes the connection; a stream is\n"
    "                         cancelled and its slot freed (default 60)\n"
    "  --head-timeout-s N     a request line and headers must arrive within N s (default 10; then 408)\n"
    "  --idle-timeout-s N     an idle keep-alive connection is closed after N s (default 30)\n"
    "  --max-connections N    open connections (default 512); at the cap the longest-waiting idle or\n"
    "                         incomplete one is closed for a new one\n"
    "  --max-header-kb N      request line + headers beyond N KiB, or over 100 header lines: 431 (default 32)\n"
    "  --max-body-kb N        request bodies larger than this (counted as received, chunked or not) are\n"
    "                         refused with 413 (default 1024); compressed request bodies get 415\n"
    "  --alias NAME           model id in /v1/models and responses (default: the file name); requests\n"
    "                         naming any model are served by the loaded one\n"
    "  --strict-model         refuse requests naming a model other than --alias (404)\n"
    "  --no-prompt-special    /v1/completions: control-token text in a prompt (e.g. </s>) stays text (by\n"
    "                         default it becomes the token, as llama-server does; chat message contents\n"
    "                         always stay text)\n"
    "  --chat-template NAME   a built-in chat format (chatml, llama3, ...) or Jinja source instead of the\n"
    "                         model's own template (default: the GGUF's, rendered by the Jinja engine)\n"
    "  --chat-template-file F a Jinja chat template file\n"
    "  --chat-template-kwargs JSON  template variables for every request, e.g. '{\"enable_thinking\": false}'\n"
    "                         (a request's chat_template_kwargs add to and override them)\n"
    "  --reasoning-format F   thoughts (<think>...</think>) of chat answers: deepseek / auto (default) put\n"
    "                         them in reasoning_content, deepseek-legacy also keeps them in the content,\n"
    "                         none leaves them in the content; requests may say reasoning_format\n"
    "  --reasoning-budget N   -1 (default): unrestricted; 0: thinking off where the template supports it\n"
    "  -b, --batch-size N     prompt tokens per forward pass (default 512)\n"
    "  --prefill-chunk N      prompt tokens a new request evaluates per step, in the same forward pass\n"
    "                         as the next token of every running request (default 64, at most -b;\n"
    "                         0 = -b): a long prompt delays running streams by one chunk a token\n"
    "  -t, --threads N        compute threads (default 0 = every hardware thread)\n"
    "  --kv-block N --kv-type T --kv-recent N --kv-budget-mb X   KV cache as in edgellm-cli; the byte\n"
    "                         budget is shared by every request\n"
    "  --no-repack            keep every weight matrix as stored in the file\n"
    "  --mem-budget MIB       memory the model may use (see edgellm-cli --help)\n"
    "  -md FILE, --draft-layers N, --lookup, --draft-max N, --draft-min N, --draft-p-min P, --draft-adaptive\n"
    "                         speculative decoding as in edgellm-cli: the draft source for every request,\n"
    "                         the draft parameters their default (requests: speculative.n_max, .n_min,\n"
    "                         .p_min as llama-server, and \"lookup\": true for prompt lookup)\n"
    "  --embeddings           serve POST /v1/embeddings (OpenAI's shape, encoding_format float or base64)\n"
    "                         and POST /embedding (llama-server's): the last hidden state pooled and\n"
    "                         L2-normalised (embd_normalize -1: not); batches of -b tokens, -c per input\n"
    "  --pooling P            none | mean | cls | last (default: the GGUF's <arch>.pooling_type, none\n"
    "                         without it; none is served by /embedding only, one vector per token)\n"
    "  --version              print the version\n"
    "Also as llama-server: POST /tokenize {\"content\", \"add_special\", \"parse_special\", \"with_pieces\"},\n"
    "POST /detokenize {\"tokens\"}, GET /props.\n"
    "Requests take OpenAI's fields (messages / prompt, max_tokens, temperature, top_p, seed, stop,\n"
    "stream, stream_options.include_usage, logit_bias) and llama-server's top_k, min_p, repeat_penalty, n_probs,\n"
    "cache_prompt, plus deadline_ms: the answer ends before this budget (finish_reason \"deadline\").\n"
    "POST /apply-template renders messages (and tools) with the chat template: {\"prompt\": ...}.\n"
    "Constrained answers: response_format {\"type\": \"json_object\"} or {\"type\": \"json_schema\", \"json_schema\":\n"
    "{\"schema\": ...}}, llama-server's \"json_schema\" and \"grammar\" (GBNF); tool calls: \"tools\", \"tool_choice\"\n"
    "(auto / none / required / {\"type\": \"function\", \"function\": {\"name\"}}), \"parallel_tool_calls\", in the\n"
    "format the chat template teaches (Hermes / Qwen, Llama 3.x, Mistral, Functionary v3.1; /props says which).\n";

using edgellm::openai::ApiError;
using edgellm::openai::Endpoint;

struct Server {
  std::unique_ptr<edgellm::BatchScheduler> sched;
  std::shared_ptr<const edgellm::Tokenizer> tok;
  edgellm::ChatTemplate chat;        // the model's Jinja template or a built-in format
  edgellm::Json chat_kwargs;         // --chat-template-kwargs (and --reasoning-budget 0)
  edgellm::ReasoningFormat reasoning = edgellm::ReasoningFormat::Deepseek;
  edgellm::ReasoningTags reasoning_tags;
  edgellm::ToolCallFormat tool_format = edgellm::ToolCallFormat::None;  // read off the template
  std::unique_ptr<edgellm::GrammarCache> grammars;                       // compiled grammars, shared by requests
  std::string model_id;
  std::string api_key;
  std::string host;                  // --host, for the Host check
  std::vector<std::string> cors;     // --cors origins ("*": any)
  bool prompt_special = true;        // /v1/completions prompts: control-token text becomes the token
  edgellm::openai::ApiLimits limits;
  std::string model_path, chat_template_source;  // for /props: the file, its tokenizer.chat_template
  bool metrics = false;                          // --metrics: GET /metrics
  std::string slot_save_path;                    // --slot-save-path: POST /slots/{id}?action=...
  bool log_json = false;                         // --log-format json
  // For /metrics: over the completions that ended (prompt tokens evaluated and taken from the cache,
  // tokens generated, their prefill and decode time in microseconds); HTTP requests answered.
  std::atomic<uint64_t> prompt_tokens{0}, prompt_tokens_cached{0}, completion_tokens{0}, prompt_us{0}, decode_us{0};
  std::atomic<uint64_t> http_requests{0};
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> n_requests{0}, n_refused{0};  // HTTP requests to the completion endpoints; refused with 4xx/503
  // --embeddings: the embedder (one request at a time: it holds one scratch context) and its input limits.
  std::unique_ptr<edgellm::Embedder> embedder;
  std::mutex embed_mutex;
  edgellm::openai::EmbedLimits embed_limits;
};

using edgellm::http::Headers;
using edgellm::http::Reply;
using edgellm::http::Request;

// A completion's counts into the metrics and its log line.
void account(Server& s, const edgellm::JobResult& jr, edgellm::ops::RequestLog& log) {
  s.prompt_tokens += static_cast<uint64_t>(jr.n_prompt);
  s.prompt_tokens_cached += static_cast<uint64_t>(jr.n_cached);
  s.completion_tokens += jr.tokens.size();
  s.prompt_us += static_cast<uint64_t>(jr.prefill_ms * 1e3);
  s.decode_us += static_cast<uint64_t>(jr.decode_ms * 1e3);
  log.prompt_tokens = jr.n_prompt + jr.n_cached;
  log.completion_tokens = static_cast<int>(jr.tokens.size());
}

// The Reply a handler writes to, remembering the status for the request's log line (499: no
// answer, the client went away).
class LoggedReply : public Reply {
 public:
  explicit LoggedReply(Reply& r) : r_(r) {}
  void send(int status, const std::string& type, const std::string& body, const Headers& extra) override {
    status_ = status;
    r_.send(status, type, body, extra);
  }
  bool begin_stream(int status, const std::string& type, const Headers& extra) override {
    status_ = status;
    return r_.begin_stream(status, type, extra);
  }
  bool chunk(const std::string& data) override { return r_.chunk(data); }
  void end_stream() override { r_.end_stream(); }
  void abort() override {
    status_ = 499;
    r_.abort();
  }
  int status() const { return status_; }

 private:
  Reply& r_;
  int status_ = 0;
};

void write_log(const Server& s, const edgellm::ops::RequestLog& log) {
  const std::string line = edgellm::ops::log_line(log, s.log_json);
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines of concurrent requests do not mix
}

std::string error_json(int status, const std::string& message, const std::string& type, const std::string& param = "") {
  return edgellm::openai::error_body(status, message, type, param);
}

bool authorized(const Server& s, const Request& req) {
  if (s.api_key.empty()) return true;
  const std::string want = "Bearer " + s.api_key;
  const std::string got = req.header_or("authorization");
  // Compares every byte whatever the mismatch, so the time taken does not say how much matched.
  unsigned diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned>(want[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

// The host part of a Host header or an origin's authority ("[::1]:8080" -> "[::1]", "a:1" -> "a").
std::string host_part(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    const size_t e = authority.find(']');
    return e == std::string::npos ? authority : authority.substr(0, e + 1);
  }
  return authority.substr(0, authority.find(':'));
}

bool is_ip_literal(const std::string& h) {
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') return h.find_first_not_of("0123456789abcdefABCDEF:.", 1) == h.size() - 1;
  if (h.empty() || h.find_first_not_of("0123456789.") != std::string::npos) return false;
  return std::count(h.begin(), h.end(), '.') == 3;
}

// Without an API key, a browser page on another site can reach this server by a name that
// resolves to it (DNS rebinding): only Host values naming this machine by address, localhost or
// --host are served. (With a key such a page cannot authenticate.)
bool host_allowed(const Server& s, const Request& req) {
  if (!s.api_key.empty()) return true;
  const std::string* host = req.header("host");
  if (!host) return req.minor == 0;  // HTTP/1.0 has no Host (1.1 without one is refused before)
  std::string h = host_part(*host);
  for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h == "localhost" || is_ip_literal(h)) return true;
  std::string bound = s.host;
  for (char& c : bound) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return h == bound;
}

bool same_origin(const std::string& origin, const Request& req) {
  const std::string* host = req.header("host");
  return host && (origin == "http://" + *host);
}

// CORS: whether a request from a browser page is served, and the headers its answers carry.
// Requests without Origin (curl, SDKs) and from this server's own origin need nothing.
bool origin_allowed(const Server& s, const Request& req, Headers& out) {
  const std::string* origin = req.header("origin");
  if (!origin || same_origin(*origin, req)) return true;
  for (const std::string& o : s.cors) {
    if (o == "*" || o == *origin) {
      out.emplace_back("Access-Control-Allow-Origin", o == "*" ? "*" : *origin);
      if (o != "*") out.emplace_back("Vary", "Origin");
      return true;
    }
  }
  return false;
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

// GET /props, as llama-server shapes it (what this server has of it).
edgellm::Json props_json(const Server& s) {
  const edgellm::SamplerParams sp;
  auto f = [](float v) { return std::stod(edgellm::json_format_float(v)); };  // 0.8, not 0.800000011920929
  edgellm::Json params = edgellm::Json::object();
  params.set("temperature", f(sp.temperature));
  params.set("top_k", sp.top_k);
  params.set("top_p", f(sp.top_p));
  params.set("min_p", f(sp.min_p));
  params.set("repeat_penalty", f(sp.repeat_penalty));
  params.set("repeat_last_n", sp.penalty_last_n);
  params.set("presence_penalty", f(sp.presence_penalty));
  params.set("frequency_penalty", f(sp.frequency_penalty));
  params.set("seed", static_cast<int64_t>(sp.seed));
  params.set("n_predict", -1);
  edgellm::Json gen = edgellm::Json::object();
  gen.set("n_ctx", s.limits.n_ctx);
  gen.set("params", std::move(params));
  edgellm::Json modalities = edgellm::Json::object();
  modalities.set("vision", false);
  modalities.set("audio", false);
  auto piece = [&](int32_t id) { return id >= 0 && id < s.tok->n_vocab() ? s.tok->token_to_piece(id, true) : std::string(); };
  edgellm::Json p = edgellm::Json::object();
  p.set("default_generation_settings", std::move(gen));
  p.set("total_slots", s.sched->params().n_parallel);
  p.set("model_alias", s.model_id);
  p.set("model_path", s.model_path);
  p.set("modalities", std::move(modalities));
  p.set("endpoint_slots", false);
  p.set("endpoint_props", false);
  p.set("endpoint_metrics", s.metrics);
  p.set("chat_template", s.chat.is_jinja() ? s.chat.source() : s.chat_template_source);  // the template in use
  p.set("chat_template_name", s.chat.name());  // "jinja" or the built-in format's name
  p.set("tool_call_format", edgellm::tool_call_format_name(s.tool_format));
  p.set("bos_token", piece(s.tok->bos()));
  p.set("eos_token", piece(s.tok->eos()));
  p.set("build_info", std::string("edgellm ") + EDGELLM_VERSION_STRING);
  p.set("is_sleeping", false);
  return p;
}

// GET /metrics (--metrics): Prometheus text.
std::string metrics_text(const Server& s) {
  const auto st = s.sched->stats();
  const edgellm::WeightStream* ws = s.sched->model().weight_stream();
  using M = edgellm::ops::Metric;
  return edgellm::ops::prometheus_text({
      M{"http_requests_total", "counter", "HTTP requests answered (refusals included)", double(s.http_requests.load())},
      M{"requests_total", "counter", "Completion requests received", double(s.n_requests.load())},
      M{"requests_refused_total", "counter", "Completion requests refused (4xx, 503)", double(s.n_refused.load())},
      M{"requests_finished_total", "counter", "Completions ended, for any reason", double(st.finished)},
      M{"requests_cancelled_total", "counter", "Completions cancelled (the client went away or stopped reading)", double(st.cancelled)},
      M{"requests_failed_total", "counter", "Completions failed", double(st.failed)},
      M{"prompt_tokens_total", "counter", "Prompt tokens evaluated (cached ones excluded)", double(s.prompt_tokens.load())},
      M{"prompt_tokens_cached_total", "counter", "Prompt tokens reused from the cache", double(s.prompt_tokens_cached.load())},
      M{"prompt_seconds_total", "counter", "Time spent evaluating prompts, summed over requests", s.prompt_us.load() / 1e6},
      M{"tokens_predicted_total", "counter", "Tokens generated", double(s.completion_tokens.load())},
      M{"tokens_predicted_seconds_total", "counter", "Time spent generating, summed over requests", s.decode_us.load() / 1e6},
      M{"decode_steps_total", "counter", "Forward passes of the batch", double(st.steps)},
      M{"slots_total", "gauge", "Requests decoded together at most (--parallel)", double(s.sched->params().n_parallel)},
      M{"requests_processing", "gauge", "Slots busy", double(st.slots_busy)},
      M{"requests_deferred", "gauge", "Requests waiting for a slot", double(st.queued)},
      M{"kv_blocks_used", "gauge", "KV cache blocks in use", double(st.kv_blocks_used)},
      M{"kv_blocks_allocated", "gauge", "KV cache blocks allocated", double(st.kv_blocks_allocated)},
      M{"weights_streamed_bytes_total", "counter", "Weight bytes read from storage (models larger than memory; 0 when resident)",
        ws ? double(ws->stats().bytes_read) : 0.0},
  });
}

// The request's grammar (its own, or its tools' calls in the template's format) compiled, with
// the lazy triggers, into r.gp.grammar; a grammar that does not parse is a 400.
void constrain(Server& s, edgellm::openai::ApiRequest& r) {
  edgellm::ToolCallGrammar g;
  const char* param = "grammar";
  try {
    if (edgellm::openai::wants_tool_calls(r)) {
      r.tool_format = s.tool_format;
      param = "tools";
      g = edgellm::tool_call_grammar(r.tool_format, r.functions, r.tool_choice, r.parallel_tool_calls);
    } else {
      g.gbnf = r.grammar;
    }
    if (g.gbnf.empty()) return;
    r.gp.grammar.masker = s.grammars->get(g.gbnf);
    r.gp.grammar.triggers = g.triggers;
  } catch (const edgellm::Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", param);
  }
}

void send_error(Reply& rep, const Headers& hdrs, int status, const std::string& message, const std::string& type,
                const std::string& param) {
  rep.send(status, "application/json", error_json(status, message, type, param), hdrs);
}

// A completion request parsed into r, rendered, constrained and handed to the scheduler. A request
// refused on the way is answered here (nullptr).
std::shared_ptr<edgellm::Job> submit(Server& s, Endpoint ep, const Request& req, Reply& rep, const Headers& hdrs,
                                     edgellm::openai::ApiRequest& r, edgellm::ClientSocket& conn,
                                     const std::function<bool()>& client_gone) {
  try {
    r = edgellm::openai::parse_request(req.body, ep, s.limits);
    if (!r.functions.empty() && !s.chat.is_jinja())
      throw ApiError(400, "tools need the model's own (Jinja) chat template: the built-in format \"" + s.chat.name() +
                              "\" cannot render them (--chat-template-file, or a model file with one)",
                     "invalid_request_error", "tools");
    std::string rendered;
    std::vector<int32_t> toks = edgellm::openai::prompt_tokens(r, s.chat, s.chat_kwargs, *s.tok, s.prompt_special, &rendered);
    if (ep == Endpoint::Chat) {
      if (!r.has_reasoning_format) r.reasoning = s.reasoning;
      r.reasoning_tags = s.reasoning_tags;
      r.thinking_open = edgellm::ReasoningSplitter::prompt_opens(rendered, s.reasoning_tags);
    }
    constrain(s, r);
    if (toks.empty()) throw ApiError(400, "the prompt has no tokens", "invalid_request_error", ep == Endpoint::Chat ? "messages" : "prompt");
    edgellm::openai::check_fits(r, toks.size(), s.limits.n_ctx);
    try {
      return s.sched->submit(std::move(toks), r.gp, r.cache_prompt, r.n_probs, r.stream, client_gone);
    } catch (const edgellm::Error& e) {
      throw ApiError(503, e.what(), "unavailable_error");
    }
  } catch (const ApiError& e) {
    ++s.n_refused;
    conn.detach();
    send_error(rep, hdrs, e.status(), e.what(), e.type(), e.param());
  } catch (const edgellm::Error& e) {  // e.g. a chat format that cannot hold these roles
    ++s.n_refused;
    conn.detach();
    send_error(rep, hdrs, 400, e.what(), "invalid_request_error", "");
  }
  return nullptr;
}

// A request cancelled because its client closed (or half-closed) gets no answer.
bool client_left(const edgellm::JobResult& jr, edgellm::ClientSocket& conn) {
  return jr.reason == edgellm::StopReason::Cancelled && conn.gone();
}

// "stream": true: one server-sent event per token, then the finish and [DONE].
void stream_answer(Server& s, const edgellm::openai::ApiRequest& r, const edgellm::openai::ResponseId& rid,
                   edgellm::Job& job, edgellm::ClientSocket& conn, Reply& rep, const Headers& hdrs,
                   edgellm::ops::RequestLog& log) {
  Headers sh = hdrs;
  sh.emplace_back("Cache-Control", "no-cache");
  if (!rep.begin_stream(200, "text/event-stream", sh)) {
    conn.detach();
    job.cancel();
    return;
  }
  edgellm::openai::StreamEvents stream(r, rid, *s.tok);
  for (;;) {
    auto out = job.wait(std::chrono::milliseconds(100));
    // One event per token, as llama-server streams.
    std::string events;
    for (const auto& piece : out.pieces) {
      std::vector<edgellm::TokenAlternatives> probs;
      if (piece.probs.id >= 0) probs.push_back(piece.probs);
      if (piece.text.empty() && probs.empty()) continue;
      events += stream.piece(piece.text, probs);
    }
    if (!events.empty() && !rep.chunk(events)) break;  // the client went away (if the probe has not seen it yet)
    if (!out.done) continue;
    const edgellm::JobResult& jr = job.result();
    account(s, jr, log);
    if (client_left(jr, conn)) break;
    std::string tail;
    if (!jr.error.empty()) tail = "data: " + error_json(500, jr.error, "server_error") + "\n\n";
    else tail = stream.finish(jr);
    tail += "data: [DONE]\n\n";
    conn.detach();
    if (rep.chunk(tail)) rep.end_stream();
    return;
  }
  conn.detach();
  job.cancel();
}

// A completion request, on a thread of its own (the transport hands it over complete).
void complete(Server& s, Endpoint ep, const Request& req, Reply& rep, const Headers& hdrs, edgellm::ops::RequestLog& log) {
  ++s.n_requests;
  edgellm::openai::ApiRequest r;
  // This request's connection, probed by the scheduler before each token: a client that closed it
  // cancels the request. Detached before the connection can close (after the answer), so a
  // reused descriptor is never probed.
  auto conn = std::make_shared<edgellm::ClientSocket>(req.fd);
  std::function<bool()> client_gone = [conn] { return conn->gone(); };
  const std::shared_ptr<edgellm::Job> job = submit(s, ep, req, rep, hdrs, r, *conn, client_gone);
  if (!job) return;
  edgellm::openai::ResponseId rid;
  rid.id = std::string(ep == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(s.next_id++);
  rid.created = static_cast<int64_t>(std::time(nullptr));
  rid.model = s.model_id;

  if (r.stream) return stream_answer(s, r, rid, *job, *conn, rep, hdrs, log);
  const edgellm::JobResult& jr = job->wait_done();
  const bool left = client_left(jr, *conn);
  conn->detach();
  if (left) return rep.abort();
  std::vector<edgellm::TokenAlternatives> probs;
  for (auto& piece : job->wait(std::chrono::milliseconds(0)).pieces)
    if (piece.probs.id >= 0) probs.push_back(std::move(piece.probs));
  account(s, jr, log);
  if (!jr.error.empty()) return send_error(rep, hdrs, 500, jr.error, "server_error", "");
  rep.send(200, "application/json", edgellm::openai::response_json(r, rid, jr, probs, *s.tok).dump(), hdrs);
}

// llama-server's tokenizer endpoints (POST; on a thread of their own, as completions: a long
// content takes a while).
bool tokenizer_path(const std::string& path) { return path == "/tokenize" || path == "/detokenize"; }

// POST /apply-template (llama-server's): the chat rendered by the template, {"prompt": "..."}.
// A template that refuses the conversation (its raise_exception) or fails is a 400 with its message.
void apply_template(Server& s, const Request& req, Reply& rep, const Headers& hdrs) {
  try {
    const edgellm::openai::ApiRequest r = edgellm::openai::parse_request(req.body, Endpoint::ApplyTemplate, s.limits);
    edgellm::Json o = edgellm::Json::object();
    o.set("prompt", edgellm::openai::prompt_text(r, s.chat, s.chat_kwargs));
    rep.send(200, "application/json", o.dump(), hdrs);
  } catch (const ApiError& e) {
    rep.send(e.status(), "application/json", error_json(e.status(), e.what(), e.type(), e.param()), hdrs);
  } catch (const edgellm::Error& e) {
    rep.send(400, "application/json", error_json(400, e.what(), "invalid_request_error", "messages"), hdrs);
  }
}

// POST /v1/embeddings (OpenAI's shape) and /embedding (llama-server's), on a thread of their own.
bool embedding_path(const std::string& path) { return path == "/v1/embeddings" || path == "/embeddings" || path == "/embedding"; }

void embeddings(Server& s, const Request& req, Reply& rep, const Headers& hdrs, edgellm::ops::RequestLog& log) {
  try {
    if (!s.embedder) throw ApiError(501, "this server does not serve embeddings: start it with --embeddings", "not_supported_error");
    const edgellm::openai::EmbedRequest r =
        edgellm::openai::parse_embedding_request(req.body, req.path == "/embedding", *s.tok, s.limits, s.embed_limits);
    const edgellm::Pooling pooling = s.embedder->pooling();
    if (r.oai && pooling == edgellm::Pooling::None)
      throw ApiError(400, "pooling 'none' gives one vector per token, which OpenAI's shape cannot hold: use POST /embedding, or "
                          "start the server with --pooling mean|cls|last", "invalid_request_error", "input");
    std::vector<edgellm::Embedding> e;
    {
      std::lock_guard<std::mutex> lock(s.embed_mutex);
      s.embedder->set_normalize(r.normalize && pooling != edgellm::Pooling::None);  // llama-server: token rows as computed
      e = s.embedder->embed_tokens(r.inputs);
    }
    int n_tokens = 0;
    for (const edgellm::Embedding& x : e) n_tokens += x.n_tokens;
    s.prompt_tokens += static_cast<uint64_t>(n_tokens);
    log.prompt_tokens = n_tokens;
    rep.send(200, "application/json", edgellm::openai::embeddings_json(r, e, s.embedder->n_embd(), s.model_id).dump(), hdrs);
  } catch (const ApiError& e) {
    ++s.n_refused;
    rep.send(e.status(), "application/json", edgellm::openai::error_body(e), hdrs);
  } catch (const edgellm::Error& e) {
    ++s.n_refused;
    rep.send(400, "application/json", error_json(400, e.what(), "invalid_request_error"), hdrs);
  }
}

bool completion_path(const std::string& path, Endpoint& ep) {
  if (path == "/v1/chat/completions" || path == "/chat/completions") return ep = Endpoint::Chat, true;
  if (path == "/v1/completions" || path == "/completions") return ep = Endpoint::Completion, true;
  return false;
}

// Every request: the browser guards, then authentication, then the endpoint.
// POST /slots/{id}?action=save|restore|erase (--slot-save-path): a kept sequence of the scheduler
// written to, read from or dropped; the file is read and written here, the KV cache touched on the
// scheduler's thread between steps. Replies as llama-server's.
void slot_action(Server& s, const Request& req, Reply& rep, Headers& hdrs) {
  try {
    if (s.slot_save_path.empty())
      throw ApiError(501, "this server does not save slots: start it with --slot-save-path DIR", "not_supported_error");
    const edgellm::ops::SlotRequest r = edgellm::ops::parse_slot_request(req.path, req.query, req.body, s.limits);
    edgellm::Json out = edgellm::Json::object(), t = edgellm::Json::object();
    out.set("id_slot", r.id);
    const std::string file = s.slot_save_path + "/" + r.filename;
    const auto t0 = std::chrono::steady_clock::now();
    auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
    try {
      if (r.action == "save") {
        const edgellm::SessionSnapshot snap = s.sched->snapshot_kept(r.id);
        const std::vector<uint8_t> bytes = edgellm::session_file_bytes(snap);
        edgellm::write_file_atomic(file, bytes);
        out.set("filename", r.filename);
        out.set("n_saved", static_cast<int64_t>(snap.tokens.size()));
        out.set("n_written", static_cast<int64_t>(bytes.size()));
        t.set("save_ms", ms());
      } else if (r.action == "restore") {
        const std::vector<uint8_t> bytes = edgellm::read_file_bytes(file);
        const edgellm::SessionSnapshot snap = edgellm::parse_session_file(bytes.data(), bytes.size(), r.filename);
        s.sched->restore_kept(snap, r.filename);
        out.set("filename", r.filename);
        out.set("n_restored", static_cast<int64_t>(snap.tokens.size()));
        out.set("n_read", static_cast<int64_t>(bytes.size()));
        t.set("restore_ms", ms());
      } else {
        out.set("n_erased", static_cast<int64_t>(s.sched->erase_kept(r.id)));
      }
    } catch (const ApiError&) {
      throw;
    } catch (const edgellm::Error& e) {  // no such slot, a refused or unreadable file: the caller's to fix
      std::string msg = e.what();
      const size_t at = msg.find(s.slot_save_path + "/");  // the folder is the operator's, not the client's business
      if (at != std::string::npos) msg.erase(at, s.slot_save_path.size() + 1);
      throw ApiError(400, msg, "invalid_request_error");
    }
    if (r.action != "erase") out.set("timings", std::move(t));
    rep.send(200, "application/json", out.dump(), hdrs);
  } catch (const ApiError& e) {
    rep.send(e.status(), "application/json", edgellm::openai::error_body(e), hdrs);
  }
}

void handle(Server& s, const Request& req, Reply& rep, edgellm::ops::RequestLog& log) {
  Headers hdrs;
  auto reply_error = [&](int status, const std::string& message, const std::string& type) {
    rep.send(status, "application/json", error_json(status, message, type), hdrs);
  };
  if (!host_allowed(s, req))
    return reply_error(403, "Host '" + req.header_or("host") + "' is not this server's address: without --api-key only "
                            "localhost, IP addresses and --host are served (DNS rebinding guard)", "permission_error");
  if (!origin_allowed(s, req, hdrs))
    return reply_error(403, "cross-origin request from '" + req.header_or("origin") + "' refused (allow it with --cors ORIGIN)",
                       "permission_error");
  Endpoint ep = Endpoint::Chat;
  const bool is_completion = completion_path(req.path, ep) || tokenizer_path(req.path) || embedding_path(req.path);
  const bool is_get = req.path == "/health" || req.path == "/v1/models" || req.path == "/models" || req.path == "/props" ||
                      req.path == "/metrics";
  if (req.method == "OPTIONS") {  // CORS preflight (or a plain OPTIONS): allowed origins only, checked above
    hdrs.emplace_back("Allow", is_completion ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
    if (req.header("origin") && req.header("access-control-request-method")) {
      hdrs.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      hdrs.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
      hdrs.emplace_back("Access-Control-Max-Age", "600");
    }
    return rep.send(204, "", "", hdrs);
  }
  if (req.path != "/health" && !authorized(s, req)) return reply_error(401, "Invalid API Key", "authentication_error");
  auto json_reply = [&](const edgellm::Json& j) { rep.send(200, "application/json", j.dump(), hdrs); };
  if (is_get && (req.method == "GET" || req.method == "HEAD")) {
    if (req.path == "/metrics") {
      if (!s.metrics) return reply_error(501, "this server does not serve /metrics: start it with --metrics", "not_supported_error");
      return rep.send(200, "text/plain; version=0.0.4", metrics_text(s), hdrs);
    }
    return json_reply(req.path == "/health" ? health_json(s) : req.path == "/props" ? props_json(s) : models_json(s));
  }
  if (is_completion && req.method == "POST" && tokenizer_path(req.path)) {
    try {
      return json_reply(req.path == "/tokenize" ? edgellm::ops::tokenize(req.body, *s.tok, s.limits)
                                                : edgellm::ops::detokenize(req.body, *s.tok, s.limits));
    } catch (const ApiError& e) {
      return rep.send(e.status(), "application/json", edgellm::openai::error_body(e), hdrs);
    }
  }
  if (is_completion && req.method == "POST" && embedding_path(req.path)) return embeddings(s, req, rep, hdrs, log);
  if (is_completion && req.method == "POST") return complete(s, ep, req, rep, hdrs, log);
  if (req.path.compare(0, 7, "/slots/") == 0) {
    if (req.method != "POST") {
      hdrs.emplace_back("Allow", "POST, OPTIONS");
      return reply_error(405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error");
    }
    return slot_action(s, req, rep, hdrs);
  }
  if (req.path == "/apply-template" || req.path == "/v1/apply-template") {
    if (req.method == "POST") return apply_template(s, req, rep, hdrs);
    hdrs.emplace_back("Allow", "POST, OPTIONS");
    return reply_error(405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error");
  }
  if (is_get || is_completion) {
    hdrs.emplace_back("Allow", is_get ? "GET, HEAD, OPTIONS" : "POST, OPTIONS");
    return reply_error(405, "method " + req.method + " is not allowed on " + req.path, "invalid_request_error");
  }
  reply_error(404, "no endpoint " + req.method + " " + req.path, "not_found_error");
}

struct Options {
  tool::ModelFlags m;
  std::string host = "127.0.0.1", alias, api_key, api_key_file, log_format = "text", slot_save_path;
  bool metrics = false;
  tool::ChatFlags chat;
  std::vector<std::string> cors;
  int port = 8080;
  edgellm::http::Limits hl;
  bool repack = true, strict_model = false, prompt_special = true, embeddings = false;
  std::optional<edgellm::Pooling> pooling;
  edgellm::SchedulerParams p;
  edgellm::SpeculativeParams spec;
  tool::DraftFlags draft;
};

// Each connection is a descriptor: keep the cap under the process's limit.
void cap_connections(edgellm::http::Limits& hl) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 64 &&
      hl.max_connections > rl.rlim_cur - 64) {
    std::fprintf(stderr, "warning: --max-connections %zu lowered to %zu (open file limit %llu)\n", hl.max_connections,
                 static_cast<size_t>(rl.rlim_cur - 64), static_cast<unsigned long long>(rl.rlim_cur));
    hl.max_connections = static_cast<size_t>(rl.rlim_cur - 64);
  }
}

// *early: true when --help or --version was answered (the other flags are then not checked).
Options parse(int argc, char** argv, bool* early) {
  tool::Args args(argc, argv);
  Options o;
  auto& hl = o.hl;
  auto& p = o.p;
  hl.body_timeout_s = 600;
  hl.write_timeout_s = 60;
  long long max_body_kb = 1024, max_header_kb = 32;
  p.session.n_ctx = 0;
  p.max_queue = 256;
  for (std::string f; args.next(f);) {
    if (tool::standard_flag(f, kUsage, "edgellm-server")) { *early = true; return o; }
    else if (tool::model_flag(args, f, o.m)) continue;
    else if (tool::kv_flag(args, f, p.session)) continue;
    else if (tool::speculative_flag(args, f, o.spec, o.draft)) continue;
    else if (f == "--host") o.host = args.value(f);
    else if (f == "--port") o.port = args.integer32(f, 0, 65535);
    else if (f == "-c" || f == "--ctx-size") p.session.n_ctx = tool::ctx_flag(args, f);
    else if (f == "-b" || f == "--batch-size") p.session.n_batch = args.integer32(f, 1, tool::kMaxContext);
    else if (f == "--prefill-chunk") p.prefill_chunk = args.integer32(f, 0, tool::kMaxContext);
    else if (f == "--parallel" || f == "-np") p.n_parallel = args.integer32(f, 1, 256);
    else if (f == "--max-queue") p.max_queue = args.integer32(f, 0, 1 << 20);
    else if (f == "--api-key") o.api_key = args.value(f);
    else if (f == "--api-key-file") o.api_key_file = args.value(f);
    else if (f == "--metrics") o.metrics = true;
    else if (f == "--slot-save-path") o.slot_save_path = args.value(f);
    else if (f == "--log-format") o.log_format = args.value(f);
    else if (f == "--timeout-s" || f == "--timeout" || f == "-to") hl.body_timeout_s = args.integer32(f, 1, 86400);
    else if (f == "--write-timeout-s") hl.write_timeout_s = args.integer32(f, 1, 86400);
    else if (f == "--head-timeout-s") hl.head_timeout_s = args.integer32(f, 1, 3600);
    else if (f == "--idle-timeout-s") hl.idle_timeout_s = args.integer32(f, 1, 86400);
    else if (f == "--max-connections") hl.max_connections = static_cast<size_t>(args.integer32(f, 1, 65536));
    else if (f == "--max-header-kb") max_header_kb = args.integer(f, 1, 1024);
    else if (f == "--max-body-kb") max_body_kb = args.integer(f, 1, 1 << 20);
    else if (f == "--cors") o.cors.push_back(args.value(f));
    else if (f == "--strict-model") o.strict_model = true;
    else if (f == "--no-prompt-special") o.prompt_special = false;
    else if (f == "--alias" || f == "-a") o.alias = args.value(f);
    else if (tool::chat_flag(args, f, o.chat)) continue;
    else if (f == "--no-repack") o.repack = false;
    else if (f == "--embeddings" || f == "--embedding") o.embeddings = true;
    else if (f == "--pooling") o.pooling = edgellm::parse_pooling(args.value(f), "option --pooling");
    else tool::unknown(f);
  }
  args.no_positional();
  if (o.m.path.empty()) edgellm::throw_error("-m MODEL.gguf is required");
  if (o.host.empty()) edgellm::throw_error("option --host: empty address");
  o.api_key = edgellm::ops::choose_api_key(o.api_key, o.api_key_file, std::getenv("EDGELLM_API_KEY"));
  if (o.log_format != "text" && o.log_format != "json") edgellm::throw_error("option --log-format: '", o.log_format, "' is not text or json");
  for (const std::string& origin : o.cors)
    if (origin != "*" && (origin.rfind("http://", 0) != 0 && origin.rfind("https://", 0) != 0))
      edgellm::throw_error("option --cors: '", origin, "' is not an origin (scheme://host[:port], or *)");
  hl.max_body = static_cast<size_t>(max_body_kb) * 1024;
  hl.max_head_bytes = static_cast<size_t>(max_header_kb) * 1024;
  cap_connections(hl);
  const auto& chat = o.chat;
  if (!chat.tmpl.empty() && chat.tmpl.find("{%") == std::string::npos && chat.tmpl.find("{{") == std::string::npos)
    edgellm::ChatTemplate::builtin(chat.tmpl);  // an unknown name fails before the model loads, naming the known ones
  p.session.n_threads = o.m.threads;
  tool::check_speculative(o.spec, o.draft);
  return o;
}

// The draft model (first: with --mem-budget its size is the target's less), then the model; the
// context and the alias default from it.
std::shared_ptr<const edgellm::LlamaModel> load(Options& o) {
  const auto& m = o.m;
  auto& p = o.p;
  p.draft = tool::load_draft(o.draft);
  p.draft_layers = o.draft.layers;

  edgellm::LoadOptions load;
  load.repack = o.repack;
  load.mem_budget = m.mem_budget;
  load.reserved_bytes = tool::draft_reserved_bytes(p.draft.get());
  auto model = edgellm::LlamaModel::load(m.path, [&] {
    edgellm::SessionParams plan_sp = p.session;
    if (plan_sp.n_ctx == 0) plan_sp.n_ctx = 4096;
    load.plan = edgellm::memory_plan_params(plan_sp, p.n_parallel);
    load.progress = tool::load_progress(false, m.path);
    return load;
  }());
  const auto& cfg = model->config();
  if (p.session.n_ctx == 0) p.session.n_ctx = std::min(cfg.n_ctx_train, 4096);
  if (p.session.n_ctx > cfg.n_ctx_train)
    std::fprintf(stderr, "warning: -c %d is above the model's training context %d\n", p.session.n_ctx, cfg.n_ctx_train);
  if (o.alias.empty()) {
    o.alias = m.path;
    const size_t slash = o.alias.find_last_of('/');
    if (slash != std::string::npos) o.alias = o.alias.substr(slash + 1);
  }
  return model;
}

// --embeddings: the embedder and its input limits (--pooling without it is an error).
void set_up_embeddings(Server& s, const Options& o, const std::shared_ptr<const edgellm::LlamaModel>& model) {
  const auto& p = o.p;
  if (o.embeddings) {
    edgellm::EmbedParams ep;
    ep.pooling = o.pooling;
    ep.n_batch = p.session.n_batch;
    ep.n_ctx = p.session.n_ctx;
    ep.n_threads = o.m.threads;
    ep.parse_special = o.prompt_special;
    s.embedder.reset(new edgellm::Embedder(model, s.tok, ep));
    s.embed_limits.n_ctx = p.session.n_ctx;
    s.embed_limits.n_vocab = model->config().n_vocab;
    s.embed_limits.parse_special = o.prompt_special;
    std::fprintf(stderr, "edgellm-server: embeddings on (/v1/embeddings, /embedding), pooling %s, %d dimensions\n",
                 edgellm::pooling_name(s.embedder->pooling()), s.embedder->n_embd());
  } else if (o.pooling) {
    edgellm::throw_error("option --pooling: needs --embeddings");
  }
}

// The server's state for the model and the flags.
void set_up(Server& s, Options& o, const std::shared_ptr<const edgellm::LlamaModel>& model) {
  const auto& p = o.p;
  s.tok = std::make_shared<const edgellm::Tokenizer>(edgellm::Vocab::from_gguf(model->file()));
  s.sched.reset(new edgellm::BatchScheduler(model, s.tok, p));
  const std::string gguf_template = model->file().get_string_or("tokenizer.chat_template", "");
  s.chat = tool::chat_template_of(o.chat, gguf_template, *s.tok);
  s.chat_kwargs = o.chat.kwargs;
  s.reasoning = o.chat.reasoning_format;
  s.reasoning_tags = edgellm::ReasoningTags::for_template(s.chat.source());
  s.tool_format = edgellm::tool_call_format_of(s.chat.source());
  s.grammars.reset(new edgellm::GrammarCache(*s.tok));
  s.model_id = o.alias;
  s.api_key = o.api_key;
  s.host = o.host;
  s.cors = o.cors;
  s.prompt_special = o.prompt_special;
  s.model_path = o.m.path;
  s.chat_template_source = gguf_template;
  s.metrics = o.metrics;
  s.slot_save_path = o.slot_save_path;
  s.log_json = o.log_format == "json";
  s.limits.model_id = o.alias;
  s.limits.strict_model = o.strict_model;
  s.limits.n_vocab = model->config().n_vocab;
  s.limits.n_ctx = p.session.n_ctx;
  s.limits.speculative = o.spec;
  set_up_embeddings(s, o, model);
}

// Every request, then its log line.
void serve_request(Server& s, const Request& req, Reply& rep) {
  const auto t0 = std::chrono::steady_clock::now();
  LoggedReply logged(rep);
  edgellm::ops::RequestLog log;
  log.method = req.method;
  log.path = req.path;
  log.remote = req.remote_ip;
  auto finish = [&](int status) {
    ++s.http_requests;
    log.status = status;
    log.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    write_log(s, log);
  };
  try {
    handle(s, req, logged, log);
  } catch (const std::exception& e) {  // answered here (not by the transport), so logged once
    if (!logged.status()) logged.send(500, "application/json", error_json(500, e.what(), "server_error"), {});
  }
  finish(logged.status());
}

// Completions, tokenizing and templates run on a thread of their own; the rest on the poll thread.
bool runs_on_own_thread(const Request& req) {
  Endpoint ep;  // (a template renders on the request's thread too: it is bounded, not instant)
  return req.method == "POST" && (completion_path(req.path, ep) || tokenizer_path(req.path) || embedding_path(req.path) ||
                                  req.path == "/apply-template" || req.path == "/v1/apply-template");
}

// A refusal before any handler: logged here.
std::pair<std::string, std::string> refusal(Server& s, int status, const std::string& message) {
  ++s.http_requests;
  edgellm::ops::RequestLog log;
  log.status = status;
  write_log(s, log);
  return std::make_pair(std::string("application/json"),
                        error_json(status, message, status == 413 || status == 415 || status == 431 || status == 400
                                                        ? "invalid_request_error" : "server_error"));
}

// Binds, starts the scheduler and answers requests until SIGINT / SIGTERM.
int serve(Server& s, const Options& o, const edgellm::LlamaModel& model) {
  const auto& p = o.p;
  const auto& cfg = model.config();
  const std::string& gguf_template = s.chat_template_source;
  // SIGINT / SIGTERM end the server from a thread of its own (sigwait), not in a signal handler;
  // every thread started from here on inherits the blocked mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  edgellm::http::Server http(
      o.hl, [&s](const Request& req, Reply& rep) { serve_request(s, req, rep); }, runs_on_own_thread,
      [&s](int status, const std::string& message) { return refusal(s, status, message); });
  const int bound = http.bind(o.host, o.port);

  s.sched->start();
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "edgellm-server: signal %d, stopping\n", sig);
    http.stop();  // closes every connection: the scheduler's probes then cancel the running requests
  });
  signals.detach();
  std::fprintf(stderr, "edgellm-server: model %s (%d layers, vocab %d), chat template %s, context %d per request, "
                       "%d parallel, KV %s\n",
               o.alias.c_str(), cfg.n_layer, cfg.n_vocab,
               s.chat.is_jinja() ? (gguf_template.empty() || s.chat.source() != gguf_template ? "jinja (given)" : "jinja (the model's)")
                                 : s.chat.name().c_str(),
               p.session.n_ctx, p.n_parallel,
               edgellm::dtype_name(p.session.kv_type));
  std::fprintf(stderr, "edgellm-server: listening on http://%s:%d%s\n", o.host.c_str(), bound,
               o.api_key.empty() ? "" : " (API key required)");
  std::fflush(stderr);
  if (!http.run()) {  // a request thread still runs: leave without destroying what it uses
    std::fflush(stderr);
    std::_Exit(0);
  }
  s.sched->stop();
  return 0;
}

int server_main(int argc, char** argv) {
  bool early = false;
  Options o = parse(argc, argv, &early);
  if (early) return 0;
  const auto model = load(o);
  Server s;
  set_up(s, o, model);
  return serve(s, o, *model);
}

}  // namespace

int main(int argc, char** argv) {
  return tool::run([&] { return server_main(argc, argv); });
}
