// ClientSocket: whether an HTTP client is still connected, for the server (server.cpp) to cancel a
// generation whose client went away within one token (BatchScheduler asks Job::client_gone before
// each token). The transport (http_server.hpp) hands each request its connection's descriptor.
// POSIX; part of the server tool, not of the library.
#pragma once
#include <cerrno>
#include <mutex>

#include <sys/socket.h>
#include <sys/types.h>

namespace edgellm {

// One request's connection. gone() may be called from any thread (the scheduler's) until
// detach(), which the request's handler calls before its connection can be closed (so a
// descriptor number reused by a later connection is never probed).
class ClientSocket {
 public:
  explicit ClientSocket(int fd) : fd_(fd) {}
  // Whether the peer closed (or reset) the connection. Bytes waiting to be read (a pipelined next
  // request) are not a close; a half-closed connection (the client shut down its sending side) is.
  bool gone() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) return false;
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
  void detach() {
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = -1;
  }
  bool attached() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fd_ >= 0;
  }

 private:
  mutable std::mutex mu_;
  int fd_;
};

}  // namespace edgellm
