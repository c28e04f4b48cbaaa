// examples/server/openai.hpp: request bodies -> ApiRequest (types, ranges, model, context) and the response
// / stream chunk / error JSON the server sends.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "openai.hpp"  // examples/server/

#include "session_fixtures.hpp"

using namespace edgellm;
using namespace edgellm::openai;

namespace {

ApiLimits limits() {
  ApiLimits l;
  l.model_id = "stories260K.gguf";
  l.n_ctx = 256;
  return l;
}

ApiRequest chat(const std::string& body) { return parse_request(body, Endpoint::Chat, limits()); }
ApiRequest completion(const std::string& body) { return parse_request(body, Endpoint::Completion, limits()); }

// The ApiError a body gets: status and parameter.
void check_refused(const std::string& body, Endpoint ep, const std::string& param, int status = 400) {
  CAPTURE(body);
  try {
    parse_request(body, ep, limits());
    FAIL("accepted: ", body);
  } catch (const ApiError& e) {
    CHECK(e.status() == status);
    CHECK(e.param() == param);
    CHECK(e.type() == "invalid_request_error");
    const Json j = Json::parse(error_body(e));
    CHECK(j["error"]["message"].as_string() == e.what());
    CHECK(j["error"]["code"].as_int() == status);
  }
}

}  // namespace

TEST_CASE("a chat request with every field maps onto GenerateParams") {
  const ApiRequest r = chat(R"({"model": "stories260K.gguf", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]},
      {"role": "assistant", "content": null}, {"role": "developer", "content": "x"}],
    "max_tokens": 32, "temperature": 0.5, "top_p": 0.9, "top_k": 20, "min_p": 0.1, "seed": 42,
    "stop": ["\n", ""], "stream": true, "stream_options": {"include_usage": true}, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repeat_penalty": 1.1, "repeat_last_n": 32, "n": 1, "n_probs": 3,
    "cache_prompt": false, "deadline_ms": 1500, "ignore_eos": true, "user": "ignored"})");
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "Hi there");
  CHECK(r.messages[2].content.empty());
  CHECK(r.messages[3].role == "system");
  CHECK(r.gp.max_tokens == 32);
  CHECK(r.gp.sampler.temperature == 0.5f);
  CHECK(r.gp.sampler.top_p == 0.9f);
  CHECK(r.gp.sampler.top_k == 20);
  CHECK(r.gp.sampler.min_p == doctest::Approx(0.1));
  CHECK(r.gp.sampler.seed == 42);
  CHECK(r.gp.sampler.presence_penalty == 0.5f);
  CHECK(r.gp.sampler.frequency_penalty == -0.5f);
  CHECK(r.gp.sampler.repeat_penalty == doctest::Approx(1.1));
  CHECK(r.gp.sampler.penalty_last_n == 32);
  CHECK(r.gp.stop == std::vector<std::string>{"\n"});
  CHECK(r.stream);
  CHECK(r.include_usage);
  CHECK(r.n_probs == 3);
  CHECK_FALSE(r.cache_prompt);
  CHECK(r.gp.deadline_ms == 1500);
  CHECK(r.gp.ignore_eos);
  CHECK(prompt_text(r, ChatTemplate::builtin("chatml")).find("<|im_start|>user\nHi there<|im_end|>") != std::string::npos);
}

TEST_CASE("defaults: llama-server's sampler, no token limit, no streaming, the prompt cached") {
  const ApiRequest r = completion(R"({"prompt": "Once upon a time"})");
  CHECK(r.prompt == "Once upon a time");
  CHECK(prompt_text(r, ChatTemplate::builtin("chatml")) == "Once upon a time");
  CHECK(r.gp.max_tokens == -1);
  CHECK(r.gp.sampler.temperature == SamplerParams().temperature);
  CHECK(r.gp.sampler.top_k == SamplerParams().top_k);
  CHECK_FALSE(r.stream);
  CHECK(r.cache_prompt);
  CHECK(r.n_probs == 0);
  CHECK(completion(R"({"prompt": ["one string"], "stop": "x", "model": null})").gp.stop == std::vector<std::string>{"x"});
}

