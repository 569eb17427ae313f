// The tcp communicator (ranks as threads of this process, meeting on a loopback port): the
// collectives' values, the reduction order of Open MPI's binomial tree (so that a tcp launch
// gets the weights an mpirun launch gets), and a rank that leaves, never joins or issues
// another collective named in the others' errors.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "on_ranks.h"
#include "tandem/comm/local.h"
#include "tandem/comm/tcp.h"
#include "tandem/error.h"

namespace tandem::comm {
namespace {

using tandem::testing::on_ranks;

Stream host() { return runtime(DeviceKind::cpu).default_stream(0); }

// A port free a moment ago (the kernel's choice).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Runs f(rank, communicator) for `n` ranks meeting on a fresh port.
void with_ranks(int n, const std::function<void(int, Communicator&)>& f, double timeout = 30) {
  const int port = free_port();
  on_ranks(n, [&](int r) {
    CommunicatorPtr c = tcp_communicator("127.0.0.1", port, r, n, timeout);
    f(r, *c);
  });
}

TEST(TcpComm, CollectivesGiveExactValuesOn2And3Ranks) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(n);
    with_ranks(n, [n](int r, Communicator& c) {
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.world_size(), n);
      EXPECT_STREQ(c.backend(), "tcp");
      Tensor sum = Tensor::empty({100}), mean = Tensor::empty({100});
      for (int64_t i = 0; i < 100; ++i) sum.data<float>()[i] = mean.data<float>()[i] = static_cast<float>(r + 4 * i);
      c.all_reduce(sum, ReduceOp::sum, host());
      c.all_reduce(mean, ReduceOp::mean, host());
      const float rank_sum = static_cast<float>(n * (n - 1) / 2);
      for (int64_t i = 0; i < 100; ++i) {
        EXPECT_EQ(sum.data<float>()[i], rank_sum + static_cast<float>(4 * i * n));
        EXPECT_EQ(mean.data<float>()[i], (rank_sum + static_cast<float>(4 * i * n)) / static_cast<float>(n));
      }
      Tensor b = Tensor::full({5}, static_cast<float>(r + 7));
      c.broadcast(b, n - 1, host());
      for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(b.data<float>()[i], static_cast<float>(n - 1 + 7));
      Tensor mine = Tensor::zeros({3}, DType::i64), all = Tensor::zeros({3 * n}, DType::i64);
      mine.fill(static_cast<double>(100 + r));
      c.all_gather(mine, all, host());
      for (int64_t i = 0; i < 3 * n; ++i) EXPECT_EQ(all.data<int64_t>()[i], 100 + i / 3);
      Tensor send = Tensor::empty({2 * n}), recv = Tensor::empty({2});
      for (int64_t i = 0; i < 2 * n; ++i) send.data<float>()[i] = static_cast<float>(i * (r + 1));
      Tensor whole = send.clone();
      c.reduce_scatter(send, recv, ReduceOp::mean, host());
      c.all_reduce(whole, ReduceOp::mean, host());
      for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(recv.data<float>()[i], whole.data<float>()[2 * r + i]);
      Tensor h = Tensor::empty({64}, DType::f16), bf = Tensor::empty({64}, DType::bf16);
      for (int64_t i = 0; i < 64; ++i) {
        h.data<uint16_t>()[i] = float_to_f16(static_cast<float>(i));
        bf.data<uint16_t>()[i] = float_to_bf16(static_cast<float>(r + 1));
      }
      c.all_reduce(h, ReduceOp::sum, host());
      c.all_reduce(bf, ReduceOp::sum, host());
      for (int64_t i = 0; i < 64; ++i) {
        EXPECT_EQ(f16_to_float(h.data<uint16_t>()[i]), static_cast<float>(i * n));
        EXPECT_EQ(bf16_to_float(bf.data<uint16_t>()[i]), static_cast<float>(n * (n + 1) / 2));
      }
      c.barrier(host());
    });
  }
}

