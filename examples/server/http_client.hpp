// A small HTTP/1.1 client: one request per connection (Connection: close), plain http:// only,
// for edgellm-eval --server and the tests that talk to http_server.hpp in-process. The one HTTP
// stack of the project beside the server's own (docs/ARCHITECTURE.md says why it replaced
// cpp-httplib). POSIX sockets; part of the server tool's folder, not of the library.
#pragma once
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include "edgellm/core/error.hpp"

namespace edgellm {
namespace http {

// http://HOST[:PORT][/PREFIX]; HOST may be [IPv6].
struct Url {
  std::string host, port = "80", prefix;
};
inline Url parse_url(const std::string& url) {
  if (url.rfind("http://", 0) != 0) throw_error("expected http://HOST[:PORT], got '", url, "'");
  const std::string rest = url.substr(7);
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  Url u;
  if (slash != std::string::npos) u.prefix = rest.substr(slash);
  while (!u.prefix.empty() && u.prefix.back() == '/') u.prefix.pop_back();
  size_t colon = std::string::npos;
  if (!authority.empty() && authority[0] == '[') {
    const size_t e = authority.find(']');
    if (e == std::string::npos) throw_error("expected http://HOST[:PORT], got '", url, "'");
    u.host = authority.substr(1, e - 1);
    if (e + 1 < authority.size()) {
      if (authority[e + 1] != ':') throw_error("expected http://HOST[:PORT], got '", url, "'");
      colon = e + 1;
    }
  } else {
    colon = authority.find(':');
    u.host = authority.substr(0, colon);
  }
  if (colon != std::string::npos) u.port = authority.substr(colon + 1);
  if (u.host.empty() || u.port.empty() || u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos ||
      std::atoi(u.port.c_str()) > 65535)
    throw_error("expected http://HOST[:PORT], got '", url, "'");
  return u;
}

struct Response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  const std::string* header(const std::string& lower_name) const {
    for (const auto& h : headers)
      if (h.first == lower_name) return &h.second;
    return nullptr;
  }
};

// The status line and header lines of the response head in[at, end) into r.
inline void parse_response_head(const std::string& in, size_t at, size_t end, Response& r) {
  r = Response();
  size_t line_end = in.find("\r\n", at);
  const std::string status_line = in.substr(at, line_end - at);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12 || status_line[8] != ' ')
    throw_error("http: not an HTTP/1.x response: '", status_line.substr(0, 40), "'");
  const std::string code = status_line.substr(9, 3);
  if (code.find_first_not_of("0123456789") != std::string::npos) throw_error("http: malformed status line '", status_line.substr(0, 40), "'");
  r.status = std::atoi(code.c_str());
  for (size_t b = line_end + 2; b < end;) {
    size_t e = in.find("\r\n", b);
    if (e > end) e = end;
    const std::string line = in.substr(b, e - b);
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) throw_error("http: malformed response header line");
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    size_t vb = colon + 1, ve = line.size();
    while (vb < ve && (line[vb] == ' ' || line[vb] == '\t')) ++vb;
    while (ve > vb && (line[ve - 1] == ' ' || line[ve - 1] == '\t')) --ve;
    r.headers.emplace_back(std::move(name), line.substr(vb, ve - vb));
    b = e + 2;
  }
}

