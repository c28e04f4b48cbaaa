// A small HTTP/1.1 server for edgellm-server (examples/server/server.cpp): one poll() thread owns every
// connection while a request arrives, and a request is handed to the application only once it is
// complete, so a slow or silent client holds a few kilobytes of buffer and no thread. Limits hold
// before any authentication: a deadline for the request head, caps on head bytes and header lines
// (431), a body cap counted on the bytes actually received and decoded (Content-Length or chunked;
// 413), request Content-Encodings refused (415), a cap on connections (the longest-waiting idle or
// incomplete one is closed to make room), an idle keep-alive timeout. Pipelined requests are
// answered in order. A request without Content-Length or Transfer-Encoding has an empty body
// (RFC 9112 section 6.3). Light handlers (health, errors) run on the poll thread and write through
// a buffer; heavy ones run on a thread of their own (at most one per connection) and write to the
// socket with a deadline of no progress. POSIX only (poll, non-blocking sockets); part of the
// server tool, not of the library (not installed).
#pragma once
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "edgellm/core/error.hpp"

namespace edgellm {
namespace http {

struct Limits {
  int head_timeout_s = 10;      // the request line and headers arrive within this, from their first byte
  int body_timeout_s = 600;     // the body arrives within this after the head
  int idle_timeout_s = 30;      // a keep-alive connection waits this long for its next request
  int write_timeout_s = 600;    // a write that makes no progress for this long closes the connection
  // A stream's socket send buffer (SO_SNDBUF; the kernel doubles it; 0: the kernel's autotuning, up
  // to 4 MiB on Linux). Token streams need little; kept small, a client that stops reading fills it
  // soon and is cut after write_timeout_s, instead of the generation running on into the buffer.
  int stream_sndbuf = 128 * 1024;
  size_t max_head_bytes = 32 * 1024;
  size_t max_headers = 100;
  size_t max_body = 1 << 20;    // decoded body bytes
  size_t chunk_framing_per_byte = 8;        // chunked: framing bytes allowed per body byte ...
  size_t chunk_framing_allowance = 64 * 1024;  // ... plus this many
  size_t max_connections = 512;
};

struct Request {
  std::string method, target, path, query;
  int minor = 1;  // HTTP/1.minor
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string remote_ip;
  int fd = -1;  // the connection (for a liveness probe only: never read or write it)

  const std::string* header(const std::string& lower_name) const {
    for (const auto& h : headers)
      if (h.first == lower_name) return &h.second;
    return nullptr;
  }
  std::string header_or(const std::string& lower_name, const std::string& dflt = "") const {
    const std::string* v = header(lower_name);
    return v ? *v : dflt;
  }
};

inline const char* status_text(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

using Headers = std::vector<std::pair<std::string, std::string>>;

// The answer to one request. A whole response: send(). A stream: begin_stream(), then chunk()
// until it returns false (the client is gone or stalled) or the end, then end_stream().
class Reply {
 public:
  virtual ~Reply() = default;
  virtual void send(int status, const std::string& content_type, const std::string& body, const Headers& extra = {}) = 0;
  virtual bool begin_stream(int status, const std::string& content_type, const Headers& extra = {}) = 0;
  virtual bool chunk(const std::string& data) = 0;
  virtual void end_stream() = 0;
  // No answer (the client is gone): the connection is closed.
  virtual void abort() = 0;
};

namespace detail {

inline std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}
inline bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c));
}
inline std::string trim_ows(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

// Response head; `length` < 0: a chunked (HTTP/1.1) or close-delimited (HTTP/1.0) stream.
inline std::string response_head(int status, const std::string& content_type, long long length, bool keep_alive,
                                 int minor, const Headers& extra) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_text(status) + "\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  if (length >= 0) h += "Content-Length: " + std::to_string(length) + "\r\n";
  else if (minor >= 1) h += "Transfer-Encoding: chunked\r\n";
  for (const auto& kv : extra) h += kv.first + ": " + kv.second + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

// Writes all of data to a non-blocking socket; false when the peer is gone or no byte could be
// written for timeout_s.
inline bool write_all(int fd, const char* data, size_t n, int timeout_s) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, timeout_s * 1000);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

}  // namespace detail

