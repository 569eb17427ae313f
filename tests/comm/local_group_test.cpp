// LocalGroup: ranks as threads. Values are checked against float64 references; reductions
// must give every rank the same bits; a missing rank must end the others with its name.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "on_ranks.h"
#include "tandem/comm/local.h"
#include "tandem/error.h"

namespace tandem::comm {
namespace {

using tandem::testing::on_ranks;

Stream host() { return runtime(DeviceKind::cpu).default_stream(0); }

// Rank r's element i: not exactly representable sums, so the order matters.
float value(int rank, int64_t i) { return 0.1f * static_cast<float>(rank + 1) + 1e-3f * static_cast<float>(i); }

TEST(LocalGroup, AllReduceSumAndMeanMatchFloat64OnEveryRankBitForBit) {
  constexpr int kRanks = 3;
  constexpr int64_t kN = 1000;
  LocalGroup group(kRanks, 30);
  std::vector<Tensor> sums(kRanks), means(kRanks);
  on_ranks(kRanks, [&](int r) {
    sums[r] = Tensor::empty({kN});
    means[r] = Tensor::empty({kN});
    for (int64_t i = 0; i < kN; ++i) sums[r].data<float>()[i] = means[r].data<float>()[i] = value(r, i);
    group.communicator(r)->all_reduce(sums[r], ReduceOp::sum, host());
    group.communicator(r)->all_reduce(means[r], ReduceOp::mean, host());
  });
  for (int64_t i = 0; i < kN; ++i) {
    double ref = 0;
    for (int r = 0; r < kRanks; ++r) ref += value(r, i);
    EXPECT_NEAR(sums[0].data<float>()[i], ref, 1e-6 * std::abs(ref)) << i;
    EXPECT_NEAR(means[0].data<float>()[i], ref / kRanks, 1e-6 * std::abs(ref)) << i;
    for (int r = 1; r < kRanks; ++r) {
      EXPECT_EQ(sums[r].data<float>()[i], sums[0].data<float>()[i]);
      EXPECT_EQ(means[r].data<float>()[i], means[0].data<float>()[i]);
    }
  }
}

TEST(LocalGroup, HalfTypesAreSummedInFloat32AndRoundedOnce) {
  constexpr int kRanks = 2;
  LocalGroup group(kRanks);
  std::vector<Tensor> bf(kRanks), h(kRanks);
  // 1 + 2^-9 twice: each rounds to 1 in bf16 (8 bits of mantissa) but 2 + 2^-8 sums exactly
  // in fp32 and rounds to 2 in bf16; in f16 (11 bits) 1 + 2^-9 is exact and so is the sum.
  on_ranks(kRanks, [&](int r) {
    bf[r] = Tensor::empty({1}, DType::bf16);
    h[r] = Tensor::empty({1}, DType::f16);
    bf[r].data<uint16_t>()[0] = float_to_bf16(1.5f);
    h[r].data<uint16_t>()[0] = float_to_f16(1.0f + 0x1p-9f);
    group.communicator(r)->all_reduce(bf[r], ReduceOp::sum, host());
    group.communicator(r)->all_reduce(h[r], ReduceOp::mean, host());
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(bf16_to_float(bf[r].data<uint16_t>()[0]), 3.0f);
    EXPECT_EQ(f16_to_float(h[r].data<uint16_t>()[0]), 1.0f + 0x1p-9f);
  }
}

TEST(LocalGroup, BroadcastAllGatherReduceScatterAndBarrier) {
  constexpr int kRanks = 3;
  LocalGroup group(kRanks);
  std::vector<Tensor> b(kRanks), gathered(kRanks), scattered(kRanks), reduced(kRanks);
  on_ranks(kRanks, [&](int r) {
    const CommunicatorPtr c = group.communicator(r);
    EXPECT_EQ(c->rank(), r);
    EXPECT_EQ(c->world_size(), kRanks);
    b[r] = Tensor::full({4}, static_cast<float>(10 * r + 1));
    c->broadcast(b[r], 2, host());
    Tensor mine = Tensor::zeros({2}, DType::i64);
    mine.fill(static_cast<double>(r));
    gathered[r] = Tensor::zeros({2 * kRanks}, DType::i64);
    c->all_gather(mine, gathered[r], host());
    Tensor send = Tensor::empty({2 * kRanks});
    for (int64_t i = 0; i < send.numel(); ++i) send.data<float>()[i] = value(r, i);
    reduced[r] = send.clone();
    scattered[r] = Tensor::empty({2});
    c->reduce_scatter(send, scattered[r], ReduceOp::mean, host());
    c->all_reduce(reduced[r], ReduceOp::mean, host());
    c->barrier(host());
  });
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(b[r].data<float>()[i], 21.0f);
    for (int64_t i = 0; i < 2 * kRanks; ++i) EXPECT_EQ(gathered[r].data<int64_t>()[i], i / 2);
    // ZeRO's reduce-scatter gives the block of the all-reduce, bit for bit.
    for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(scattered[r].data<float>()[i], reduced[r].data<float>()[2 * r + i]);
  }
}

TEST(LocalGroup, AMissingRankEndsTheOthersWithAnErrorNamingIt) {
  LocalGroup group(3, 0.5);
  std::vector<std::string> errors(3);
  const auto t0 = std::chrono::steady_clock::now();
  on_ranks(3, [&](int r) {
    if (r == 2) return;  // rank 2 never joins
    Tensor t = Tensor::full({8}, 1.0f);
    try {
      group.communicator(r)->all_reduce(t, ReduceOp::sum, host());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::distributed);
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("from rank 2"), std::string::npos) << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find("all_reduce"), std::string::npos) << errors[static_cast<size_t>(r)];
  }
  // The group is broken: a later operation fails at once instead of waiting again.
  Tensor t = Tensor::full({1}, 1.0f);
  EXPECT_THROW(group.communicator(0)->all_reduce(t, ReduceOp::sum, host()), Error);
}

TEST(LocalGroup, BadBuffersAreRefusedNamingTheOperation) {
  LocalGroup group(2);
  const CommunicatorPtr c = group.communicator(0);
  Tensor ints = Tensor::zeros({4}, DType::i32);
  try {
    c->all_reduce(ints, ReduceOp::sum, host());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("all_reduce buf: expected an f32, f16 or bf16"), std::string::npos) << e.what();
  }
  Tensor send = Tensor::zeros({3}), recv = Tensor::zeros({2});
  EXPECT_THROW(c->all_gather(send, recv, host()), Error);
  EXPECT_THROW(LocalGroup(0), Error);
  EXPECT_THROW(group.communicator(2), Error);
}

TEST(CommStubs, BuildsWithoutABackendSaySo) {
  if (!nccl_built()) {
    try {
      nccl_communicator(LocalGroup(1).communicator(0), 0);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::not_available);
      EXPECT_NE(std::string(e.what()).find("built without NCCL"), std::string::npos) << e.what();
    }
  }
  if (!mpi_built()) {
    EXPECT_THROW(mpi_world(), Error);
  }
  if (nccl_built() && mpi_built()) GTEST_SKIP() << "this build has both MPI and NCCL: no stub to check";
}

}  // namespace
}  // namespace tandem::comm
