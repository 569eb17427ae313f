// --grad-compression and --zero 1 on ranks that are threads: bytes on the wire, error
// feedback, and ZeRO-1's weights bit for bit equal to those without it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "dist/dist_test_util.h"
#include "tandem/error.h"
#include "train/dist/grad_compression.h"

namespace tandem::testing {
namespace {

struct RankRun {
  std::vector<std::vector<float>> weights;
  train::TrainResult result;
};

// `n` ranks (default 2: batch 8, 20 steps) with `cfg`; rank 0's weights and figures.
RankRun two_ranks(const train::TrainConfig& cfg, int n = 2) {
  comm::LocalGroup group(n, 60);
  std::vector<RankRun> runs(static_cast<size_t>(n));
  on_ranks(n, [&](int r) {
    train::Trainer t(cfg, dist_train_set(), dist_test_set(), group.communicator(r));
    runs[static_cast<size_t>(r)].result = t.fit();
    runs[static_cast<size_t>(r)].weights = trained_weights(t);
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(runs[0].weights, runs[static_cast<size_t>(r)].weights) << "rank " << r;
  return runs[0];
}

train::TrainConfig half_batch(const std::string& optimizer) {
  train::TrainConfig c = dist_config(optimizer);
  c.batch_size = 8;
  return c;
}

TEST(Zero, PartitionedOptimizerStateGivesTheSameWeightsBitForBit) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    train::TrainConfig c = half_batch(optimizer);
    const RankRun plain = two_ranks(c);
    c.zero = 1;
    const RankRun zero = two_ranks(c);
    EXPECT_EQ(zero.weights, plain.weights) << optimizer;
  }
}

// ZeRO-Offload's layout: each rank's CPU optimizer updates its block of every bucket from the
// reduce-scattered gradients, then the blocks are all-gathered and uploaded. SGD with momentum
// and AdamW (both with state); 3 ranks cut each bucket into blocks that split parameters.
TEST(Zero, OffloadedShardsGiveTheWeightsOfTheOffloadedOptimizerBitForBit) {
  for (const char* optimizer : {"sgd", "adamw"}) {
    for (int n : {2, 3}) {
      if (n == 3 && std::string(optimizer) == "sgd") continue;
      train::TrainConfig c = half_batch(optimizer);
      c.optimizer_device = "cpu";
      c.momentum = 0.9;
      c.bucket_cap_mb = 0.5;  // two buckets: fc1.weight alone (0.77 MiB), then the other three
      const RankRun plain = two_ranks(c, n);
      c.zero = 1;
      const RankRun zero = two_ranks(c, n);
      EXPECT_EQ(zero.weights, plain.weights) << optimizer << ", " << n << " ranks";
      train::Trainer untrained(c, dist_train_set(), dist_test_set());
      EXPECT_NE(zero.weights, trained_weights(untrained)) << optimizer;  // it trained
    }
  }
}

TEST(Zero, OffloadedShardsHoldTheirShareOfTheHostState) {
  comm::LocalGroup group(2, 60);
  std::vector<std::string> banners(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig c = half_batch("adamw");
    c.optimizer_device = "cpu";
    c.zero = 1;
    train::Trainer t(c, dist_train_set(), dist_test_set(), group.communicator(r));
    banners[static_cast<size_t>(r)] = t.describe();
  });
  // One bucket of 203530 floats padded to 203552 (a multiple of 32): master and gradients
  // whole (2 x 0.78 MiB), this rank's block of the two moments and its gradients (3 x 101776
  // floats, 1.16 MiB): 2.72 MiB, against 3.11 MiB for the whole state (4 x 0.78 MiB).
  for (const std::string& b : banners)
    EXPECT_NE(b.find("ZeRO-1 with the offloaded optimizer: this rank updates 1/2 of every bucket and keeps its "
                     "optimizer state; 2.72 MiB of host memory on this rank"),
              std::string::npos)
        << b;
}

TEST(Zero, CombinationsItCannotRunAreRefusedNamingTheFlags) {
  struct Bad {
    const char* optimizer_device;
    const char* compression;
    const char* precision;
    bool checkpoint;
    const char* expected;
  };
  for (const Bad& b : {Bad{"cpu", "bf16", "fp32", false, "--zero 1 --optimizer-device cpu --grad-compression bf16"},
                       Bad{"cpu", "none", "fp32", true, "--zero 1 --optimizer-device cpu with --checkpoint-dir"},
                       Bad{"device", "none", "fp16", false, "--zero 1 with dynamic loss scaling"}}) {
    train::TrainConfig c = half_batch("adamw");
    c.zero = 1;
    c.optimizer_device = b.optimizer_device;
    c.grad_compression = b.compression;
    c.precision = b.precision;
    if (b.checkpoint) c.checkpoint_dir = "/tmp";
    try {
      train::validate(c);
      ADD_FAILURE() << b.expected << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.expected), std::string::npos) << e.what();
    }
  }
}

