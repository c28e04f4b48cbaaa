// The project's HTTP/1.1 client (examples/server/http_client.hpp) and the server's transport
// (http_server.hpp) together, in-process: URLs, response framing, and a Server on a loopback port
// answering light, heavy and streamed requests and refusing bad ones. No model, no shared data.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>

#include "http_client.hpp"  // examples/server/
#include "http_server.hpp"

using edgellm::Error;
namespace http = edgellm::http;

TEST_CASE("http client: URLs") {
  const http::Url a = http::parse_url("http://127.0.0.1:8080");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == "8080");
  CHECK(a.prefix.empty());
  const http::Url b = http::parse_url("http://example.com/api/");
  CHECK(b.host == "example.com");
  CHECK(b.port == "80");
  CHECK(b.prefix == "/api");
  const http::Url c = http::parse_url("http://[::1]:9000");
  CHECK(c.host == "::1");
  CHECK(c.port == "9000");
  for (const char* bad : {"https://a", "a:80", "http://", "http://a:", "http://a:x", "http://a:123456", "http://[::1", "http://[::1]x"})
    CHECK_THROWS_AS(http::parse_url(bad), Error);
}

TEST_CASE("http client: response framing") {
  http::Response r;
  CHECK_FALSE(http::parse_response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", false, false, r));
  REQUIRE(http::parse_response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde", false, false, r));
  CHECK(r.status == 200);
  CHECK(r.body == "abcde");
  CHECK(*r.header("content-length") == "5");
  const std::string ch = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
  for (size_t n = 0; n < ch.size(); ++n) CHECK_FALSE(http::parse_response(ch.substr(0, n), false, false, r));
  REQUIRE(http::parse_response(ch, false, false, r));
  CHECK(r.body == "abcde");
  CHECK_FALSE(http::parse_response("HTTP/1.0 200 OK\r\n\r\nuntil close", false, false, r));
  REQUIRE(http::parse_response("HTTP/1.0 200 OK\r\n\r\nuntil close", true, false, r));
  CHECK(r.body == "until close");
  REQUIRE(http::parse_response("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", false, false, r));
  CHECK(r.status == 204);
  REQUIRE(http::parse_response("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", false, true, r));  // HEAD
  CHECK(r.body.empty());
  CHECK_THROWS_WITH_AS(http::parse_response("", true, false, r), doctest::Contains("without an answer"), Error);
  CHECK_THROWS_WITH_AS(http::parse_response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", true, false, r), doctest::Contains("truncated"), Error);
  CHECK_THROWS_AS(http::parse_response("SSH-2.0-OpenSSH\r\n\r\n", false, false, r), Error);
  CHECK_THROWS_AS(http::parse_response("HTTP/1.1 2x0 OK\r\n\r\n", false, false, r), Error);
  CHECK_THROWS_AS(http::parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false, false, r), Error);
  CHECK_THROWS_AS(http::parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", false, false, r), Error);
}

TEST_CASE("http server and client in-process: light, heavy and streamed answers, refusals") {
  http::Limits lim;
  lim.max_body = 1000;
  lim.head_timeout_s = 2;
  auto owned = std::make_unique<http::Server>(
      lim,
      [](const http::Request& req, http::Reply& rep) {
        if (req.path == "/echo") return rep.send(200, "text/plain", req.method + " " + req.body);
        if (req.path == "/stream") {
          if (!rep.begin_stream(200, "text/event-stream")) return;
          for (int i = 0; i < 3; ++i)
            if (!rep.chunk("data: " + std::to_string(i) + "\n\n")) return;
          return rep.end_stream();
        }
        if (req.path == "/throw") throw Error("handler failed");
        rep.send(404, "text/plain", "no " + req.path);
      },
      [](const http::Request& req) { return req.path == "/stream" || req.method == "POST"; },
      [](int status, const std::string& message) { return std::make_pair(std::string("text/plain"), std::to_string(status) + " " + message); });
  http::Server& server = *owned;
  const int port = server.bind("127.0.0.1", 0);
  std::thread loop([&] { server.run(); });
  const http::Client client("http://127.0.0.1:" + std::to_string(port), 10);

  http::Response r = client.request("GET", "/echo");
  CHECK(r.status == 200);
  CHECK(r.body == "GET ");
  const std::string body = "hello, server";
  r = client.request("POST", "/echo", &body);  // heavy: a thread of its own
  CHECK(r.status == 200);
  CHECK(r.body == "POST hello, server");
  r = client.request("GET", "/stream");
  CHECK(r.status == 200);
  CHECK(*r.header("transfer-encoding") == "chunked");
  CHECK(r.body == "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  CHECK(client.request("GET", "/nope").status == 404);
  r = client.request("GET", "/throw");
  CHECK(r.status == 500);
  CHECK(r.body.find("handler failed") != std::string::npos);
  r = client.request("HEAD", "/echo");
  CHECK(r.status == 200);
  CHECK(r.body.empty());
  // Transport refusals, before any handler.
  const std::string big(1001, 'x');
  r = client.request("POST", "/echo", &big);
  CHECK(r.status == 413);
  CHECK(r.body.find("larger than the limit") != std::string::npos);
  CHECK(client.request("GET", "/echo", nullptr, {{"Host", "second.example"}}).status == 400);
  CHECK(client.request("GET", "/echo", nullptr, {{"X-A", std::string("a\x01" "b")}}).status == 400);
  CHECK(client.request("POST", "/echo", nullptr, {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "gzip"}}).status == 400);
  // Nothing listening (the Server gone closes its socket): an Error naming the URL.
  server.stop();
  loop.join();
  owned.reset();
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  CHECK_THROWS_WITH_AS(client.request("GET", "/echo"), doctest::Contains(url.c_str()), Error);
}