TEST_CASE("malformed bodies, wrong types and out-of-range values are 400 naming the parameter") {
  const Endpoint C = Endpoint::Chat, P = Endpoint::Completion;
  check_refused("", C, "");
  check_refused("{", C, "");
  check_refused("[1]", C, "");
  check_refused("{\"messages\": []}", C, "messages");
  check_refused("{}", C, "messages");
  check_refused("{\"messages\": [{\"content\": \"hi\"}]}", C, "messages");
  check_refused("{\"messages\": [{\"role\": \"wizard\", \"content\": \"hi\"}]}", C, "messages");
  check_refused("{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", C, "messages");
  check_refused("{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}", C, "messages");
  check_refused("{\"messages\": [\"hi\"]}", C, "messages");
  check_refused("{}", P, "prompt");
  check_refused("{\"prompt\": 5}", P, "prompt");
  check_refused("{\"prompt\": \"\"}", P, "prompt");
  check_refused("{\"prompt\": [1, 2]}", P, "prompt");
  check_refused("{\"prompt\": \"x\", \"tools\": [{\"type\": \"function\"}]}", P, "tools");
  check_refused("{\"prompt\": \"x\", \"tool_choice\": \"required\"}", P, "tool_choice");
  check_refused("{\"prompt\": \"x\", \"response_format\": {\"type\": \"yaml\"}}", P, "response_format");
  check_refused("{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\"}}", P, "response_format");
  check_refused("{\"prompt\": \"x\", \"json_schema\": {\"type\": \"object\", \"patternProperties\": {}}}", P, "json_schema");
  check_refused("{\"prompt\": \"x\", \"grammar\": 5}", P, "grammar");
  check_refused("{\"prompt\": \"x\", \"grammar\": \"root ::= [a]\", \"json_schema\": {}}", P, "grammar");
  check_refused("{\"prompt\": \"x\", \"response_format\": \"text\"}", P, "response_format");
  check_refused("{\"prompt\": \"x\", \"logit_bias\": {\"abc\": 1}}", P, "logit_bias");
  check_refused("{\"prompt\": \"x\", \"logit_bias\": {\"1\": 101}}", P, "logit_bias");
  check_refused("{\"prompt\": \"x\", \"logit_bias\": [1]}", P, "logit_bias");
  check_refused("{\"prompt\": \"x\", \"model\": 5}", P, "model");
  check_refused("{\"prompt\": \"x\", \"max_tokens\": 256}", P, "max_tokens");  // beyond the context
  check_refused("{\"prompt\": \"x\", \"max_tokens\": -2}", P, "max_tokens");
  check_refused("{\"prompt\": \"x\", \"max_tokens\": 1.5}", P, "max_tokens");
  check_refused("{\"prompt\": \"x\", \"max_tokens\": \"10\"}", P, "max_tokens");
  check_refused("{\"prompt\": \"x\", \"max_completion_tokens\": 1e9}", P, "max_completion_tokens");
  check_refused("{\"prompt\": \"x\", \"temperature\": -0.1}", P, "temperature");
  check_refused("{\"prompt\": \"x\", \"temperature\": \"hot\"}", P, "temperature");
  check_refused("{\"prompt\": \"x\", \"top_p\": 1.5}", P, "top_p");
  check_refused("{\"prompt\": \"x\", \"min_p\": -1}", P, "min_p");
  check_refused("{\"prompt\": \"x\", \"top_k\": -1}", P, "top_k");
  check_refused("{\"prompt\": \"x\", \"seed\": -5}", P, "seed");
  check_refused("{\"prompt\": \"x\", \"presence_penalty\": 3}", P, "presence_penalty");
  check_refused("{\"prompt\": \"x\", \"repeat_penalty\": 0}", P, "repeat_penalty");
  check_refused("{\"prompt\": \"x\", \"stop\": 5}", P, "stop");
  check_refused("{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", P, "stop");
  check_refused("{\"prompt\": \"x\", \"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}", P, "stop");
  check_refused("{\"prompt\": \"x\", \"stream\": \"yes\"}", P, "stream");
  check_refused("{\"prompt\": \"x\", \"stream_options\": 1}", P, "stream_options");
  check_refused("{\"prompt\": \"x\", \"n\": 2}", P, "n");
  check_refused("{\"prompt\": \"x\", \"n_probs\": 100}", P, "n_probs");
  check_refused("{\"prompt\": \"x\", \"deadline_ms\": -1}", P, "deadline_ms");
  check_refused("{\"prompt\": \"x\", \"cache_prompt\": 1}", P, "cache_prompt");
  // Nesting beyond the parser's depth limit is a 400, not a stack overflow.
  check_refused(std::string(100000, '[') + std::string(100000, ']'), P, "");
}