// A chunked body from in[at]: true when it is complete (then in r.body), false when more bytes are
// needed.
inline bool parse_chunked_response(const std::string& in, size_t at, bool eof, Response& r) {
  std::string body;
  for (size_t p = at;;) {
    const size_t eol = in.find("\r\n", p);
    if (eol == std::string::npos) break;
    const std::string size_line = in.substr(p, in.find_first_of(";\r", p) - p);
    if (size_line.empty() || size_line.size() > 15 || size_line.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      throw_error("http: malformed chunk size in the response");
    const size_t n = static_cast<size_t>(std::strtoull(size_line.c_str(), nullptr, 16));
    if (n == 0) {
      // Trailers, then an empty line.
      for (size_t q = eol + 2;;) {
        const size_t e = in.find("\r\n", q);
        if (e == std::string::npos) break;
        if (e == q) {
          r.body = std::move(body);
          return true;
        }
        q = e + 2;
      }
      break;
    }
    if (in.size() < eol + 2 + n + 2) break;
    body.append(in, eol + 2, n);
    if (in.compare(eol + 2 + n, 2, "\r\n") != 0) throw_error("http: malformed chunk in the response");
    p = eol + 2 + n + 2;
  }
  if (eof) throw_error("http: truncated chunked response");
  return false;
}

// Parses a response from the bytes received so far. True when it is complete (framed by
// Content-Length, chunked, or the connection's end: `eof`); false when more bytes are needed;
// Error when the bytes are not an HTTP/1.x response. 1xx responses before the final one are skipped.
inline bool parse_response(const std::string& in, bool eof, bool head_request, Response& r) {
  size_t at = 0;
  for (;;) {
    const size_t end = in.find("\r\n\r\n", at);
    if (end == std::string::npos) {
      if (in.size() - at > (64u << 10)) throw_error("http: response head larger than 64 KiB");
      if (eof) throw_error(in.size() == at ? "http: the server closed the connection without an answer" : "http: truncated response head");
      return false;
    }
    parse_response_head(in, at, end, r);
    at = end + 4;
    if (r.status >= 100 && r.status < 200) continue;  // 100 Continue and the like: the answer follows
    break;
  }
  if (head_request || r.status == 204 || r.status == 304) return true;
  const std::string* te = r.header("transfer-encoding");
  if (te && *te == "chunked") return parse_chunked_response(in, at, eof, r);
  if (const std::string* cl = r.header("content-length")) {
    if (cl->empty() || cl->size() > 18 || cl->find_first_not_of("0123456789") != std::string::npos)
      throw_error("http: malformed Content-Length in the response");
    const size_t n = static_cast<size_t>(std::strtoull(cl->c_str(), nullptr, 10));
    if (in.size() - at < n) {
      if (eof) throw_error("http: truncated response body (", in.size() - at, " of ", n, " bytes)");
      return false;
    }
    r.body = in.substr(at, n);
    return true;
  }
  if (!eof) return false;  // delimited by the connection's end
  r.body = in.substr(at);
  return true;
}

// One request per connection to the server at a URL. Every failure (no answer, a reset, a
// malformed response, no byte for timeout_s) is an Error naming the URL.
class Client {
 public:
  explicit Client(const std::string& url, int timeout_s = 3600) : url_(url), u_(parse_url(url)), timeout_s_(timeout_s) {}

  Response request(const std::string& method, const std::string& path, const std::string* body = nullptr,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) const {
    const std::string target = u_.prefix + path;
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: " +
                      (u_.host.find(':') != std::string::npos ? "[" + u_.host + "]" : u_.host) + ":" + u_.port +
                      "\r\nConnection: close\r\n";
    for (const auto& h : headers) req += h.first + ": " + h.second + "\r\n";
    if (body) req += "Content-Length: " + std::to_string(body->size()) + "\r\n";
    req += "\r\n";
    if (body) req += *body;
    const int fd = connect_();
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    for (size_t off = 0; off < req.size();) {
      const ssize_t w = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("sending the request failed (", std::strerror(errno), ")");
      off += static_cast<size_t>(w);
    }
    std::string in;
    Response r;
    char buf[65536];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      const int pr = ::poll(&p, 1, timeout_s_ * 1000);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) fail("no answer within ", timeout_s_, " s");
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("receiving failed (", std::strerror(errno), ")");
      if (n > 0) in.append(buf, static_cast<size_t>(n));
      try {
        if (parse_response(in, n == 0, method == "HEAD", r)) return r;
      } catch (const Error& e) {
        fail(e.what());
      }
    }
  }

 private:
  template <class... A>
  [[noreturn]] void fail(const A&... what) const {
    throw_error(url_, ": ", what...);
  }
  int connect_() const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    if (getaddrinfo(u_.host.c_str(), u_.port.c_str(), &hints, &res) != 0 || !res) fail("cannot resolve ", u_.host);
    int fd = -1, err = 0;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      timeval tv{timeout_s_, 0};  // bounds connect() and each send()
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        ::close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(res);
    if (fd < 0) fail("cannot connect (", std::strerror(err), ")");
    return fd;
  }

  std::string url_;
  Url u_;
  int timeout_s_;
};

}  // namespace http
}  // namespace edgellm