// 3 ranks: ((x0 + x1) + x2), rank order, as LocalGroup and Open MPI's libnbc; 4 ranks:
// (x0 + x1) + (x2 + x3), the binomial tree. Values whose sums round differently by order.
TEST(TcpComm, ReductionsFollowOpenMpisBinomialTree) {
  constexpr int64_t kN = 4096;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> x(4, std::vector<float>(kN));
  for (auto& v : x)
    for (float& e : v) e = u(gen) * (1 << (gen() % 20));
  for (int n : {3, 4}) {
    SCOPED_TRACE(n);
    std::vector<Tensor> out(static_cast<size_t>(n)), scattered(static_cast<size_t>(n));
    with_ranks(n, [&](int r, Communicator& c) {
      Tensor t = Tensor::from_vector({kN}, x[static_cast<size_t>(r)]);
      Tensor rs = Tensor::empty({kN / n});
      Tensor send = Tensor::from_vector({kN / n * n}, std::vector<float>(x[static_cast<size_t>(r)].begin(),
                                                                         x[static_cast<size_t>(r)].begin() + kN / n * n));
      c.all_reduce(t, ReduceOp::sum, host());
      c.reduce_scatter(send, rs, ReduceOp::sum, host());
      out[static_cast<size_t>(r)] = t;
      scattered[static_cast<size_t>(r)] = rs;
    });
    int64_t differs_from_rank_order = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const float want = n == 3 ? (x[0][i] + x[1][i]) + x[2][i] : (x[0][i] + x[1][i]) + (x[2][i] + x[3][i]);
      const float linear = ((x[0][i] + x[1][i]) + x[2][i]) + (n == 4 ? x[3][i] : 0.0f);
      differs_from_rank_order += want != linear;
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(out[static_cast<size_t>(r)].data<float>()[i], want) << i << " rank " << r;
      }
      if (i < kN / n * n) {
        ASSERT_EQ(scattered[static_cast<size_t>(i / (kN / n))].data<float>()[i % (kN / n)], want) << i;
      }
    }
    if (n == 4) {
      EXPECT_GT(differs_from_rank_order, 0) << "the values do not tell the orders apart";
    }
  }
  // And LocalGroup (rank order from 0) gives the 3-rank tcp bits.
  LocalGroup group(3, 30);
  std::vector<Tensor> local(3);
  on_ranks(3, [&](int r) {
    local[static_cast<size_t>(r)] = Tensor::from_vector({kN}, x[static_cast<size_t>(r)]);
    group.communicator(r)->all_reduce(local[static_cast<size_t>(r)], ReduceOp::sum, host());
  });
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(local[0].data<float>()[i], (x[0][i] + x[1][i]) + x[2][i]) << i;
}

TEST(TcpComm, ARankThatLeavesIsNamed) {
  std::string error;
  with_ranks(2, [&](int r, Communicator& c) {
    if (r == 1) return;  // leaves: its connection closes
    Tensor t = Tensor::full({4}, 1.0f);
    try {
      c.all_reduce(t, ReduceOp::sum, host());
    } catch (const Error& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("rank 0: all_reduce: rank 1 closed its connection"), std::string::npos) << error;
}

TEST(TcpComm, ARankThatNeverJoinsIsNamedAfterTheTimeout) {
  try {
    tcp_communicator("127.0.0.1", free_port(), 0, 3, 0.5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::distributed);
    EXPECT_NE(std::string(e.what()).find("rank(s) 1, 2 did not join within 0.5 s"), std::string::npos) << e.what();
  }
}

TEST(TcpComm, AnotherCollectiveIsNamedAndEndsBothRanks) {
  std::vector<std::string> errors(2);
  with_ranks(
      2,
      [&](int r, Communicator& c) {
        try {
          if (r == 0) {
            Tensor t = Tensor::full({4}, 1.0f);
            c.all_reduce(t, ReduceOp::sum, host());
          } else {
            c.barrier(host());
          }
        } catch (const Error& e) {
          errors[static_cast<size_t>(r)] = e.what();
        }
      },
      2);
  EXPECT_NE(errors[0].find("rank 0: all_reduce (16 bytes) met rank 1's barrier"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 1: barrier"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace tandem::comm