TEST_CASE("check_fits: the prompt and max_tokens together must fit the context") {
  ApiRequest r = completion(R"({"prompt": "x", "max_tokens": 100})");
  CHECK_NOTHROW(check_fits(r, 156, 256));
  CHECK_THROWS_AS(check_fits(r, 157, 256), ApiError);
  r.gp.max_tokens = -1;
  CHECK_NOTHROW(check_fits(r, 255, 256));
  try {
    check_fits(r, 256, 256);
    FAIL("a prompt filling the context was accepted");
  } catch (const ApiError& e) {
    CHECK(e.param() == "prompt");
  }
}

TEST_CASE("responses, stream chunks and errors have OpenAI's shapes") {
  const edgellm_test::Loaded& m = edgellm_test::synthetic();
  ApiRequest req = chat(R"({"messages": [{"role": "user", "content": "hi"}], "n_probs": 2})");
  ResponseId rid{"chatcmpl-7", 1700000000, "stories260K.gguf"};
  JobResult r;
  r.text = "Hello";
  r.tokens = {5, 6, 7};
  r.n_prompt = 10;
  r.n_cached = 4;
  r.reason = StopReason::Deadline;
  r.prefill_ms = 3;
  r.decode_ms = 2;
  r.token_ms = {1, 1};
  std::vector<TokenAlternatives> probs(1);
  probs[0].id = 5;
  probs[0].top = {{5, 0.75f}, {9, 0.25f}};
  const Json j = Json::parse(response_json(req, rid, r, probs, *m.tok).dump());
  CHECK(j["id"].as_string() == "chatcmpl-7");
  CHECK(j["object"].as_string() == "chat.completion");
  CHECK(j["created"].as_int() == 1700000000);
  CHECK(j["choices"].at(0)["message"]["role"].as_string() == "assistant");
  CHECK(j["choices"].at(0)["message"]["content"].as_string() == "Hello");
  CHECK(j["choices"].at(0)["finish_reason"].as_string() == "deadline");
  CHECK(j["usage"]["prompt_tokens"].as_int() == 10);
  CHECK(j["usage"]["completion_tokens"].as_int() == 3);
  CHECK(j["usage"]["total_tokens"].as_int() == 13);
  CHECK(j["timings"]["prompt_n"].as_int() == 6);
  CHECK(j["timings"]["cache_n"].as_int() == 4);
  CHECK(j["timings"]["predicted_n"].as_int() == 3);
  CHECK(j["timings"]["predicted_per_second"].as_number() == doctest::Approx(1000.0));
  CHECK(j["timings"]["predicted_token_ms_p50"].as_number() == doctest::Approx(1.0));
  CHECK(j["completion_probabilities"].at(0)["prob"].as_number() == doctest::Approx(0.75));
  CHECK(j["completion_probabilities"].at(0)["top_probs"].size() == 2);

  const Json first = Json::parse(chunk_json(req, rid, "He", {}, *m.tok, nullptr, true).dump());
  CHECK(first["object"].as_string() == "chat.completion.chunk");
  CHECK(first["choices"].at(0)["delta"]["role"].as_string() == "assistant");
  CHECK(first["choices"].at(0)["delta"]["content"].as_string() == "He");
  CHECK(first["choices"].at(0)["finish_reason"].is_null());
  req.include_usage = true;
  const Json last = Json::parse(chunk_json(req, rid, "", {}, *m.tok, &r).dump());
  CHECK(last["choices"].at(0)["delta"].size() == 0);
  CHECK(last["choices"].at(0)["finish_reason"].as_string() == "deadline");
  CHECK(last["usage"]["completion_tokens"].as_int() == 3);
  CHECK(sse_event(Json::object()) == "data: {}\n\n");

  const ApiRequest creq = completion(R"({"prompt": "x"})");
  r.reason = StopReason::MaxTokens;
  const Json c = Json::parse(response_json(creq, rid, r, {}, *m.tok).dump());
  CHECK(c["object"].as_string() == "text_completion");
  CHECK(c["choices"].at(0)["text"].as_string() == "Hello");
  CHECK(c["choices"].at(0)["finish_reason"].as_string() == "length");
  CHECK_FALSE(c.contains("completion_probabilities"));

  const Json e = Json::parse(error_body(401, "Invalid API Key", "authentication_error"));
  CHECK(e["error"]["code"].as_int() == 401);
  CHECK(e["error"]["type"].as_string() == "authentication_error");
  CHECK(e["error"]["param"].is_null());
}

