// The server's HTTP/1.1 request parser (examples/server/http_server.hpp, RequestParser) tested as
// a library: every refusal and limit, with its status; the same result whatever way the bytes are
// split across reads; linear cost for chunked bodies. No model, no socket, no shared data.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "http_server.hpp"  // examples/server/

using edgellm::http::Limits;
using edgellm::http::Request;
using edgellm::http::RequestParser;
using State = RequestParser::State;
using namespace std::string_literals;

namespace {

// What one request came to: a refusal (status, message) or the request's parts.
struct Outcome {
  State state = State::Head;
  int status = 0;
  std::string message, method, target, path, query, body;
  int minor = -1;
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = false, expect_continue = false;
  size_t left = 0;  // input bytes not consumed (a pipelined next request)
  bool operator==(const Outcome& o) const {
    return state == o.state && status == o.status && message == o.message && method == o.method && target == o.target &&
           path == o.path && query == o.query && body == o.body && minor == o.minor && headers == o.headers &&
           keep_alive == o.keep_alive && expect_continue == o.expect_continue && left == o.left;
  }
};

// Feeds `wire` in pieces of `piece` bytes (0: whole) until the request is done or refused.
Outcome parse(const std::string& wire, const Limits& lim = Limits(), size_t piece = 0) {
  RequestParser p(lim);
  std::string in;
  size_t at = 0;
  State st = State::Head;
  do {
    const size_t n = piece ? std::min(piece, wire.size() - at) : wire.size() - at;
    in.append(wire, at, n);
    at += n;
    st = p.feed(in);
  } while (at < wire.size() && st != State::Done && st != State::Error);
  Outcome o;
  o.state = st;
  o.status = p.error_status();
  o.message = p.error_message();
  if (st == State::Done) {
    const Request& r = p.request();
    o.method = r.method, o.target = r.target, o.path = r.path, o.query = r.query, o.body = r.body, o.minor = r.minor;
    o.headers = r.headers;
    o.keep_alive = p.keep_alive();
    o.expect_continue = p.expects_continue();
    o.left = in.size() + (wire.size() - at);
  }
  return o;
}

// The status a request is refused with (0: accepted), the same fed whole, a byte at a time and in
// 7-byte pieces.
int refusal(const std::string& wire, const Limits& lim = Limits()) {
  const Outcome whole = parse(wire, lim);
  CHECK(parse(wire, lim, 1) == whole);
  CHECK(parse(wire, lim, 7) == whole);
  if (whole.state == State::Error) return whole.status;
  return whole.state == State::Done ? 0 : -1;  // -1: still waiting for input
}
std::string message(const std::string& wire, const Limits& lim = Limits()) { return parse(wire, lim).message; }

std::string chunked(const std::string& body, size_t chunk) {
  std::string w = "POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (size_t i = 0; i < body.size(); i += chunk) {
    const size_t n = std::min(chunk, body.size() - i);
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    w += size;
    w.append(body, i, n);
    w += "\r\n";
  }
  return w + "0\r\n\r\n";
}

const char* kGet = "GET /health HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

// CPU time of the calling thread, in seconds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("http parser: requests it accepts, whole or split at any byte") {
  const Outcome g = parse(kGet);
  REQUIRE(g.state == State::Done);
  CHECK(g.method == "GET");
  CHECK(g.path == "/health");
  CHECK(g.minor == 1);
  CHECK(g.keep_alive);
  CHECK(g.headers == std::vector<std::pair<std::string, std::string>>{{"host", "127.0.0.1:8080"}});
  for (size_t piece = 1; piece < 8; ++piece) CHECK(parse(kGet, Limits(), piece) == g);

  const std::string post = "POST /v1/completions?x=1 HTTP/1.1\r\nHOST: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
  const Outcome p = parse(post);
  REQUIRE(p.state == State::Done);
  CHECK(p.body == "hello");
  CHECK(p.query == "x=1");
  CHECK_FALSE(p.keep_alive);
  CHECK(refusal(post) == 0);

  // Leading empty lines, bare-LF line ends, a tab and obs-text in a value, HTTP/1.0 without Host.
  const Outcome lf = parse("\r\n\nGET / HTTP/1.1\nHost: a\nX-A:\tv\xC3\xA9 \n\n");
  REQUIRE(lf.state == State::Done);
  CHECK(lf.headers.back() == std::make_pair(std::string("x-a"), std::string("v\xC3\xA9")));
  const Outcome h10 = parse("GET / HTTP/1.0\r\n\r\n");
  REQUIRE(h10.state == State::Done);
  CHECK(h10.minor == 0);
  CHECK_FALSE(h10.keep_alive);
  CHECK(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);

  // Chunked, with an extension and a trailer; pipelined bytes after it are left in the input.
  const std::string c = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n";
  const Outcome ch = parse(c + kGet);
  REQUIRE(ch.state == State::Done);
  CHECK(ch.body == "abcde");
  CHECK(ch.left == std::string(kGet).size());
  CHECK(refusal(c) == 0);

  // Expect: 100-continue only when a body follows.
  CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nx").expect_continue);
  CHECK_FALSE(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n").expect_continue);
  // Incomplete: waiting, not refused.
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\n") == -1);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc") == -1);
}