// Parses one request out of a connection's input, incrementally. feed() consumes what it can;
// state() says whether more input is needed, a request is complete, or the request is refused
// (status to answer with; the connection is closed after that answer). The cost is linear in the
// bytes fed however they are split: each feed reads on from where the last one stopped (a partial
// head or chunk-size line is not scanned again) and erases what it used from the input once.
class RequestParser {
 public:
  enum class State { Head, Body, Chunked, Done, Error };
  explicit RequestParser(const Limits& lim) : lim_(&lim) {}

  State state() const { return state_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  Request& request() { return req_; }
  bool keep_alive() const { return keep_alive_; }
  bool expects_continue() const { return expect_continue_; }
  bool started() const { return started_; }

  // Consumes bytes from in (erasing what it used). Returns the state after.
  State feed(std::string& in) {
    size_t pos = 0;
    if (state_ == State::Head) parse_head(in, pos);
    if (state_ == State::Body) {
      const size_t take = std::min(in.size() - pos, body_left_);
      req_.body.append(in, pos, take);
      pos += take;
      body_left_ -= take;
      if (body_left_ == 0) state_ = State::Done;
    }
    if (state_ == State::Chunked) parse_chunked(in, pos);
    in.erase(0, pos);
    return state_;
  }

 private:
  void fail(int status, const std::string& message) {
    state_ = State::Error;
    error_status_ = status;
    error_message_ = message;
  }

  // A byte no field value, request target or chunk line may hold: NUL, CR, LF and the other
  // controls but HTAB, and DEL (RFC 9110 section 5.5; obs-text, 0x80-0xFF, is allowed).
  static bool is_ctl(char ch) {
    const unsigned char c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\t') || c == 0x7f;
  }
  static bool has_ctl(const std::string& s, size_t from = 0) {
    for (size_t i = from; i < s.size(); ++i)
      if (is_ctl(s[i])) return true;
    return false;
  }
  // name ":" OWS value OWS, for header and trailer lines.
  bool field_line(const std::string& l, std::string& name, std::string& value) {
    if (l.empty() || l[0] == ' ' || l[0] == '\t') return fail(400, "obsolete header line folding"), false;
    const size_t colon = l.find(':');
    if (colon == std::string::npos || colon == 0) return fail(400, "malformed header line"), false;
    for (size_t k = 0; k < colon; ++k)
      if (!detail::is_tchar(l[k])) return fail(400, "malformed header name"), false;
    name = detail::lower(l.substr(0, colon));
    if (has_ctl(l, colon + 1)) return fail(400, "control character (NUL, CR, ...) in the value of header '" + name + "'"), false;
    value = detail::trim_ows(l.substr(colon + 1));
    return true;
  }

  void parse_head(const std::string& in, size_t& pos) {
    if (pos < in.size()) started_ = true;
    // Empty lines before a request are allowed (RFC 9112 section 2.2).
    if (head_scanned_ == 0)
      while (pos < in.size() && (in[pos] == '\r' || in[pos] == '\n')) ++pos;
    // The method must be a token: a TLS hello or other binary stops here, at once.
    for (size_t i = pos; i < in.size() && i < pos + 32; ++i) {
      if (in[i] == ' ') break;
      if (!detail::is_tchar(in[i])) return fail(400, "not an HTTP request");
    }
    // The end of the head: the first empty line, searched for in the bytes not searched yet.
    size_t end = std::string::npos, end_len = 0;
    for (size_t i = pos + (head_scanned_ > 3 ? head_scanned_ - 3 : 0); i < in.size(); ++i) {
      if (in[i] != '\n') continue;
      if (i + 1 < in.size() && in[i + 1] == '\n') { end = i, end_len = 2; break; }
      if (i + 2 < in.size() && in[i + 1] == '\r' && in[i + 2] == '\n') { end = i, end_len = 3; break; }
    }
    if (end == std::string::npos) {
      const size_t have = in.size() - pos;
      for (size_t i = pos + head_scanned_; i < in.size(); ++i) head_lines_ += in[i] == '\n';
      head_scanned_ = have;
      if (have > lim_->max_head_bytes) return fail(431, "request head is larger than " + std::to_string(lim_->max_head_bytes) + " bytes");
      if (head_lines_ > lim_->max_headers + 1) return fail(431, "more than " + std::to_string(lim_->max_headers) + " header lines");
      return;
    }
    // `end` is the '\n' that ends the last line; the head is what comes before it.
    if (end + end_len - pos > lim_->max_head_bytes) return fail(431, "request head is larger than " + std::to_string(lim_->max_head_bytes) + " bytes");
    const std::string head = in.substr(pos, end - pos);
    pos = end + end_len;
    std::vector<std::string> lines;
    for (size_t b = 0; b <= head.size();) {
      size_t e = head.find('\n', b);
      if (e == std::string::npos) e = head.size();
      std::string line = head.substr(b, e - b);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      b = e + 1;
    }
    if (lines.size() > lim_->max_headers + 1) return fail(431, "more than " + std::to_string(lim_->max_headers) + " header lines");
    if (!request_line(lines[0])) return;
    size_t n_host = 0, n_te = 0, n_cl = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      std::string name, value;
      if (!field_line(lines[i], name, value)) return;
      n_host += name == "host";
      n_te += name == "transfer-encoding";
      n_cl += name == "content-length";
      req_.headers.emplace_back(std::move(name), std::move(value));
    }
    body_framing(n_host, n_te, n_cl);
  }

