// Blocking TCP sockets with deadlines, for the tcp communicator (tandem/comm/tcp.h): a
// listening socket, a connection made with retries until a deadline, and whole-buffer reads
// and writes that wait with poll() so that no call outlives its deadline.
// Thread-safety: one thread per socket at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace tandem::comm::tcp {

using Clock = std::chrono::steady_clock;

/// `seconds` from now.
inline Clock::time_point deadline_in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// An owned file descriptor (closed by the destructor); movable.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// How a read or write ended.
enum class IoResult { ok, closed, timeout, error };

/// Listens on `port` on every interface (SO_REUSEADDR). Throws Error(io) naming the port.
Socket listen_on(int port);
/// Accepts one connection before `deadline`; an invalid Socket when the deadline passed.
Socket accept_until(const Socket& listener, Clock::time_point deadline);
/// Connects to `host`:`port`, retrying every 50 ms until `deadline` (rank 0 may start later).
/// Throws Error(io) when `host` does not resolve, Error(distributed) at the deadline.
Socket connect_until(const std::string& host, int port, Clock::time_point deadline, const std::string& who);
/// Writes or reads exactly `n` bytes before `deadline`.
IoResult write_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline);
IoResult read_all(const Socket& s, void* data, size_t n, Clock::time_point deadline);

}  // namespace tandem::comm::tcp