TEST_CASE("http parser: the request line and target") {
  CHECK(refusal("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03") == 400);  // a TLS hello: at once
  CHECK(message("\x16\x03\x01").find("not an HTTP request") != std::string::npos);
  CHECK(refusal("GET\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal("GET /\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal(" GET / HTTP/1.1\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal("G(T / HTTP/1.1\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/2.0\r\nHost: a\r\n\r\n") == 505);
  CHECK(refusal("GET / HTTP/1.1x\r\nHost: a\r\n\r\n") == 505);
  CHECK(refusal("GET / FTP/1.1\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal("GET  HTTP/1.1\r\nHost: a\r\n\r\n") == 400);      // empty target
  CHECK(refusal("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n") == 400);  // a space in the target
  // Control bytes in the target or the line: NUL, bare CR, other C0, DEL.
  for (char ctl : {'\0', '\r', '\x01', '\x1f', '\x7f', '\t'}) {
    std::string w = "GET /a";
    w += ctl;
    w += "b HTTP/1.1\r\nHost: a\r\n\r\n";
    CAPTURE(static_cast<int>(ctl));
    CHECK(refusal(w) == 400);
  }
  CHECK(message("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n"s).find("control character") != std::string::npos);
}

TEST_CASE("http parser: header fields") {
  CHECK(refusal("GET / HTTP/1.1\r\n\r\n") == 400);  // 1.1 without Host
  CHECK(message("GET / HTTP/1.1\r\n\r\n").find("without Host") != std::string::npos);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400);
  CHECK(message("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n").find("more than one Host") != std::string::npos);
  CHECK(refusal("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\n: empty name\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nBad Name: v\r\n\r\n") == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nX(y): v\r\n\r\n") == 400);
  // NUL, bare CR, other controls and DEL in a value (RFC 9110 section 5.5); HTAB is allowed.
  for (char ctl : {'\0', '\r', '\x01', '\x0b', '\x1b', '\x7f'}) {
    std::string w = "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1";
    w += ctl;
    w += "2\r\n\r\n";
    CAPTURE(static_cast<int>(ctl));
    CHECK(refusal(w) == 400);
    CHECK(message(w).find("control character") != std::string::npos);
  }
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n"s) == 400);
  CHECK(refusal("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\t2\r\n\r\n") == 0);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: gzip\r\nContent-Length: 1\r\n\r\nx") == 415);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Encoding: identity\r\nContent-Length: 1\r\n\r\nx") == 0);
}

TEST_CASE("http parser: body framing (Content-Length, Transfer-Encoding)") {
  Limits lim;
  lim.max_body = 100;
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'), lim) == 0);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", lim) == 413);  // before any body byte
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1,1\r\n\r\nx") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx") == 400);
  // Smuggling: TE with CL, a second TE line of any value, TE in HTTP/1.0.
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400);
  CHECK(message("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\n")
            .find("more than one Transfer-Encoding") != std::string::npos);
  CHECK(refusal("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") == 400);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n") == 415);
  CHECK(refusal("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 415);
  // No length: no body; the rest is the next request.
  const Outcome nl = parse(std::string("POST / HTTP/1.1\r\nHost: a\r\n\r\n") + kGet);
  CHECK(nl.state == State::Done);
  CHECK(nl.body.empty());
  CHECK(nl.left == std::string(kGet).size());
}

TEST_CASE("http parser: chunked bodies") {
  const std::string h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  Limits lim;
  lim.max_body = 100;
  CHECK(refusal(h + "g\r\n", lim) == 400);                    // not hex
  CHECK(refusal(h + "\r\n", lim) == 400);                     // empty size
  CHECK(refusal(h + "-1\r\n", lim) == 400);
  CHECK(refusal(h + "1000000000000000\r\n", lim) == 400);     // 16 hex digits
  CHECK(refusal(h + "65\r\n", lim) == 413);                   // 101 > 100, before the data
  CHECK(refusal(h + "32\r\n" + std::string(50, 'x') + "\r\n33\r\n", lim) == 413);  // 50 + 51
  CHECK(refusal(h + "32\r\n" + std::string(50, 'x') + "\r\n32\r\n" + std::string(50, 'x') + "\r\n0\r\n\r\n", lim) == 0);
  CHECK(refusal(h + "3\r\nabcX\r\n", lim) == 400);            // no CRLF after the data
  CHECK(refusal(h + "3\r\nabc\rX", lim) == 400);
  CHECK(refusal(h + "1;" + std::string(1100, 'e'), lim) == 400);  // size line too long, unterminated
  CHECK(message(h + "1;" + std::string(1100, 'e'), lim).find("too long") != std::string::npos);
  CHECK(refusal(h + "1;a\0b\r\nx\r\n"s, lim) == 400);  // NUL in an extension
  CHECK(refusal(h + "1;a\rb\r\nx\r\n", lim) == 400);         // bare CR in an extension
  CHECK(refusal(h + "0\r\nbad trailer\r\n\r\n", lim) == 400);
  CHECK(refusal(h + "0\r\nX-T: a\x01\r\n\r\n", lim) == 400);
  CHECK(refusal(h + "0\r\n" + std::string(40 * 1024, 'a') + ": 1\r\n\r\n") == 431);  // trailers over the head cap
  CHECK(refusal(h + "0\r\n" + std::string(20 * 1024, 'a') + ": 1\r\n" + std::string(20 * 1024, 'b') + ": 1\r\n\r\n") == 431);
  // Framing overhead: at most chunk_framing_per_byte bytes of size lines and CRLFs per body byte,
  // plus chunk_framing_allowance. 1-byte chunks cost 5 bytes each: allowed.
  Limits small;
  small.chunk_framing_allowance = 100;
  CHECK(refusal(chunked(std::string(1000, 'x'), 1), small) == 0);
  std::string ext = h;
  for (int i = 0; i < 20; ++i) ext += "1;" + std::string(100, 'e') + "\r\nx\r\n";
  CHECK(refusal(ext + "0\r\n\r\n", small) == 400);
  CHECK(message(ext, small).find("bytes per body byte") != std::string::npos);
  CHECK(refusal(ext + "0\r\n\r\n") == 0);  // within the default allowance
}

TEST_CASE("http parser: head limits") {
  Limits lim;
  lim.max_head_bytes = 1024;
  lim.max_headers = 10;
  std::string h = "GET / HTTP/1.1\r\nHost: a\r\n";
  CHECK(refusal(h + "X: " + std::string(1000, 'v') + "\r\n\r\n", lim) == 431);  // complete but too large
  CHECK(refusal(h + "X: " + std::string(2000, 'v'), lim) == 431);              // unterminated, past the cap
  CHECK(refusal(std::string(2000, 'G'), lim) == 431);
  std::string many = h;
  for (int i = 0; i < 9; ++i) many += "X" + std::to_string(i) + ": v\r\n";
  CHECK(refusal(many + "\r\n", lim) == 0);  // 10 header lines
  CHECK(refusal(many + "Y: v\r\n\r\n", lim) == 431);
  CHECK(refusal(many + "Y: v\r\nZ: v\r\n", lim) == 431);  // unterminated, too many lines already
  CHECK(message(many + "Y: v\r\n\r\n", lim).find("header lines") != std::string::npos);
}

TEST_CASE("http parser: a chunked body's cost is linear in its bytes however they arrive") {
  // The parser once erased each chunk from the front of the buffer: a 1 MiB body in 1-byte chunks
  // took 3.3 s of CPU. Timing is reported; what is checked is the growth (8x the bytes must cost
  // far less than 64x, what a quadratic decoder costs), so the check holds on any machine.
  auto seconds = [](const std::string& wire, size_t piece) {
    double best = 1e9;  // the least CPU time of this thread (not wall time: other processes do not count)
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = thread_cpu_seconds();
      const Outcome o = parse(wire, Limits(), piece);
      best = std::min(best, thread_cpu_seconds() - t0);
      REQUIRE(o.state == State::Done);
    }
    return best;
  };
  const std::string body(1 << 20, 'x');
  const std::string small = chunked(body.substr(0, body.size() / 8), 1), big = chunked(body, 1);
  for (size_t piece : {size_t(0), size_t(16384), size_t(1000)}) {
    const double ts = seconds(small, piece), tb = seconds(big, piece);
    MESSAGE("1 MiB body in 1-byte chunks (", big.size(), " bytes on the wire), fed in ",
            piece ? std::to_string(piece) + "-byte reads" : std::string("one read"), ": ", tb * 1e3, " ms (128 KiB: ",
            ts * 1e3, " ms)");
    CHECK(tb < 32 * std::max(ts, 1e-4));
  }
  CHECK(parse(big).body == body);
}
