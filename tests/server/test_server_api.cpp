// The server's operator functions (examples/server/operator_api.hpp) tested without a server: the
// API key from a file or the environment, /tokenize and /detokenize as llama-server shapes them,
// the Prometheus text of /metrics, the request log line; /v1/embeddings and /embedding requests
// and answers (embeddings_api.hpp). The synthetic model's tokenizer (no
// shared data).
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "embeddings_api.hpp"  // examples/server/
#include "operator_api.hpp"
#include "session_fixtures.hpp"

using edgellm::Error;
using edgellm::Json;
namespace ops = edgellm::ops;

namespace {

std::string temp_file(const std::string& name, const std::string& content) {
  const std::string path = std::string(EDGELLM_BINARY_DIR) + "/test_server_api_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

int refusal_status(const std::function<void()>& f) {
  try {
    f();
  } catch (const edgellm::openai::ApiError& e) {
    return e.status();
  }
  return 0;
}

}  // namespace

TEST_CASE("server api: the API key from --api-key, --api-key-file or EDGELLM_API_KEY") {
  CHECK(ops::read_api_key_file(temp_file("key1", "  s3cret-key-1 \n")) == "s3cret-key-1");
  CHECK(ops::read_api_key_file(temp_file("key2", "\n\ns3cret-key-2\r\n\n")) == "s3cret-key-2");
  CHECK_THROWS_WITH_AS(ops::read_api_key_file(temp_file("key3", "\n \n")), doctest::Contains("holds no key"), Error);
  CHECK_THROWS_WITH_AS(ops::read_api_key_file(temp_file("key4", "aaaaaaaa\nbbbbbbbb\n")), doctest::Contains("more than one line"), Error);
  CHECK_THROWS_WITH_AS(ops::read_api_key_file(std::string(EDGELLM_BINARY_DIR) + "/no/such/key"), doctest::Contains("cannot read"), Error);
  const std::string file = temp_file("key5", "from-the-file\n");
  CHECK(ops::choose_api_key("", "", nullptr).empty());
  CHECK(ops::choose_api_key("", "", "").empty());
  CHECK(ops::choose_api_key("", "", "from-the-env") == "from-the-env");
  CHECK(ops::choose_api_key("", file, "from-the-env") == "from-the-file");
  CHECK(ops::choose_api_key("from-the-flag", "", "from-the-env") == "from-the-flag");
  CHECK_THROWS_WITH_AS(ops::choose_api_key("from-the-flag", file, nullptr), doctest::Contains("one of --api-key and --api-key-file"), Error);
  CHECK_THROWS_WITH_AS(ops::choose_api_key("", "", "short"), doctest::Contains("EDGELLM_API_KEY: use at least 8"), Error);
  CHECK_THROWS_WITH_AS(ops::choose_api_key("", temp_file("key6", "short\n"), nullptr), doctest::Contains("--api-key-file: use at least 8"), Error);
}

TEST_CASE("server api: /tokenize and /detokenize as llama-server") {
  const auto& m = edgellm_test::synthetic();
  const edgellm::Tokenizer& tok = *m.tok;
  const edgellm::openai::ApiLimits lim;
  const std::string text = "Once upon a time";
  const Json t = ops::tokenize(R"({"content": "Once upon a time"})", tok, lim);
  const std::vector<int32_t> ids = tok.encode(text, false, true);
  REQUIRE(t["tokens"].size() == ids.size());
  for (size_t i = 0; i < ids.size(); ++i) CHECK(t["tokens"].at(i).as_int() == ids[i]);
  // add_special: BOS when the vocabulary adds one.
  const Json b = ops::tokenize(R"({"content": "Once", "add_special": true})", tok, lim);
  CHECK(b["tokens"].size() == tok.encode("Once", tok.add_bos(), true).size());
  // with_pieces: each id with its text (bytes when not valid UTF-8 alone); the pieces join to the text.
  const Json p = ops::tokenize(R"({"content": "Once upon a time", "with_pieces": true})", tok, lim);
  std::string joined;
  for (const Json& e : p["tokens"].as_array()) {
    CHECK(e["id"].is_int());
    if (e["piece"].is_string()) {
      joined += e["piece"].as_string();
    } else {  // not valid UTF-8 alone (a byte token): its bytes
      for (const Json& byte : e["piece"].as_array()) joined += static_cast<char>(byte.as_int());
    }
  }
  CHECK(joined == tok.decode(ids));
  // detokenize(tokenize(x)) == x; control tokens' text included.
  std::string body = "{\"tokens\": [";
  for (size_t i = 0; i < ids.size(); ++i) body += (i ? "," : "") + std::to_string(ids[i]);
  CHECK(ops::detokenize(body + "]}", tok, lim)["content"].as_string() == tok.decode(ids));
  CHECK(ops::detokenize(R"({"tokens": []})", tok, lim)["content"].as_string().empty());
  CHECK(ops::detokenize(R"({})", tok, lim)["content"].as_string().empty());
  // Refusals: 400 for wrong shapes, 413 past the JSON caps.
  CHECK(refusal_status([&] { ops::tokenize(R"({})", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::tokenize(R"({"content": 5})", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::tokenize(R"({"content": "x", "with_pieces": "yes"})", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::tokenize(R"(["x"])", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::tokenize("{", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::detokenize(R"({"tokens": [-1]})", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::detokenize("{\"tokens\": [" + std::to_string(tok.n_vocab()) + "]}", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::detokenize(R"({"tokens": [1.5]})", tok, lim); }) == 400);
  CHECK(refusal_status([&] { ops::detokenize(R"({"tokens": "1 2"})", tok, lim); }) == 400);
  edgellm::openai::ApiLimits small;
  small.max_json_values = 10;
  CHECK(refusal_status([&] { ops::detokenize(R"({"tokens": [1,2,3,4,5,6,7,8,9,10]})", tok, small); }) == 413);
}

TEST_CASE("server api: Prometheus text and the request log line") {
  const std::string t = ops::prometheus_text({{"requests_total", "counter", "Requests", 3}, {"kv_blocks_used", "gauge", "Blocks", 0.5}});
  CHECK(t == "# HELP edgellm_requests_total Requests\n# TYPE edgellm_requests_total counter\nedgellm_requests_total 3\n"
             "# HELP edgellm_kv_blocks_used Blocks\n# TYPE edgellm_kv_blocks_used gauge\nedgellm_kv_blocks_used 0.5\n");
  ops::RequestLog r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.remote = "127.0.0.1";
  r.status = 200;
  r.ms = 12.345;
  r.prompt_tokens = 7;
  r.completion_tokens = 9;
  CHECK(ops::log_line(r, false) == "request POST /v1/chat/completions 200 12.3 ms prompt_tokens=7 completion_tokens=9 remote=127.0.0.1\n");
  const Json j = Json::parse(ops::log_line(r, true));
  CHECK(j["event"].as_string() == "request");
  CHECK(j["method"].as_string() == "POST");
  CHECK(j["status"].as_int() == 200);
  CHECK(j["duration_ms"].as_number() == doctest::Approx(12.3));
  CHECK(j["prompt_tokens"].as_int() == 7);
  CHECK(j["completion_tokens"].as_int() == 9);
  ops::RequestLog refused;  // a transport refusal: no method or path
  refused.status = 431;
  CHECK(ops::log_line(refused, false) == "request - - 431 0.0 ms remote=-\n");
  const Json rj = Json::parse(ops::log_line(refused, true));
  CHECK(rj["method"].as_string() == "-");
  CHECK(rj["status"].as_int() == 431);
  CHECK_FALSE(rj.contains("prompt_tokens"));
}

TEST_CASE("server api: POST /slots/{id}?action= requests, file names that cannot leave the folder") {
  const edgellm::openai::ApiLimits lim;
  const ops::SlotRequest r = ops::parse_slot_request("/slots/3", "action=save", R"({"filename": "chat-1.state"})", lim);
  CHECK(r.id == 3);
  CHECK(r.action == "save");
  CHECK(r.filename == "chat-1.state");
  CHECK(ops::parse_slot_request("/slots/0", "x=1&action=erase", "", lim).action == "erase");  // erase: no body
  for (const char* bad : {"../a", "a/b", ".hidden", "", "a b", "..", "/etc/passwd", "a\\b"}) {
    CAPTURE(bad);
    const std::string body = Json(std::string(bad)).dump();
    CHECK_THROWS_WITH_AS(ops::parse_slot_request("/slots/0", "action=restore", "{\"filename\": " + body + "}", lim),
                         doctest::Contains("'filename' must be a plain file name"), edgellm::openai::ApiError);
  }
  CHECK_THROWS_WITH_AS(ops::parse_slot_request("/slots/0", "action=save", "{}", lim), doctest::Contains("'filename' is required"),
                       edgellm::openai::ApiError);
  CHECK_THROWS_WITH_AS(ops::parse_slot_request("/slots/0", "action=drop", "{}", lim), doctest::Contains("save, restore or erase"),
                       edgellm::openai::ApiError);
  for (const char* path : {"/slots/", "/slots/x", "/slots/-1", "/slots/1234567", "/slot/1"}) {
    CAPTURE(path);
    try {
      ops::parse_slot_request(path, "action=erase", "", lim);
      FAIL("accepted");
    } catch (const edgellm::openai::ApiError& e) {
      CHECK(e.status() == 404);
    }
  }
}

namespace {

edgellm::openai::EmbedRequest embed_request(const std::string& body, bool embedding_path = false) {
  edgellm::openai::ApiLimits lim;
  lim.model_id = "m";
  edgellm::openai::EmbedLimits el;
  el.n_ctx = 16;
  el.n_vocab = 512;
  el.max_inputs = 4;
  return edgellm::openai::parse_embedding_request(body, embedding_path, *edgellm_test::synthetic().tok, lim, el);
}

std::string embed_refusal_param(const std::string& body) {
  try {
    embed_request(body);
  } catch (const edgellm::openai::ApiError& e) {
    return std::to_string(e.status()) + " " + e.param();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("server api: embedding requests (input shapes, encoding_format, embd_normalize, refusals)") {
  const edgellm::Tokenizer& tok = *edgellm_test::synthetic().tok;
  const std::vector<int32_t> once = tok.encode("Once upon", true, true);
  auto r = embed_request(R"({"input": "Once upon", "model": "x"})");
  CHECK(r.oai);
  CHECK_FALSE(r.base64);
  CHECK(r.normalize);
  CHECK(r.model == "x");
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0] == once);
  r = embed_request(R"({"input": ["Once upon", [5, 6, 7]], "encoding_format": "base64", "embd_normalize": -1})");
  REQUIRE(r.inputs.size() == 2);
  CHECK(r.inputs[0] == once);
  CHECK(r.inputs[1] == std::vector<int32_t>{5, 6, 7});
  CHECK(r.base64);
  CHECK_FALSE(r.normalize);
  r = embed_request(R"({"input": [9, 10]})");
  REQUIRE(r.inputs.size() == 1);
  CHECK(r.inputs[0] == std::vector<int32_t>{9, 10});
  CHECK_FALSE(embed_request(R"({"content": "x"})").oai);  // llama-server's field: its shape on either path
  CHECK_FALSE(embed_request(R"({"input": "x"})", true).oai);
  CHECK(embed_refusal_param(R"({})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": null})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": []})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": [[]]})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": true})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": [1, 512]})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": [-1]})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": [1.5]})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": ["a", ["b"]]})") == "400 input");
  CHECK(embed_refusal_param(R"({"input": ["a", "b", "c", "d", "e"]})") == "400 input");  // max_inputs 4
  CHECK(embed_refusal_param(R"({"input": [[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]]})") == "400 input");  // n_ctx 16
  CHECK(embed_refusal_param(R"({"input": "x", "encoding_format": "int8"})") == "400 encoding_format");
  CHECK(embed_refusal_param(R"({"input": "x", "encoding_format": 1})") == "400 encoding_format");
  CHECK(embed_refusal_param(R"({"input": "x", "embd_normalize": 0})") == "400 embd_normalize");
  CHECK(embed_refusal_param(R"({"input": "x", "model": 5})") == "400 model");
  CHECK(embed_refusal_param(R"([1])") == "400 ");
  CHECK(embed_refusal_param(R"({"input": )") == "400 ");
}

TEST_CASE("server api: embedding answers (OpenAI list, base64 floats, llama-server rows)") {
  CHECK(edgellm::openai::base64_encode(reinterpret_cast<const uint8_t*>("Ma"), 2) == "TWE=");
  CHECK(edgellm::openai::base64_encode(reinterpret_cast<const uint8_t*>("Man"), 3) == "TWFu");
  CHECK(edgellm::openai::base64_encode(reinterpret_cast<const uint8_t*>("M"), 1) == "TQ==");
  const float one[] = {1.0f, -2.0f};
  CHECK(edgellm::openai::base64_floats(one, 2) == "AACAPwAAAMA=");  // 0x3f800000, 0xc0000000 little-endian
  std::vector<edgellm::Embedding> e(2);
  e[0].data = {0.5f, 0.25f};
  e[0].n_rows = 1;
  e[0].n_tokens = 3;
  e[1].data = {1.0f, 0.0f};
  e[1].n_rows = 1;
  e[1].n_tokens = 4;
  edgellm::openai::EmbedRequest r;
  Json j = edgellm::openai::embeddings_json(r, e, 2, "served");
  CHECK(j["object"].as_string() == "list");
  CHECK(j["model"].as_string() == "served");
  CHECK(j["usage"]["prompt_tokens"].as_int() == 7);
  CHECK(j["usage"]["total_tokens"].as_int() == 7);
  REQUIRE(j["data"].size() == 2);
  CHECK(j["data"].at(1)["index"].as_int() == 1);
  CHECK(j["data"].at(1)["object"].as_string() == "embedding");
  CHECK(j["data"].at(0)["embedding"].as_float_vector() == std::vector<float>{0.5f, 0.25f});
  r.base64 = true;
  j = edgellm::openai::embeddings_json(r, e, 2, "served");
  CHECK(j["data"].at(1)["embedding"].as_string() == "AACAPwAAAAA=");
  r.oai = false;
  e[1].data = {1.0f, 0.0f, 0.0f, 1.0f};  // pooling none: one row per token
  e[1].n_rows = 2;
  j = edgellm::openai::embeddings_json(r, e, 2, "served");
  REQUIRE(j.is_array());
  CHECK(j.at(1)["index"].as_int() == 1);
  REQUIRE(j.at(1)["embedding"].size() == 2);
  CHECK(j.at(1)["embedding"].at(1).as_float_vector() == std::vector<float>{0.0f, 1.0f});
}