  // After the header lines (counted: Host, Transfer-Encoding, Content-Length): persistence and
  // how the body is framed.
  void body_framing(size_t n_host, size_t n_te, size_t n_cl) {
    // Connection persistence (RFC 9112 section 9.3).
    const std::string conn = detail::lower(req_.header_or("connection"));
    keep_alive_ = req_.minor >= 1 ? conn.find("close") == std::string::npos : conn.find("keep-alive") != std::string::npos;
    if (req_.minor >= 1 && n_host == 0) return fail(400, "HTTP/1.1 request without Host");
    if (n_host > 1) return fail(400, "more than one Host");  // RFC 9112 section 3.2
    if (const std::string* ce = req_.header("content-encoding"))
      if (detail::lower(*ce) != "identity") return fail(415, "request Content-Encoding '" + *ce + "' is not accepted: send the body uncompressed");
    const std::string* te = req_.header("transfer-encoding");
    const std::string* cl = req_.header("content-length");
    if (te) {
      if (cl) return fail(400, "both Transfer-Encoding and Content-Length");
      if (n_te > 1) return fail(400, "more than one Transfer-Encoding");
      if (req_.minor < 1) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
      if (detail::lower(*te) != "chunked") return fail(415, "request Transfer-Encoding '" + *te + "' is not accepted (only chunked)");
      state_ = State::Chunked;
    } else if (cl) {
      if (n_cl > 1) return fail(400, "more than one Content-Length");
      if (cl->empty() || cl->size() > 18 || cl->find_first_not_of("0123456789") != std::string::npos)
        return fail(400, "malformed Content-Length");
      const unsigned long long n = std::stoull(*cl);
      if (n > lim_->max_body) return fail(413, "request body of " + *cl + " bytes is larger than the limit of " + std::to_string(lim_->max_body));
      body_left_ = static_cast<size_t>(n);
      state_ = body_left_ ? State::Body : State::Done;
    } else {
      state_ = State::Done;  // no length: no body (RFC 9112 section 6.3)
    }
    expect_continue_ = state_ != State::Done && req_.minor >= 1 &&
                       detail::lower(req_.header_or("expect")) == "100-continue";
  }

