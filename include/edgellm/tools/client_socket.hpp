// ClientSocket: whether an HTTP client is still connected, for the server (examples/server.cpp) to
// cancel a generation whose client went away within one token (BatchScheduler asks
// Job::client_gone before each token). cpp-httplib 0.11 gives a handler neither the connection's
// socket nor a "closed" flag, and applies its socket-options hook to the listening socket only, so
// the socket is found by the request's address pair (local and peer address and port, unique
// among open TCP connections) among this process's descriptors (/proc/self/fd). POSIX + Linux
// /proc; the core library does not use this.
#pragma once
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <string>

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

namespace edgellm {

// "ip", port of a socket address as cpp-httplib prints them (getnameinfo NI_NUMERICHOST).
inline bool socket_address(const sockaddr_storage& a, socklen_t len, std::string& ip, int& port) {
  if (a.ss_family == AF_INET) port = ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  else if (a.ss_family == AF_INET6) port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  else return false;
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0)
    return false;
  ip = host;
  return true;
}

// The descriptor of this process's TCP connection from remote_ip:remote_port to
// local_ip:local_port, or -1 (not found, or no /proc).
inline int find_connection(const std::string& local_ip, int local_port, const std::string& remote_ip, int remote_port) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == dirfd(d)) continue;
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    std::string ip;
    int port = -1;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !socket_address(a, len, ip, port)) continue;
    if (port != remote_port || ip != remote_ip) continue;
    len = sizeof(a);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !socket_address(a, len, ip, port)) continue;
    if (port != local_port || ip != local_ip) continue;
    found = fd;
    break;
  }
  closedir(d);
  return found;
}

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