TEST(Zero, EachRankHoldsAboutHalfTheState) {
  comm::LocalGroup group(2, 60);
  std::vector<std::string> banners(2);
  on_ranks(2, [&](int r) {
    train::TrainConfig c = half_batch("adamw");
    c.zero = 1;
    train::Trainer t(c, dist_train_set(), dist_test_set(), group.communicator(r));
    banners[static_cast<size_t>(r)] = t.describe();
  });
  // mlp: fc1.weight (200704) goes to rank 0, the other three (256 + 2560 + 10) to rank 1.
  EXPECT_NE(banners[0].find("ZeRO-1: this rank holds the optimizer state of 1 of 4 parameters (200704 of 203530"),
            std::string::npos)
      << banners[0];
  EXPECT_NE(banners[1].find("3 of 4 parameters (2826 of 203530"), std::string::npos) << banners[1];
}

TEST(Compression, HalfPrecisionHalvesTheBytesAndTopKSendsAboutOnePercent) {
  train::TrainConfig c = half_batch("adamw");
  const RankRun none = two_ranks(c);
  ASSERT_GT(none.result.wire_bytes_per_step, 0);
  // The mlp's one bucket: 203530 floats.
  EXPECT_EQ(none.result.wire_bytes_per_step, 203530.0 * 4);
  for (const char* half : {"fp16", "bf16"}) {
    c.grad_compression = half;
    const RankRun h = two_ranks(c);
    EXPECT_EQ(h.result.wire_bytes_per_step, none.result.wire_bytes_per_step / 2) << half;
    EXPECT_NEAR(h.result.epochs[0].test_accuracy, none.result.epochs[0].test_accuracy, 0.05) << half;
  }
  c.grad_compression = "topk:0.01";
  const RankRun topk = two_ranks(c);
  // ceil(0.01 * 203530) = 2036 (index, value) pairs of 8 bytes.
  EXPECT_EQ(topk.result.wire_bytes_per_step, 2036.0 * 8);
  std::printf("test accuracy after 20 steps: none %.3f, topk:0.01 %.3f\n", none.result.epochs[0].test_accuracy,
              topk.result.epochs[0].test_accuracy);
  EXPECT_GT(topk.result.epochs[0].test_accuracy, 0.3);  // it learns (10 classes: chance is 0.1)
}

TEST(Compression, TopKOfEverythingIsThePlainAllReduce) {
  train::TrainConfig c = half_batch("sgd");
  const RankRun plain = two_ranks(c);
  c.grad_compression = "topk:1";
  EXPECT_EQ(two_ranks(c).weights, plain.weights);
}

TEST(Compression, TopKKeepsWhatItDidNotSendForTheNextStep) {
  comm::LocalGroup one(1);
  auto topk = train::make_grad_compressor("topk:0.25");  // 1 of 4
  std::vector<float> g = {1.0f, 0.5f, 0.1f, -2.0f};
  EXPECT_EQ(topk->reduce(*one.communicator(0), 0, g.data(), 4), 8u);
  EXPECT_EQ(g, (std::vector<float>{0, 0, 0, -2.0f}));
  g = {0, 0, 0.2f, 0};  // residual {1, 0.5, 0.1, 0} + this
  topk->reduce(*one.communicator(0), 0, g.data(), 4);
  EXPECT_EQ(g, (std::vector<float>{1.0f, 0, 0, 0}));
  g = {0, 0, 0, 0};
  topk->reduce(*one.communicator(0), 0, g.data(), 4);
  EXPECT_EQ(g, (std::vector<float>{0, 0.5f, 0, 0}));
  g = {0, 0, 0, 0};
  topk->reduce(*one.communicator(0), 0, g.data(), 4);
  EXPECT_FLOAT_EQ(g[2], 0.1f + 0.2f);
}

TEST(Compression, BadSpecsAreRefusedNamingTheFlag) {
  for (const char* bad : {"fp8", "topk:0", "topk:2", "topk:", "topk:x"}) {
    try {
      train::check_grad_compression(bad);
      ADD_FAILURE() << bad << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--grad-compression"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(train::check_grad_compression("topk:0.01"));
}

}  // namespace
}  // namespace tandem::testing