TEST_CASE("openai api: any model name is served (as llama-server), --strict-model refuses others with 404") {
  CHECK(completion(R"({"prompt": "x", "model": "gpt-4o-mini"})").prompt == "x");
  ApiLimits strict = limits();
  strict.strict_model = true;
  CHECK(parse_request(R"({"prompt": "x", "model": "stories260K.gguf"})", Endpoint::Completion, strict).prompt == "x");
  try {
    parse_request(R"({"prompt": "x", "model": "gpt-4o-mini"})", Endpoint::Completion, strict);
    FAIL("accepted another model under strict_model");
  } catch (const ApiError& e) {
    CHECK(e.status() == 404);
    CHECK(e.param() == "model");
  }
}

TEST_CASE("openai api: logit_bias, tools and response_format") {
  const ApiRequest r = completion(R"({"prompt": "x", "logit_bias": {"5": -100, "7": 2.5}, "tools": [], "response_format": {"type": "text"}})");
  REQUIRE(r.gp.sampler.logit_bias.size() == 2);
  CHECK(r.gp.sampler.logit_bias[0] == std::make_pair(int32_t(5), -100.0f));
  CHECK(r.gp.sampler.logit_bias[1] == std::make_pair(int32_t(7), 2.5f));
  ApiLimits small = limits();
  small.n_vocab = 6;
  CHECK_THROWS_AS(parse_request(R"({"prompt": "x", "logit_bias": {"6": 1}})", Endpoint::Completion, small), ApiError);
}

