#include "serve/http_connections.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

namespace tandem::serve {
namespace {

using Clock = std::chrono::steady_clock;

int to_ms(Clock::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

// poll() for `events` up to `ms` milliseconds: > 0 ready, 0 timed out, < 0 error or hang-up.
int wait_socket(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, ms);
  } while (r < 0 && errno == EINTR);
  if (r > 0 && (p.revents & (POLLERR | POLLNVAL))) return -1;
  return r;
}

void name_of(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {0}, serv[NI_MAXSERV] = {0};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// A connection's socket for httplib's request processing: reads buffered (httplib reads the
// request line and headers a byte at a time), each read bounded by the read timeout and by the
// current request's deadline, and given up when the server stops (`listening` closed); writes
// bounded by the write timeout.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, Clock::duration read_timeout, Clock::duration write_timeout, size_t max_body_bytes,
                 const std::atomic<socket_t>& listening)
      : fd_(fd),
        read_timeout_(read_timeout),
        write_timeout_(write_timeout),
        max_body_bytes_(max_body_bytes),
        listening_(listening) {}

  void start_request(Clock::duration budget) {
    deadline_ = Clock::now() + budget;
    header_bytes_ = 0;
    header_end_matched_ = 0;
    body_bytes_ = 0;
  }
  // A read timed out (the read timeout or the request's deadline) or the server stopped.
  bool cut_off() const { return cut_off_; }
  bool buffered() const { return begin_ < end_; }

  bool is_readable() const override { return buffered() || wait_read() > 0; }
  bool is_writable() const override { return wait_socket(fd_, POLLOUT, to_ms(write_timeout_)) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (!buffered()) {
      if (wait_read() <= 0) return -1;
      ssize_t n;
      do {
        n = ::recv(fd_, buf_, sizeof buf_, 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    if (!count_header_bytes(buf_ + begin_, n) || !count_body_bytes(n)) {
      cut_off_ = true;
      return -1;
    }
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (wait_socket(fd_, POLLOUT, to_ms(write_timeout_)) <= 0) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) name_of(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) name_of(addr, len, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Waits for bytes up to the read timeout or the request's deadline, whichever is first (in
  // slices, so that a stopping server does not wait for a slow client). A stopping server still
  // reads a request already under way while its bytes keep coming (each within one slice), so
  // that a client whose body was in flight gets its answer rather than a cut connection.
  int wait_read() const {
    const Clock::time_point start = Clock::now();
    const bool deadline_first = deadline_ - start < read_timeout_;
    const Clock::time_point until = deadline_first ? deadline_ : start + read_timeout_;
    for (;;) {
      const Clock::time_point now = Clock::now();
      if (now >= until) {
        cut_off_ = true;
        return 0;
      }
      const bool stopping = listening_ == INVALID_SOCKET;
      const int r = wait_socket(fd_, POLLIN, std::min(kSliceMs, to_ms(until - now) + 1));
      if (r != 0) return r;
      if (stopping) {
        cut_off_ = true;
        return 0;
      }
    }
  }

  // Counts the request line and headers (up to the blank line "\r\n\r\n") among `n` bytes
  // about to be read; false once they exceed kMaxHeaderBytes. httplib 0.11 bounds each header
  // line but not their number, and keeps them all in memory.
  bool count_header_bytes(const char* p, size_t n) {
    static constexpr char kEnd[] = "\r\n\r\n";
    for (size_t i = 0; i < n && header_end_matched_ < 4; ++i) {
      if (++header_bytes_ > kMaxHeaderBytes) return false;
      if (p[i] == kEnd[header_end_matched_]) {
        ++header_end_matched_;
      } else {
        header_end_matched_ = p[i] == '\r' ? 1 : 0;
      }
    }
    return true;
  }

  // Counts the bytes after the headers; false past max_body_bytes_. httplib checks a
  // Content-Length against its payload limit but reads a chunked body of any size.
  bool count_body_bytes(size_t n) {
    if (header_end_matched_ < 4) return true;
    body_bytes_ += n;
    return body_bytes_ <= max_body_bytes_;
  }

  static constexpr int kSliceMs = 100;
  size_t header_bytes_ = 0, body_bytes_ = 0;
  int header_end_matched_ = 0;  // of "\r\n\r\n"; 4: the headers ended, the body follows
  int fd_;
  Clock::duration read_timeout_, write_timeout_;
  size_t max_body_bytes_;
  const std::atomic<socket_t>& listening_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool cut_off_ = false;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

Clock::duration seconds_of(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

}  // namespace

bool DeadlineServer::wait_for_request(socket_t sock, bool buffered) const {
  if (buffered) return true;
  const Clock::time_point until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  // In slices, so that a stopping server (svr_sock_ closed) lets its idle connections go.
  while (svr_sock_ != INVALID_SOCKET) {
    const Clock::time_point now = Clock::now();
    if (now >= until) return false;
    const int r = wait_socket(sock, POLLIN, std::min(100, to_ms(until - now) + 1));
    if (r != 0) return r > 0;
  }
  return false;
}

bool DeadlineServer::process_and_close_socket(socket_t sock) {
  // The body's bytes on the wire: the payload limit, plus a quarter for chunked framing and
  // trailers (a client sending tiny chunks to go past that is cut off).
  const size_t max_body_bytes = payload_max_length_ + payload_max_length_ / 4 + kMaxHeaderBytes;
  DeadlineStream strm(sock, seconds_of(read_timeout_sec_, read_timeout_usec_),
                      seconds_of(write_timeout_sec_, write_timeout_usec_), max_body_bytes, svr_sock_);
  const auto budget =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(request_timeout_s_));
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && wait_for_request(sock, strm.buffered()); --left) {
    strm.start_request(budget);
    bool closed = false;
    ok = process_request(strm, left == 1, closed, nullptr);
    if (!ok || closed || strm.cut_off()) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

namespace {

class ConnectionPool final : public httplib::TaskQueue {
 public:
  ConnectionPool(int warm, int max) : warm_(warm), max_(max) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < warm_; ++i) spawn();
  }
  ~ConnectionPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(fn));
      reap();
      if (static_cast<int>(jobs_.size()) > idle_ && live_ < max_) spawn();
    }
    cv_.notify_one();
  }

  void shutdown() override {
    std::list<Worker> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      all.swap(workers_);
    }
    cv_.notify_all();
    for (Worker& w : all) w.thread.join();
  }

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  // Under mu_.
  void spawn() {
    workers_.emplace_back();
    Worker* w = &workers_.back();
    ++live_;
    w->thread = std::thread([this, w] { run(*w); });
  }
  // Joins workers that ended (under mu_; they no longer touch the pool).
  void reap() {
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void run(Worker& self) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      const bool woke = cv_.wait_for(lock, kLinger, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (!woke && live_ > warm_) break;  // an extra thread idle for kLinger ends
      if (jobs_.empty()) {
        if (stop_) break;
        continue;
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;
      lock.lock();
    }
    --live_;
    self.done = true;
  }

  static constexpr std::chrono::seconds kLinger{5};
  const int warm_, max_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<Worker> workers_;
  int live_ = 0, idle_ = 0;
  bool stop_ = false;
};

}  // namespace

httplib::TaskQueue* new_connection_pool(int warm, int max) { return new ConnectionPool(warm, max); }

}  // namespace tandem::serve