  // Request line: METHOD SP target SP HTTP/1.x
  bool request_line(const std::string& rl) {
    if (has_ctl(rl)) return fail(400, "control character (NUL, CR, ...) in the request line"), false;
    const size_t s1 = rl.find(' '), s2 = rl.rfind(' ');
    if (s1 == std::string::npos || s2 == s1 || s1 == 0) return fail(400, "malformed request line"), false;
    req_.method = rl.substr(0, s1);
    for (char ch : req_.method)
      if (!detail::is_tchar(ch)) return fail(400, "malformed method"), false;
    req_.target = rl.substr(s1 + 1, s2 - s1 - 1);
    const std::string version = rl.substr(s2 + 1);
    if (version == "HTTP/1.1") req_.minor = 1;
    else if (version == "HTTP/1.0") req_.minor = 0;
    else return fail(version.rfind("HTTP/", 0) == 0 ? 505 : 400, "unsupported HTTP version"), false;
    if (req_.target.empty()) return fail(400, "malformed request target"), false;
    for (char ch : req_.target)  // no white space or controls (HTAB passed the line's check)
      if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f) return fail(400, "malformed request target"), false;
    const size_t q = req_.target.find('?');
    req_.path = req_.target.substr(0, q);
    if (q != std::string::npos) req_.query = req_.target.substr(q + 1);
    return true;
  }

  // chunk = size [;ext] CRLF data CRLF ... 0 CRLF [trailers] CRLF. The decoded size is checked
  // against the cap as the sizes arrive, before any data is kept; the framing (size lines,
  // extensions, CRLFs) may cost at most Limits::chunk_framing_per_byte bytes per body byte, plus
  // chunk_framing_allowance (tiny chunks or long extensions: 400).
  void parse_chunked(const std::string& in, size_t& pos) {
    for (;;) {
      if (chunk_left_ > 0) {
        const size_t take = std::min(in.size() - pos, chunk_left_);
        req_.body.append(in, pos, take);
        pos += take;
        chunk_left_ -= take;
        if (chunk_left_ > 0) return;
        need_crlf_ = true;
      }
      if (need_crlf_) {
        if (pos >= in.size()) return;
        if (in[pos] == '\n') {
          pos += 1, framing_ += 1;
        } else if (in[pos] == '\r') {
          if (pos + 1 >= in.size()) return;
          if (in[pos + 1] != '\n') return fail(400, "malformed chunk");
          pos += 2, framing_ += 2;
        } else {
          return fail(400, "malformed chunk");
        }
        need_crlf_ = false;
      }
      // A line's length is checked the same whether it is complete or still arriving, so the
      // answer does not depend on how the bytes were split.
      const size_t eol = in.find('\n', pos + line_scanned_);
      const size_t len = eol == std::string::npos ? in.size() - pos : eol - pos;  // without the '\n'
      if (in_trailers_ && trailer_bytes_ + len + (eol != std::string::npos) > lim_->max_head_bytes)
        return fail(431, "chunked trailers too large");
      if (!in_trailers_ && len > 1024) return fail(400, "chunk header line too long");
      if (eol == std::string::npos) {
        line_scanned_ = len;
        return;
      }
      line_scanned_ = 0;
      size_t b = pos, e = pos + len;  // the line without its '\n' (and '\r'), read in place
      pos = eol + 1;
      if (e > b && in[e - 1] == '\r') --e;
      if (in_trailers_) {
        trailer_bytes_ += len + 1;
        if (e == b) {
          state_ = State::Done;
          return;
        }
        std::string name, value;  // checked as header lines are, then dropped
        if (!field_line(in.substr(b, e - b), name, value)) return;
        continue;
      }
      framing_ += e - b + 2;
      if (framing_ > lim_->chunk_framing_allowance + lim_->chunk_framing_per_byte * req_.body.size())
        return fail(400, "chunked framing is more than " + std::to_string(lim_->chunk_framing_per_byte) +
                             " bytes per body byte: send larger chunks");
      for (size_t i = b; i < e; ++i)
        if (is_ctl(in[i])) return fail(400, "control character (NUL, CR, ...) in a chunk header line");
      // chunk-size [BWS ";" extension]: hex digits, at most 15.
      while (b < e && (in[b] == ' ' || in[b] == '\t')) ++b;
      unsigned long long n = 0;
      size_t digits = 0;
      for (; b < e && digits <= 15; ++b, ++digits) {
        const char ch = in[b];
        const int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) break;
        n = n * 16 + static_cast<unsigned>(d);
      }
      while (b < e && (in[b] == ' ' || in[b] == '\t')) ++b;
      if (digits == 0 || digits > 15 || (b < e && in[b] != ';')) return fail(400, "malformed chunk size");
      if (n == 0) {
        in_trailers_ = true;
        continue;
      }
      if (n > lim_->max_body || req_.body.size() + n > lim_->max_body)
        return fail(413, "chunked request body is larger than the limit of " + std::to_string(lim_->max_body) + " bytes");
      chunk_left_ = static_cast<size_t>(n);
    }
  }

  const Limits* lim_;
  State state_ = State::Head;
  Request req_;
  int error_status_ = 0;
  std::string error_message_;
  bool keep_alive_ = true, expect_continue_ = false, started_ = false;
  size_t body_left_ = 0, chunk_left_ = 0, trailer_bytes_ = 0;
  size_t head_scanned_ = 0, head_lines_ = 0;  // bytes of a partial head already searched, '\n's in them
  size_t line_scanned_ = 0;                   // bytes of a partial chunk line already searched
  size_t framing_ = 0;                        // chunk framing bytes so far
  bool need_crlf_ = false, in_trailers_ = false;
};