TEST_CASE("openai api: a body's JSON is capped in members per object and values in all (413, found while parsing)") {
  // logit_bias is the one object a request may fill: 4096 members pass, 4097 are 413 at once.
  auto bias = [](int n) {
    std::string b = R"({"prompt": "x", "logit_bias": {)";
    for (int i = 0; i < n; ++i) b += (i ? ",\"" : "\"") + std::to_string(i) + "\": 1";
    return b + "}}";
  };
  ApiLimits lim = limits();
  CHECK(parse_request(bias(4096), Endpoint::Completion, lim).gp.sampler.logit_bias.size() == 4096);
  check_refused(bias(4097), Endpoint::Completion, "", 413);
  // 80k keys: refused at the 4097th, in far less time than the 200 ms the issue allows.
  const std::string big = bias(80000);
  const auto t0 = std::chrono::steady_clock::now();
  check_refused(big, Endpoint::Completion, "", 413);
  MESSAGE("an 80000-key logit_bias (", big.size(), " bytes) refused in ",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3, " ms");
  // Values in all: many small objects (400 messages: 1202 values) within the member cap.
  lim.max_json_values = 1000;
  std::string msgs = R"({"messages": [)";
  for (int i = 0; i < 400; ++i) msgs += std::string(i ? "," : "") + R"({"role": "user", "content": "hi"})";
  msgs += "]}";
  try {
    parse_request(msgs, Endpoint::Chat, lim);
    FAIL("accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 413);
    CHECK(std::string(e.what()).find("more than 1000 values") != std::string::npos);
  }
  lim.max_json_values = 1 << 17;
  CHECK(parse_request(msgs, Endpoint::Chat, lim).messages.size() == 400);
  // Duplicate keys stay 400 (malformed), not 413.
  check_refused(R"({"prompt": "x", "prompt": "y"})", Endpoint::Completion, "", 400);
}

TEST_CASE("openai api: chat messages keep tool calls, names and parts for the template, arguments as objects") {
  const ApiRequest r = chat(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "21"}],
      "chat_template_kwargs": {"enable_thinking": false}, "reasoning_format": "none"})");
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].content == "ab");
  CHECK(r.messages[0].extra["content"].size() == 2);
  const Json& args = r.messages[1].extra["tool_calls"].at(0)["function"]["arguments"];
  REQUIRE(args.is_object());
  CHECK(args["city"].as_string() == "Paris");
  CHECK(r.messages[2].extra["tool_call_id"].as_string() == "c1");
  CHECK(r.chat_kwargs["enable_thinking"].as_bool() == false);
  CHECK(r.has_reasoning_format);
  CHECK(r.reasoning == ReasoningFormat::None);
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 3})", Endpoint::Chat, "chat_template_kwargs");
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "reasoning_format": "loud"})", Endpoint::Chat, "reasoning_format");
  check_refused(R"({"messages": [{"role": "assistant", "tool_calls": 5}]})", Endpoint::Chat, "messages");
}

TEST_CASE("openai api: /apply-template requests render messages and tools with the template") {
  const ApiRequest r = parse_request(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
      "tools": [{"type": "function", "function": {"name": "f"}}], "chat_template_kwargs": {"x": 1}})",
                                     Endpoint::ApplyTemplate, limits());
  const ChatTemplate t = ChatTemplate::jinja(
      "{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}{{ tools|length }}{{ x }}{{ y }}"
      "{% if add_generation_prompt %}>{% endif %}", "<s>", "</s>");
  CHECK(prompt_text(r, t, Json::parse(R"({"x": 0, "y": 2})")) == "user=hi;112");
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", Endpoint::ApplyTemplate, "tools");
  check_refused(R"({"add_generation_prompt": true})", Endpoint::ApplyTemplate, "messages");
  // A tool without a function name is refused by chat completions too.
  check_refused(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", Endpoint::Chat, "tools");
}

