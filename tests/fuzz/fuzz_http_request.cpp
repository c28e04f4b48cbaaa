// libFuzzer target for the server's HTTP/1.1 request parser (examples/server/http_server.hpp):
// arbitrary bytes as what a connection receives, parsed twice, once fed whole and once split at
// pseudo-random points (derived from the input, so a finding replays). Both must come to the same
// requests (pipelined ones included) and the same refusal status; every refusal is a 4xx/5xx the
// server answers with; nothing may throw. Small limits, so the caps are reached within -max_len.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "http_server.hpp"  // examples/server/

namespace {

using edgellm::http::Limits;
using edgellm::http::RequestParser;
using State = RequestParser::State;

void fail(const char* what) {
  std::fprintf(stderr, "fuzz_http_request: %s\n", what);
  std::abort();  // a finding: libFuzzer saves the input
}

// A connection's requests, in order: each complete one's parts, then how the input ended
// (waiting for more, or refused with a status).
struct Connection {
  Limits lim;
  RequestParser parser{lim};
  std::string in;
  std::vector<std::string> requests;  // each request's parts, serialised
  int refused = 0;

  void feed(const char* p, size_t n) {
    if (refused) return;
    in.append(p, n);
    for (;;) {
      const State st = parser.feed(in);
      if (st == State::Error) {
        refused = parser.error_status();
        if (refused < 400 || refused > 599 || parser.error_message().empty()) fail("a refusal without a 4xx/5xx status and a message");
        return;
      }
      if (st != State::Done) return;
      const auto& r = parser.request();
      std::string s = r.method + ' ' + r.target + ' ' + std::to_string(r.minor) + ' ' + std::to_string(parser.keep_alive()) +
                      std::to_string(parser.expects_continue()) + '\n';
      for (const auto& h : r.headers) s += h.first + ':' + h.second + '\n';
      s += std::to_string(r.body.size()) + '\n' + r.body;
      if (r.body.size() > lim.max_body) fail("a body over the cap");
      requests.push_back(std::move(s));
      parser.~RequestParser();  // the next request on the connection
      new (&parser) RequestParser(lim);
      if (in.empty()) return;
    }
  }
};

Limits small_limits() {
  Limits lim;
  lim.max_head_bytes = 2048;
  lim.max_headers = 16;
  lim.max_body = 4096;
  lim.chunk_framing_allowance = 256;
  lim.chunk_framing_per_byte = 8;
  return lim;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  Connection whole, split;
  whole.lim = split.lim = small_limits();
  whole.feed(p, size);
  uint64_t x = 1469598103934665603ull;  // FNV-1a of the input: the split points
  for (size_t i = 0; i < size; ++i) x = (x ^ data[i]) * 1099511628211ull;
  for (size_t at = 0; at < size;) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t r = x >> 33;
    const size_t n = std::min<size_t>(size - at, (r & 3) == 0 ? 1 : 1 + (r >> 2) % 64);  // often single bytes
    split.feed(p + at, n);
    at += n;
  }
  if (whole.requests != split.requests) fail("whole and split feeds parsed different requests");
  if (whole.refused != split.refused) fail("whole and split feeds differ in the refusal status");
  return 0;
}
