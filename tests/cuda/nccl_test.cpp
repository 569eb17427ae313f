// The nccl communicator on GPUs: one rank (bootstrapped by a LocalGroup of one, so no mpirun is
// needed) and, when the machine has several GPUs, one rank per GPU on threads of this process.
// Values are exact in fp32, so the results are compared for equality.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "tandem/comm/local.h"

namespace tandem::testing {
namespace {

#define TD_REQUIRE_NCCL() \
  if (!comm::nccl_built()) GTEST_SKIP() << "built without NCCL"

Tensor counting(int64_t n, float base) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = base + static_cast<float>(i);
  return t;
}

TEST(Nccl, OneRankAllReduceBroadcastGatherScatterOnTheDevice) {
  TD_REQUIRE_CUDA();
  TD_REQUIRE_NCCL();
  comm::LocalGroup boot(1);
  const comm::CommunicatorPtr c = comm::nccl_communicator(boot.communicator(0), 0);
  EXPECT_STREQ(c->backend(), "nccl");
  const Stream s = cuda_stream();
  Tensor d = counting(1 << 20, 0.5f).to(cuda0(), s);
  c->all_reduce(d, comm::ReduceOp::sum, s);
  c->broadcast(d, 0, s);
  Tensor g = Tensor::empty({1 << 20}, DType::f32, cuda0());
  c->all_gather(d, g, s);
  Tensor m = Tensor::empty({1 << 20}, DType::f32, cuda0());
  c->reduce_scatter(g, m, comm::ReduceOp::mean, s);
  c->barrier(s);
  const Tensor back = m.to(Device{}, s);
  s.synchronize();
  for (int64_t i = 0; i < (1 << 20); i += 4099) EXPECT_EQ(back.data<float>()[i], 0.5f + static_cast<float>(i)) << i;
}

TEST(Nccl, SeveralGpusAllReduceOneRankEach) {
  TD_REQUIRE_CUDA();
  TD_REQUIRE_NCCL();
  const int n = cuda::device_count();
  if (n < 2) GTEST_SKIP() << "needs 2 or more GPUs, this machine has " << n;
  comm::LocalGroup boot(n);
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      const Device dev(DeviceKind::cuda, r);
      const Stream s = runtime(DeviceKind::cuda).default_stream(r);
      const comm::CommunicatorPtr c = comm::nccl_communicator(boot.communicator(r), r);
      Tensor d = counting(4096, static_cast<float>(r)).to(dev, s);
      c->all_reduce(d, comm::ReduceOp::sum, s);
      const Tensor back = d.to(Device{}, s);
      s.synchronize();
      got[static_cast<size_t>(r)].assign(back.data<float>(), back.data<float>() + 4096);
    });
  for (auto& t : threads) t.join();
  const float rank_sum = static_cast<float>(n * (n - 1) / 2);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < 4096; i += 97)
      EXPECT_EQ(got[static_cast<size_t>(r)][static_cast<size_t>(i)], rank_sum + static_cast<float>(n * i));
}

// The non-blocking communicator and its watchdog on one rank: a second of --dist-timeout,
// operations that finish (also after an idle pause longer than the timeout) never trip it.
TEST(Nccl, OneRankWatchdogLetsFinishedOperationsPass) {
  TD_REQUIRE_CUDA();
  TD_REQUIRE_NCCL();
  comm::LocalGroup boot(1);
  const comm::CommunicatorPtr c = comm::nccl_communicator(boot.communicator(0), 0);
  c->set_timeout_seconds(1);
  const Stream s = cuda_stream();
  Tensor d = counting(4096, 1.0f).to(cuda0(), s);
  for (int i = 0; i < 200; ++i) c->all_reduce(d, comm::ReduceOp::sum, s);
  s.synchronize();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  c->all_reduce(d, comm::ReduceOp::mean, s);
  const Tensor back = d.to(Device{}, s);
  s.synchronize();
  EXPECT_EQ(back.data<float>()[7], 8.0f);
}

// A peer that never joins: rank 0's all-reduce is aborted after the timeout and the next call
// throws the mpi communicator's message naming the operation and rank 1. Needs 2 GPUs (NCCL
// takes one GPU per rank).
TEST(Nccl, SeveralGpusAPeerThatNeverJoinsTimesOut) {
  TD_REQUIRE_CUDA();
  TD_REQUIRE_NCCL();
  const int n = cuda::device_count();
  if (n < 2) GTEST_SKIP() << "needs 2 or more GPUs, this machine has " << n;
  comm::LocalGroup boot(2);
  std::string error;
  std::thread peer([&] {
    const comm::CommunicatorPtr c = comm::nccl_communicator(boot.communicator(1), 1);
    std::this_thread::sleep_for(std::chrono::seconds(6));  // joins nothing, then goes
  });
  {
    const comm::CommunicatorPtr c = comm::nccl_communicator(boot.communicator(0), 0);
    c->set_timeout_seconds(2);
    const Stream s = cuda_stream();
    Tensor d = counting(4096, 1.0f).to(cuda0(), s);
    c->all_reduce(d, comm::ReduceOp::sum, s);
    try {
      for (int i = 0; i < 100; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        c->all_reduce(d, comm::ReduceOp::sum, s);
      }
    } catch (const Error& e) {
      error = e.what();
    }
  }
  peer.join();
  EXPECT_NE(error.find("rank 0: all_reduce got no answer within 2 s (--dist-timeout) from rank 1"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace tandem::testing