TEST_CASE("openai api: thoughts go to reasoning_content, whole and streamed") {
  const edgellm_test::Loaded& m = edgellm_test::synthetic();
  ApiRequest req = chat(R"({"messages": [{"role": "user", "content": "hi"}]})");
  req.reasoning = ReasoningFormat::Deepseek;
  ResponseId rid{"chatcmpl-1", 1700000000, "m"};
  JobResult r;
  r.text = "<think>\nThe user greets.\n</think>\n\nHello!";
  r.reason = StopReason::EndOfGeneration;
  Json j = Json::parse(response_json(req, rid, r, {}, *m.tok).dump());
  CHECK(j["choices"].at(0)["message"]["content"].as_string() == "Hello!");
  CHECK(j["choices"].at(0)["message"]["reasoning_content"].as_string() == "The user greets.");
  req.reasoning = ReasoningFormat::DeepseekLegacy;
  j = Json::parse(response_json(req, rid, r, {}, *m.tok).dump());
  CHECK(j["choices"].at(0)["message"]["content"].as_string() == r.text);
  CHECK(j["choices"].at(0)["message"]["reasoning_content"].as_string() == "The user greets.");
  req.reasoning = ReasoningFormat::None;
  j = Json::parse(response_json(req, rid, r, {}, *m.tok).dump());
  CHECK(j["choices"].at(0)["message"]["content"].as_string() == r.text);
  CHECK_FALSE(j["choices"].at(0)["message"].contains("reasoning_content"));

  // Streamed token by token (pieces cut inside the tags): the deltas add up to the same split,
  // and no delta carries a tag.
  req.reasoning = ReasoningFormat::Deepseek;
  const std::vector<std::string> pieces = {"<th", "ink>", "\nThe ", "user greets.\n</", "think>", "\n\n", "Hel", "lo!"};
  StreamEvents ev(req, rid, *m.tok);
  std::string events;
  for (const auto& p : pieces) events += ev.piece(p);
  events += ev.finish(r);
  std::string reasoning, content;
  size_t n_events = 0;
  for (size_t b = 0; (b = events.find("data: ", b)) != std::string::npos; ++n_events) {
    const size_t e = events.find("\n\n", b);
    const Json chunk = Json::parse(events.substr(b + 6, e - b - 6));
    const Json& delta = chunk["choices"].at(0)["delta"];
    if (n_events == 0) CHECK(delta["role"].as_string() == "assistant");
    if (const Json* x = delta.find("reasoning_content")) reasoning += x->as_string();
    if (const Json* x = delta.find("content")) content += x->as_string();
    b = e;
  }
  CHECK(reasoning == "The user greets.");
  CHECK(content == "Hello!");
  CHECK(events.find("think>") == std::string::npos);
  // A template that opened <think> in the prompt: the answer starts inside the thoughts.
  req.thinking_open = true;
  r.text = "Hmm.</think>Hi";
  j = Json::parse(response_json(req, rid, r, {}, *m.tok).dump());
  CHECK(j["choices"].at(0)["message"]["reasoning_content"].as_string() == "Hmm.");
  CHECK(j["choices"].at(0)["message"]["content"].as_string() == "Hi");
}

TEST_CASE("session: keep_common_prefix keeps what a re-rendered conversation repeats") {
  const edgellm_test::Loaded& m = edgellm_test::synthetic();
  SessionParams sp;
  sp.n_ctx = 128;
  Session s(m.model, m.tok, sp);
  GenerateParams gp;
  gp.max_tokens = 4;
  gp.sampler.temperature = 0;
  const std::vector<int32_t> turn1 = {1, 10, 11, 12, 13};
  CHECK(s.keep_common_prefix(turn1) == turn1);  // nothing held yet
  const GenerateResult r1 = s.generate(turn1, gp);
  const std::vector<int32_t> held = s.history();
  REQUIRE(held.size() >= turn1.size());
  // The next turn repeats everything held: only its new tokens are read.
  std::vector<int32_t> turn2 = held;
  turn2.insert(turn2.end(), {20, 21});
  CHECK(s.keep_common_prefix(turn2) == std::vector<int32_t>{20, 21});
  CHECK(s.history() == held);
  // An edited conversation: the history is cut where it differs.
  std::vector<int32_t> edited = {1, 10, 99};
  CHECK(s.keep_common_prefix(edited) == std::vector<int32_t>{99});
  CHECK(s.history() == std::vector<int32_t>{1, 10});
  CHECK(s.n_past() == 2);
  // The same tokens again: the last is read again, for its logits.
  CHECK(s.keep_common_prefix({1, 10}) == std::vector<int32_t>{10});
  CHECK(s.history() == std::vector<int32_t>{1});
  const GenerateResult r2 = s.generate(std::vector<int32_t>{10, 11, 12, 13}, gp);
  CHECK(r2.tokens == r1.tokens);  // the same continuation as reading the whole prompt
}
