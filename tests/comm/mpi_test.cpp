// The mpi communicator across processes. These tests run under mpirun (ctest's comm_mpi_2ranks
// and comm_mpi_3ranks start them, label mpi); a plain run of one process skips them.
#include <gtest/gtest.h>

#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/error.h"

namespace tandem::comm {
namespace {

Stream host() { return runtime(DeviceKind::cpu).default_stream(0); }

CommunicatorPtr world_or_skip() {
  if (!mpi_built()) return nullptr;
  if (launch_info().world_size < 2) return nullptr;
  return mpi_world();
}

// The tests ended normally (passed or failed): finalise MPI at exit rather than abort the job.
class MpiCleanExit : public ::testing::Environment {
 public:
  void TearDown() override { mpi_exit_cleanly(); }
};
[[maybe_unused]] ::testing::Environment* const kCleanExit = ::testing::AddGlobalTestEnvironment(new MpiCleanExit);

#define SKIP_UNLESS_MPIRUN(c)                                                                          \
  if (!(c)) GTEST_SKIP() << (mpi_built() ? "not started by mpirun: ctest -L mpi runs this under mpirun" \
                                         : "built without MPI")

TEST(MpiComm, LaunchInfoAgreesWithMpi) {
  const CommunicatorPtr c = world_or_skip();
  SKIP_UNLESS_MPIRUN(c);
  EXPECT_EQ(c->rank(), launch_info().rank);
  EXPECT_EQ(c->world_size(), launch_info().world_size);
  EXPECT_STREQ(c->backend(), "mpi");
}

TEST(MpiComm, AllReduceOfExactValues) {
  const CommunicatorPtr c = world_or_skip();
  SKIP_UNLESS_MPIRUN(c);
  const int n = c->world_size(), r = c->rank();
  Tensor sum = Tensor::empty({100}), mean = Tensor::empty({100});
  for (int64_t i = 0; i < 100; ++i) sum.data<float>()[i] = mean.data<float>()[i] = static_cast<float>(r + 4 * i);
  c->all_reduce(sum, ReduceOp::sum, host());
  c->all_reduce(mean, ReduceOp::mean, host());
  const float rank_sum = static_cast<float>(n * (n - 1) / 2);
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(sum.data<float>()[i], rank_sum + static_cast<float>(4 * i * n)) << i;
    EXPECT_EQ(mean.data<float>()[i], (rank_sum + static_cast<float>(4 * i * n)) / static_cast<float>(n)) << i;
  }
}

TEST(MpiComm, HalfPrecisionTravelsAsTwoBytesAndSums) {
  const CommunicatorPtr c = world_or_skip();
  SKIP_UNLESS_MPIRUN(c);
  Tensor h = Tensor::empty({64}, DType::f16), b = Tensor::empty({64}, DType::bf16);
  for (int64_t i = 0; i < 64; ++i) {
    h.data<uint16_t>()[i] = float_to_f16(static_cast<float>(i));
    b.data<uint16_t>()[i] = float_to_bf16(static_cast<float>(c->rank() + 1));
  }
  c->all_reduce(h, ReduceOp::sum, host());
  c->all_reduce(b, ReduceOp::sum, host());
  const int n = c->world_size();
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(f16_to_float(h.data<uint16_t>()[i]), static_cast<float>(i * n));
    EXPECT_EQ(bf16_to_float(b.data<uint16_t>()[i]), static_cast<float>(n * (n + 1) / 2));
  }
}

TEST(MpiComm, BroadcastAllGatherReduceScatterBarrier) {
  const CommunicatorPtr c = world_or_skip();
  SKIP_UNLESS_MPIRUN(c);
  const int n = c->world_size(), r = c->rank();
  Tensor b = Tensor::full({5}, static_cast<float>(r + 7));
  c->broadcast(b, n - 1, host());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(b.data<float>()[i], static_cast<float>(n - 1 + 7));
  Tensor mine = Tensor::zeros({3}, DType::i64), all = Tensor::zeros({3 * n}, DType::i64);
  mine.fill(static_cast<double>(100 + r));
  c->all_gather(mine, all, host());
  for (int64_t i = 0; i < 3 * n; ++i) EXPECT_EQ(all.data<int64_t>()[i], 100 + i / 3);
  Tensor send = Tensor::empty({2 * n}), recv = Tensor::empty({2});
  for (int64_t i = 0; i < 2 * n; ++i) send.data<float>()[i] = static_cast<float>(i * (r + 1));
  Tensor whole = send.clone();
  c->reduce_scatter(send, recv, ReduceOp::mean, host());
  c->all_reduce(whole, ReduceOp::mean, host());
  for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(recv.data<float>()[i], whole.data<float>()[2 * r + i]);
  c->barrier(host());
}

// The order the tcp communicator copies (tandem/comm/tcp.h): Open MPI's binomial tree, which for
// 3 ranks is ((x0 + x1) + x2); values whose sums round differently in another order.
TEST(MpiComm, ReductionsFollowTheBinomialTree) {
  const CommunicatorPtr c = world_or_skip();
  SKIP_UNLESS_MPIRUN(c);
  const int n = c->world_size();
  constexpr int64_t kN = 4096;
  auto x = [](int r, int64_t i) {
    const uint32_t h = static_cast<uint32_t>(r * 7919 + i) * 2654435761u;
    return static_cast<float>(h % 20011) / 977.0f * static_cast<float>(1 << (h % 17)) * ((h & 1) ? 1.0f : -1.0f);
  };
  Tensor t = Tensor::empty({kN}), send = Tensor::empty({kN / n * n}), recv = Tensor::empty({kN / n});
  for (int64_t i = 0; i < kN; ++i) t.data<float>()[i] = x(c->rank(), i);
  for (int64_t i = 0; i < kN / n * n; ++i) send.data<float>()[i] = x(c->rank(), i);
  c->all_reduce(t, ReduceOp::sum, host());
  c->reduce_scatter(send, recv, ReduceOp::sum, host());
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<float> p(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) p[static_cast<size_t>(r)] = x(r, i);
    for (int d = 1; d < n; d *= 2)
      for (int v = 0; v + d < n; v += 2 * d) p[static_cast<size_t>(v)] = p[static_cast<size_t>(v)] + p[static_cast<size_t>(v + d)];
    ASSERT_EQ(t.data<float>()[i], p[0]) << i;
    if (i / (kN / n) == c->rank()) {
      ASSERT_EQ(recv.data<float>()[i % (kN / n)], p[0]) << i;
    }
  }
}

}  // namespace
}  // namespace tandem::comm