class Server {
 public:
  // Runs on the poll thread for a light request, on a thread of its own for a heavy one.
  using Handler = std::function<void(const Request&, Reply&)>;
  using Classifier = std::function<bool(const Request&)>;  // true: heavy
  // The body for a transport-level refusal (4xx before a handler): status, message -> (content type, body).
  using ErrorBody = std::function<std::pair<std::string, std::string>(int, const std::string&)>;

  Server(Limits lim, Handler handler, Classifier heavy, ErrorBody error_body)
      : lim_(lim), handler_(std::move(handler)), heavy_(std::move(heavy)), error_body_(std::move(error_body)) {}
  ~Server() {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_[0] >= 0) ::close(wake_[0]), ::close(wake_[1]);
  }

  // Binds host:port (0: any free port); returns the port, or throws.
  int bind(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string ps = std::to_string(port);
    if (getaddrinfo(host.c_str(), ps.c_str(), &hints, &res) != 0 || !res)
      throw_error("cannot resolve --host ", host);
    int fd = -1;
    for (addrinfo* a = res; a; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 512) == 0) break;
      ::close(fd);
      fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) throw_error("cannot listen on ", host, ":", port, " (address in use, or not an address of this machine)");
    set_nonblocking(fd);
    listen_fd_ = fd;
    sockaddr_storage sa{};
    socklen_t len = sizeof(sa);
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = sa.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
    if (::pipe(wake_) != 0) throw_error("pipe: ", std::strerror(errno));
    set_nonblocking(wake_[0]);
    set_nonblocking(wake_[1]);
    return port_;
  }

  // Serves until stop(); then closes every connection and waits (up to 10 s) for the request
  // threads. False when some are still running (the caller should then exit without unwinding).
  bool run() {
    std::vector<pollfd> fds;
    std::vector<Conn*> polled;
    while (!stopping_.load()) {
      take_finished();
      const auto now = Clock::now();
      expire(now);
      fds.clear();
      polled.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      if (conns_.size() < lim_.max_connections || has_evictable()) fds.push_back({listen_fd_, POLLIN, 0});
      const size_t first_conn = fds.size();
      int timeout_ms = 1000;
      for (auto& kv : conns_) {
        Conn* c = kv.second.get();
        if (c->busy) continue;
        short ev = 0;
        if (!c->out.empty()) ev |= POLLOUT;
        else if (!c->closing || c->draining) ev |= POLLIN;
        if (!ev) continue;
        fds.push_back({c->fd, ev, 0});
        polled.push_back(c);
        const auto dl = c->out.empty() ? c->read_deadline : c->write_deadline;
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(dl - now).count();
        timeout_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(timeout_ms, ms + 1)));
      }
      const int r = ::poll(fds.data(), fds.size(), timeout_ms);
      if (r < 0 && errno != EINTR) throw_error("poll: ", std::strerror(errno));
      if (r <= 0) continue;
      if (fds[0].revents & POLLIN) {
        char buf[256];
        while (::read(wake_[0], buf, sizeof(buf)) > 0) {
        }
      }
      for (size_t i = first_conn; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        Conn* c = polled[i - first_conn];
        if (c->close_now) continue;
        if (fds[i].events & POLLOUT) process(*c);
        else on_readable(*c);
      }
      if (first_conn == 2 && (fds[1].revents & POLLIN)) accept_all();
      reap();
    }
    for (auto& kv : conns_) ::shutdown(kv.second->fd, SHUT_RDWR);
    for (int i = 0; i < 1000 && active_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (active_.load() > 0) return false;
    take_finished();
    for (auto& kv : conns_) ::close(kv.second->fd);
    conns_.clear();
    return true;
  }

  void stop() {
    stopping_.store(true);
    if (wake_[1] >= 0) {
      const char b = 1;
      (void)!::write(wake_[1], &b, 1);
    }
  }
  int port() const { return port_; }
  size_t connections() const { return n_conns_.load(); }

 private:
  using Clock = std::chrono::steady_clock;

  struct Conn {
    int fd = -1;
    uint64_t id = 0;
    std::string remote_ip;
    std::string in, out;
    std::unique_ptr<RequestParser> parser;
    Clock::time_point read_deadline;   // of the current wait for input (head, body, idle)
    Clock::time_point write_deadline;  // while output waits: no progress until then closes
    Clock::time_point since;           // when this connection last became idle / started a request
    bool busy = false;           // a request thread owns the socket
    bool closing = false;        // close once `out` is written
    bool close_now = false;
    bool reading_request = false;
    bool peer_eof = false;       // the peer sent FIN (or reset): no more input
    bool refused = false;        // answered with a transport error: drain its input before closing
    bool draining = false;       // our side shut down: input is read and dropped for a moment
  };

  // The reply of a light request (poll thread): bytes go to the connection's buffer.
  class BufferedReply : public Reply {
   public:
    BufferedReply(Conn& c, int minor, bool keep_alive, int timeout_s, bool head_only)
        : c_(c), minor_(minor), keep_alive_(keep_alive), timeout_s_(timeout_s), head_only_(head_only) {}
    void send(int status, const std::string& type, const std::string& body, const Headers& extra) override {
      if (c_.out.empty()) c_.write_deadline = Clock::now() + std::chrono::seconds(timeout_s_);
      c_.out += detail::response_head(status, type, static_cast<long long>(body.size()), keep_alive_, minor_, extra);
      if (!head_only_) c_.out += body;  // HEAD: the head alone (RFC 9110 section 9.3.2)
      sent_ = true;
    }
    bool begin_stream(int, const std::string&, const Headers&) override {
      throw_error("http: a light handler cannot stream");
    }
    bool chunk(const std::string&) override { return false; }
    void end_stream() override {}
    void abort() override {
      sent_ = true;
      c_.closing = true;
    }
    bool sent() const { return sent_; }

   private:
    Conn& c_;
    int minor_;
    bool keep_alive_;
    int timeout_s_;
    bool head_only_;
    bool sent_ = false;
  };

  // The reply of a heavy request (its own thread): writes to the socket with a deadline.
  class DirectReply : public Reply {
   public:
    DirectReply(int fd, int minor, bool keep_alive, int timeout_s, int stream_sndbuf)
        : fd_(fd), minor_(minor), keep_alive_(keep_alive), timeout_s_(timeout_s), stream_sndbuf_(stream_sndbuf) {}
    void send(int status, const std::string& type, const std::string& body, const Headers& extra) override {
      const std::string all = detail::response_head(status, type, static_cast<long long>(body.size()), keep_alive_, minor_, extra) + body;
      ok_ = detail::write_all(fd_, all.data(), all.size(), timeout_s_);
      sent_ = true;
    }
    bool begin_stream(int status, const std::string& type, const Headers& extra) override {
      if (minor_ < 1) keep_alive_ = false;  // HTTP/1.0: the stream ends with the connection
      if (stream_sndbuf_ > 0) setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &stream_sndbuf_, sizeof(stream_sndbuf_));
      const std::string h = detail::response_head(status, type, -1, keep_alive_, minor_, extra);
      sent_ = streaming_ = true;
      ok_ = detail::write_all(fd_, h.data(), h.size(), timeout_s_);
      return ok_;
    }
    bool chunk(const std::string& data) override {
      if (!ok_ || data.empty()) return ok_;
      if (minor_ >= 1) {
        char size[24];
        std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
        const std::string framed = size + data + "\r\n";
        ok_ = detail::write_all(fd_, framed.data(), framed.size(), timeout_s_);
      } else {
        ok_ = detail::write_all(fd_, data.data(), data.size(), timeout_s_);
      }
      return ok_;
    }
    void end_stream() override {
      if (ok_ && minor_ >= 1) ok_ = detail::write_all(fd_, "0\r\n\r\n", 5, timeout_s_);
      streaming_ = false;
      ended_ = true;
    }
    void abort() override {
      sent_ = true;
      ok_ = false;
    }
    bool sent() const { return sent_; }
    // Whether the connection can carry another request.
    bool reusable() const { return ok_ && keep_alive_ && sent_ && (!streaming_ || ended_); }

   private:
    int fd_, minor_;
    bool keep_alive_;
    int timeout_s_, stream_sndbuf_;
    bool ok_ = true, sent_ = false, streaming_ = false, ended_ = false;
  };

  static void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

  bool evictable(const Conn& c) const { return !c.busy; }
  bool has_evictable() const {
    for (const auto& kv : conns_)
      if (evictable(*kv.second)) return true;
    return false;
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage sa{};
      socklen_t len = sizeof(sa);
      const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: try again on the next round
      if (conns_.size() >= lim_.max_connections && !evict_one()) {
        ::close(fd);
        return;
      }
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->id = next_id_++;
      char host[NI_MAXHOST];
      if (getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0)
        c->remote_ip = host;
      start_wait(*c);
      conns_[c->id] = std::move(c);
      n_conns_.store(conns_.size());
      if (conns_.size() >= lim_.max_connections && !has_evictable()) return;
    }
  }

  // Makes room: closes the connection that has waited longest for (the rest of) a request.
  bool evict_one() {
    Conn* oldest = nullptr;
    for (auto& kv : conns_)
      if (evictable(*kv.second) && (!oldest || kv.second->since < oldest->since)) oldest = kv.second.get();
    if (!oldest) return false;
    oldest->close_now = true;
    reap();
    return true;
  }

  // Waiting for a next request (idle keep-alive, or a fresh connection).
  void start_wait(Conn& c) {
    c.parser.reset(new RequestParser(lim_));
    c.reading_request = false;
    c.since = Clock::now();
    c.read_deadline = c.since + std::chrono::seconds(lim_.idle_timeout_s);
  }

  void on_readable(Conn& c) {
    char buf[16384];
    if (c.draining) {  // the answer is out; what the client still sends is dropped until it closes
      for (int round = 0; round < 16; ++round) {
        const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        c.close_now = true;
        return;
      }
      return;
    }
    for (int round = 0; round < 4; ++round) {
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      c.peer_eof = true;  // closed or reset: what arrived is still answered, then the connection closes
      break;
    }
    process(c);
  }

  // Parses and answers what the connection's input holds, in order, writes what it can, and
  // decides whether the connection closes.
  void process(Conn& c) {
    for (;;) {
      const bool backlog = parse_and_answer(c);
      flush(c);
      if (c.close_now || c.busy || !c.out.empty() || c.draining) return;
      if (c.closing) {
        if (c.refused && !c.peer_eof) {
          // Closing now, with the client's bytes unread, would reset the connection and could
          // destroy the answer before the client reads it: shut down our side and drop what comes
          // for up to 2 s (a "lingering close").
          ::shutdown(c.fd, SHUT_WR);
          c.draining = true;
          c.read_deadline = Clock::now() + std::chrono::seconds(2);
          return;
        }
        c.close_now = true;
        return;
      }
      if (backlog) continue;
      if (c.peer_eof) c.close_now = true;
      return;
    }
  }

  // Answers the complete requests at the head of the input until one goes to a thread or more
  // input is needed. True when it stopped for the output buffer (written first, then more).
  bool parse_and_answer(Conn& c) {
    while (!c.busy && !c.close_now && !c.closing) {
      if (c.out.size() >= 65536) return true;
      if (c.in.empty() && c.parser->state() == RequestParser::State::Head) return false;
      const auto before = c.parser->state();
      const bool was_started = c.parser->started();
      const auto st = c.parser->feed(c.in);
      if (!was_started && c.parser->started()) {
        c.reading_request = true;
        c.since = Clock::now();
        c.read_deadline = c.since + std::chrono::seconds(lim_.head_timeout_s);
      }
      if (before == RequestParser::State::Head && (st == RequestParser::State::Body || st == RequestParser::State::Chunked)) {
        c.read_deadline = Clock::now() + std::chrono::seconds(lim_.body_timeout_s);
        if (c.parser->expects_continue()) {
          if (c.out.empty()) c.write_deadline = Clock::now() + std::chrono::seconds(lim_.write_timeout_s);
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        }
      }
      if (st == RequestParser::State::Error) {
        refuse(c, c.parser->error_status(), c.parser->error_message());
        return false;
      }
      if (st != RequestParser::State::Done) return false;
      Request& req = c.parser->request();
      req.remote_ip = c.remote_ip;
      req.fd = c.fd;
      const bool keep = c.parser->keep_alive();
      if (heavy_(req)) {
        if (!c.out.empty()) return true;  // the answers before this one go out first
        dispatch(c, keep);
        return false;
      }
      BufferedReply reply(c, req.minor, keep, lim_.write_timeout_s, req.method == "HEAD");
      call_handler(req, reply);
      if (!keep) {
        c.closing = true;
        c.in.clear();
        return false;
      }
      start_wait(c);
    }
    return false;
  }

  // The handler; an exception, or no answer at all, is a 500 (when nothing was sent yet).
  template <class R>
  void call_handler(const Request& req, R& reply) {
    std::string what;
    try {
      handler_(req, reply);
    } catch (const std::exception& e) {
      what = e.what();
    }
    if (reply.sent()) return;
    auto eb = error_body_(500, what.empty() ? "no answer" : what);
    reply.send(500, eb.first, eb.second, {});
  }

  // A refusal before any handler: the answer, then the connection closes (its input may be
  // anywhere in a request).
  void refuse(Conn& c, int status, const std::string& message) {
    auto eb = error_body_(status, message);
    c.write_deadline = Clock::now() + std::chrono::seconds(std::min(lim_.write_timeout_s, 5));
    c.out += detail::response_head(status, eb.first, static_cast<long long>(eb.second.size()), false, 1, {}) + eb.second;
    c.in.clear();
    c.closing = true;
    c.refused = true;
  }

  void dispatch(Conn& c, bool keep) {
    c.busy = true;
    auto req = std::make_shared<Request>(std::move(c.parser->request()));
    const int fd = c.fd;
    const uint64_t id = c.id;
    const int wt = lim_.write_timeout_s, sndbuf = lim_.stream_sndbuf;
    ++active_;
    std::thread([this, req, fd, id, keep, wt, sndbuf] {
      DirectReply reply(fd, req->minor, keep, wt, sndbuf);
      call_handler(*req, reply);
      {
        std::lock_guard<std::mutex> lock(mu_);
        finished_.push_back({id, reply.reusable()});
      }
      const char b = 1;
      (void)!::write(wake_[1], &b, 1);
      --active_;  // last: run() may return (and this Server go) once it reads zero
    }).detach();
  }

  // Connections whose request thread is done come back to the poll loop.
  void take_finished() {
    std::deque<std::pair<uint64_t, bool>> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done.swap(finished_);
    }
    for (const auto& d : done) {
      auto it = conns_.find(d.first);
      if (it == conns_.end()) continue;
      Conn& c = *it->second;
      c.busy = false;
      if (!d.second || c.closing) {
        c.close_now = true;
        continue;
      }
      start_wait(c);
      process(c);  // a pipelined next request may be waiting already; a closed peer is seen here
    }
    reap();
  }

  // Writes what the socket takes of the connection's output buffer.
  void flush(Conn& c) {
    while (!c.out.empty()) {
      const ssize_t w = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w > 0) {
        c.out.erase(0, static_cast<size_t>(w));
        if (!c.closing) c.write_deadline = Clock::now() + std::chrono::seconds(lim_.write_timeout_s);
        continue;
      }
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      c.close_now = true;
      return;
    }
  }

  void expire(Clock::time_point now) {
    for (auto& kv : conns_) {
      Conn& c = *kv.second;
      if (c.busy || c.close_now) continue;
      if (!c.out.empty()) {
        if (now >= c.write_deadline) c.close_now = true;
      } else if (now >= c.read_deadline) {
        if (c.reading_request && !c.closing) {
          refuse(c, 408, "the request did not arrive in time");
          process(c);
        } else {
          c.close_now = true;
        }
      }
    }
    reap();
  }

  void reap() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->second->close_now && !it->second->busy) {
        ::close(it->second->fd);
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
    n_conns_.store(conns_.size());
  }

  Limits lim_;
  Handler handler_;
  Classifier heavy_;
  ErrorBody error_body_;
  int listen_fd_ = -1, port_ = 0;
  int wake_[2] = {-1, -1};
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_{0};
  std::atomic<size_t> n_conns_{0};
  std::mutex mu_;
  std::deque<std::pair<uint64_t, bool>> finished_;
};

}  // namespace http
}  // namespace edgellm
