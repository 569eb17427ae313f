// The tcp communicator (tandem/comm/tcp.h): a star through rank 0. Every message starts with
// a header naming the operation, the root and the byte count, so a rank that issued another
// collective is named instead of corrupting the buffers.
#include "tandem/comm/tcp.h"

#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "comm/comm_util.h"
#include "comm/tcp/tcp_socket.h"

namespace tandem::comm {

namespace {

using tcp::Clock;
using tcp::IoResult;

constexpr uint32_t kMagic = 0x54444d31;  // "TDM1"

enum Op : uint32_t { kHello, kAllReduce, kBroadcast, kAllGather, kReduceScatter, kBarrier };
const char* op_name(uint32_t op) {
  static const char* names[] = {"rendezvous", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};
  return op <= kBarrier ? names[op] : "an unknown operation";
}

struct Header {
  uint32_t magic = kMagic;
  uint32_t op = 0;
  int32_t a = 0;  // broadcast: the root; rendezvous: the rank
  int32_t b = 0;  // rendezvous: the world size
  uint64_t bytes = 0;
};

// dst[i] = dst[i] + src[i], n elements of `dtype`; 16-bit floats rounded once per sum (as the
// mpi communicator's user-defined operation).
void add_into(void* dst, const void* src, DType dtype, int64_t n) {
  if (dtype == DType::f32) {
    float* d = static_cast<float*>(dst);
    const float* s = static_cast<const float*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = d[i] + s[i];
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dtype == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(bf16_to_float(d[i]) + bf16_to_float(s[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_f16(f16_to_float(d[i]) + f16_to_float(s[i]));
  }
}

// Open MPI's binomial order: in round d = 1, 2, 4, ... rank v (a multiple of 2d) adds rank
// v + d's partial sum; the result is in part[0].
void binomial_sum(const std::vector<void*>& part, DType dtype, int64_t n) {
  const size_t p = part.size();
  for (size_t d = 1; d < p; d *= 2)
    for (size_t v = 0; v + d < p; v += 2 * d) add_into(part[v], part[v + d], dtype, n);
}

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(const std::string& addr, int port, int rank, int size, double timeout) : rank_(rank), size_(size) {
    TD_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, kOp, "tcp: rank {} of a world of {}: expected 0 <= rank < size",
                 rank, size);
    set_timeout_seconds(timeout);
    socks_.resize(static_cast<size_t>(size));
    if (size == 1) return;
    const auto deadline = tcp::deadline_in(timeout);
    if (rank == 0) {
      accept_ranks(port, deadline);
      return;
    }
    socks_[0] = tcp::connect_until(addr, port, deadline, fmt::format("rank {}", rank));
    Header hello;
    hello.op = kHello, hello.a = rank, hello.b = size;
    send(0, hello, nullptr, "rendezvous", deadline);
    Header welcome;
    welcome.op = kHello, welcome.b = size;
    recv(0, welcome, nullptr, "rendezvous", deadline);
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* backend() const override { return "tcp"; }

  void all_reduce(const Tensor& buf, ReduceOp op, const Stream& stream) override {
    check_buffer(buf, "all_reduce buf", true);
    stream.enqueue_host([this, buf, op] {
      run("all_reduce", [&](Clock::time_point deadline) {
        Header h;
        h.op = kAllReduce, h.bytes = buf.nbytes();
        if (rank_ != 0) {
          send(0, h, buf.raw_data(), "all_reduce", deadline);
          recv(0, h, buf.raw_data(), "all_reduce", deadline);
        } else {
          std::vector<std::vector<char>> in(static_cast<size_t>(size_));
          std::vector<void*> part{buf.raw_data()};
          for (int k = 1; k < size_; ++k) {
            in[static_cast<size_t>(k)].resize(buf.nbytes());
            recv(k, h, in[static_cast<size_t>(k)].data(), "all_reduce", deadline);
            part.push_back(in[static_cast<size_t>(k)].data());
          }
          binomial_sum(part, buf.dtype(), buf.numel());
          for (int k = 1; k < size_; ++k) send(k, h, buf.raw_data(), "all_reduce", deadline);
        }
      });
      finish_mean(buf, op, size_);
    });
  }

  void broadcast(const Tensor& buf, int root, const Stream& stream) override {
    check_buffer(buf, "broadcast buf", false);
    TD_CHECK_ARG(root >= 0 && root < size_, kOp, "broadcast: root {} outside [0, {})", root, size_);
    stream.enqueue_host([this, buf, root] {
      run("broadcast", [&](Clock::time_point deadline) {
        Header h;
        h.op = kBroadcast, h.a = root, h.bytes = buf.nbytes();
        if (rank_ != 0) {
          send(0, h, rank_ == root ? buf.raw_data() : nullptr, "broadcast", deadline);  // reached it
          recv(0, h, rank_ == root ? nullptr : buf.raw_data(), "broadcast", deadline);
          return;
        }
        for (int k = 1; k < size_; ++k)  // every rank says it reached the broadcast; the root sends
          recv(k, h, k == root ? buf.raw_data() : nullptr, "broadcast", deadline);
        for (int k = 1; k < size_; ++k) send(k, h, k == root ? nullptr : buf.raw_data(), "broadcast", deadline);
      });
    });
  }

  void all_gather(const Tensor& send_buf, const Tensor& recv_buf, const Stream& stream) override {
    check_buffer(send_buf, "all_gather send", false);
    check_buffer(recv_buf, "all_gather recv", false);
    check_blocks(send_buf, recv_buf, size_, false, "all_gather");
    stream.enqueue_host([this, send_buf, recv_buf] {
      run("all_gather", [&](Clock::time_point deadline) {
        const size_t block = send_buf.nbytes();
        char* out = static_cast<char*>(recv_buf.raw_data());
        Header h;
        h.op = kAllGather, h.bytes = block;
        if (rank_ != 0) {
          send(0, h, send_buf.raw_data(), "all_gather", deadline);
          h.bytes = recv_buf.nbytes();
          recv(0, h, out, "all_gather", deadline);
          return;
        }
        std::memmove(out, send_buf.raw_data(), block);
        for (int k = 1; k < size_; ++k) recv(k, h, out + static_cast<size_t>(k) * block, "all_gather", deadline);
        h.bytes = recv_buf.nbytes();
        for (int k = 1; k < size_; ++k) send(k, h, out, "all_gather", deadline);
      });
    });
  }

  void reduce_scatter(const Tensor& send_buf, const Tensor& recv_buf, ReduceOp op, const Stream& stream) override {
    check_buffer(send_buf, "reduce_scatter send", true);
    check_buffer(recv_buf, "reduce_scatter recv", true);
    check_blocks(send_buf, recv_buf, size_, true, "reduce_scatter");
    stream.enqueue_host([this, send_buf, recv_buf, op] {
      run("reduce_scatter", [&](Clock::time_point deadline) {
        Header h;
        h.op = kReduceScatter, h.bytes = send_buf.nbytes();
        if (rank_ != 0) {
          send(0, h, send_buf.raw_data(), "reduce_scatter", deadline);
          h.bytes = recv_buf.nbytes();
          recv(0, h, recv_buf.raw_data(), "reduce_scatter", deadline);
          return;
        }
        const size_t whole = send_buf.nbytes(), block = recv_buf.nbytes();
        std::vector<std::vector<char>> in(static_cast<size_t>(size_), std::vector<char>(whole));
        std::memcpy(in[0].data(), send_buf.raw_data(), whole);
        std::vector<void*> part{in[0].data()};
        for (int k = 1; k < size_; ++k) {
          recv(k, h, in[static_cast<size_t>(k)].data(), "reduce_scatter", deadline);
          part.push_back(in[static_cast<size_t>(k)].data());
        }
        binomial_sum(part, send_buf.dtype(), send_buf.numel());
        h.bytes = block;
        for (int k = 1; k < size_; ++k)
          send(k, h, in[0].data() + static_cast<size_t>(k) * block, "reduce_scatter", deadline);
        std::memcpy(recv_buf.raw_data(), in[0].data(), block);
      });
      finish_mean(recv_buf, op, size_);
    });
  }

  void barrier(const Stream& stream) override {
    stream.enqueue_host([this] {
      run("barrier", [&](Clock::time_point deadline) {
        Header h;
        h.op = kBarrier;
        if (rank_ != 0) {
          send(0, h, nullptr, "barrier", deadline);
          recv(0, h, nullptr, "barrier", deadline);
          return;
        }
        for (int k = 1; k < size_; ++k) recv(k, h, nullptr, "barrier", deadline);
        for (int k = 1; k < size_; ++k) send(k, h, nullptr, "barrier", deadline);
      });
    });
  }

 private:
  // Rank 0: accepts the other ranks until all joined or the deadline passed.
  void accept_ranks(int port, Clock::time_point deadline) {
    const tcp::Socket listener = tcp::listen_on(port);
    int joined = 0;
    while (joined < size_ - 1) {
      tcp::Socket s = tcp::accept_until(listener, deadline);
      if (!s.valid()) {
        std::string list;
        for (int k = 1; k < size_; ++k)
          if (!socks_[static_cast<size_t>(k)].valid()) list += (list.empty() ? "" : ", ") + std::to_string(k);
        throw_error(ErrorCode::distributed, kOp,
                    fmt::format("rank 0: tcp rendezvous on port {}: rank(s) {} did not join within {:g} s "
                                "(--dist-timeout); expected every rank to start with the same MASTER_ADDR and "
                                "MASTER_PORT",
                                port, list, timeout_seconds()));
      }
      Header hello;
      if (tcp::read_all(s, &hello, sizeof hello, deadline) != IoResult::ok || hello.magic != kMagic ||
          hello.op != kHello)
        continue;  // not a rank of ours (a port scanner, a stale run): ignore it
      TD_CHECK(hello.b == size_, ErrorCode::distributed, kOp,
               "rank 0: rank {} joined the tcp rendezvous on port {} for a world of {}, this one has {}; expected "
               "one world size (WORLD_SIZE, SLURM_NTASKS) on every rank",
               hello.a, port, hello.b, size_);
      TD_CHECK(hello.a >= 1 && hello.a < size_ && !socks_[static_cast<size_t>(hello.a)].valid(), ErrorCode::distributed,
               kOp, "rank 0: a second rank {} joined the tcp rendezvous on port {}; expected each rank once", hello.a,
               port);
      socks_[static_cast<size_t>(hello.a)] = std::move(s);
      ++joined;
    }
    Header welcome;
    welcome.op = kHello, welcome.b = size_;
    for (int k = 1; k < size_; ++k) send(k, welcome, nullptr, "rendezvous", deadline);
  }

  template <typename Body>
  void run(const char* op, Body&& body) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) throw_error(ErrorCode::distributed, kOp, fmt::format("rank {}: {} after an earlier failure", rank_, op));
    if (size_ == 1) return;
    try {
      body(tcp::deadline_in(timeout_seconds()));
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  [[noreturn]] void fail(IoResult r, int peer, const char* op) {
    failed_ = true;
    if (r == IoResult::timeout) throw_timeout(rank_, op, timeout_seconds(), fmt::format("rank {}", peer));
    throw_error(ErrorCode::distributed, kOp,
                fmt::format("rank {}: {}: rank {} {}; expected every rank to join", rank_, op, peer,
                            r == IoResult::closed ? "closed its connection (it ended or died)"
                                                  : "failed: " + std::string(std::strerror(errno))));
  }

  // Sends `h` and then h.bytes of `data` (none when data is null) to `peer`.
  void send(int peer, const Header& h, const void* data, const char* op, Clock::time_point deadline) {
    Header out = h;
    if (!data) out.bytes = 0;
    const tcp::Socket& s = socks_[static_cast<size_t>(peer)];
    IoResult r = tcp::write_all(s, &out, sizeof out, deadline);
    if (r == IoResult::ok && out.bytes) r = tcp::write_all(s, data, out.bytes, deadline);
    if (r != IoResult::ok) fail(r, peer, op);
  }

  // Receives a header from `peer`, checks it is `want` (with its bytes when `data`), then the bytes.
  void recv(int peer, const Header& want, void* data, const char* op, Clock::time_point deadline) {
    const tcp::Socket& s = socks_[static_cast<size_t>(peer)];
    Header got;
    IoResult r = tcp::read_all(s, &got, sizeof got, deadline);
    if (r != IoResult::ok) fail(r, peer, op);
    const uint64_t bytes = data ? want.bytes : 0;
    if (got.magic != kMagic || got.op != want.op || got.a != want.a || got.bytes != bytes) {
      failed_ = true;
      throw_error(ErrorCode::distributed, kOp,
                  fmt::format("rank {}: {} ({} bytes) met rank {}'s {} ({} bytes{}); expected every rank to issue the "
                              "same collectives in the same order",
                              rank_, op, bytes, peer, got.magic == kMagic ? op_name(got.op) : "garbage", got.bytes,
                              got.op == kBroadcast ? fmt::format(", root {}", got.a) : ""));
    }
    if (bytes && (r = tcp::read_all(s, data, bytes, deadline)) != IoResult::ok) fail(r, peer, op);
  }

  int rank_, size_;
  std::vector<tcp::Socket> socks_;  // rank 0: one per rank (socks_[0] unused); others: socks_[0]
  std::mutex mu_;
  bool failed_ = false;
};

}  // namespace

CommunicatorPtr tcp_communicator(const std::string& master_addr, int master_port, int rank, int world_size,
                                 double timeout_seconds) {
  return std::make_shared<TcpCommunicator>(master_addr, master_port, rank, world_size, timeout_seconds);
}

CommunicatorPtr tcp_world(double timeout_seconds) {
  static std::mutex mu;
  static CommunicatorPtr world;
  std::lock_guard<std::mutex> lock(mu);
  if (!world) {
    const LaunchInfo info = launch_info();
    world = tcp_communicator(info.master_addr, info.master_port, info.rank, info.world_size, timeout_seconds);
  }
  return world;
}

}  // namespace tandem::comm
