#include "comm/tcp/tcp_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "comm/comm_util.h"

namespace tandem::comm::tcp {

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Waits until `fd` is ready for `events` or the deadline passed (false).
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // the read or write reports the error
    if (Clock::now() >= deadline) return false;
  }
}

}  // namespace

Socket listen_on(int port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  TD_CHECK(s.valid(), ErrorCode::io, kOp, "tcp: socket(): {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  TD_CHECK(::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, ErrorCode::io, kOp,
           "tcp: rank 0 cannot listen on port {} (MASTER_PORT): {}; expected a free port", port, std::strerror(errno));
  TD_CHECK(::listen(s.fd(), 128) == 0, ErrorCode::io, kOp, "tcp: listen on port {}: {}", port, std::strerror(errno));
  return s;
}

Socket accept_until(const Socket& listener, Clock::time_point deadline) {
  for (;;) {
    if (!wait_ready(listener.fd(), POLLIN, deadline)) return Socket();
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      no_delay(fd);
      return Socket(fd);
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      throw_error(ErrorCode::io, kOp, fmt::format("tcp: accept: {}", std::strerror(errno)));
  }
}

Socket connect_until(const std::string& host, int port, Clock::time_point deadline, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  TD_CHECK(rc == 0 && res, ErrorCode::io, kOp, "tcp: MASTER_ADDR {}: {}; expected rank 0's host name or address",
           host, ::gai_strerror(rc));
  std::string last = "no attempt";
  for (;;) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.valid() && ::connect(s.fd(), res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      no_delay(s.fd());
      return s;
    }
    last = std::strerror(errno);
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(res);
  throw_error(ErrorCode::distributed, kOp,
              fmt::format("{}: rank 0 did not answer at {}:{} (MASTER_ADDR:MASTER_PORT) within the timeout ({}); "
                          "expected rank 0 to start there",
                          who, host, port, last));
}

IoResult write_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(s.fd(), p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(s.fd(), POLLOUT, deadline)) return IoResult::timeout;
      continue;
    }
    return errno == EPIPE || errno == ECONNRESET ? IoResult::closed : IoResult::error;
  }
  return IoResult::ok;
}

IoResult read_all(const Socket& s, void* data, size_t n, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(s.fd(), p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return IoResult::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(s.fd(), POLLIN, deadline)) return IoResult::timeout;
      continue;
    }
    return errno == ECONNRESET ? IoResult::closed : IoResult::error;
  }
  return IoResult::ok;
}

}  // namespace tandem::comm::tcp
