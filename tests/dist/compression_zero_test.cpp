// --grad-compression and --zero 1 on ranks that are threads: bytes on the wire, error
// feedback, and ZeRO-1's weights bit for bit equal to those without it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "dist/dist_test_util.h"
#include "tandem/error.h"
#include "tandem/device_traits.h"
#include "train/dist/grad_compression.h"
#include "train/dist/zero_optimizer.h"

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

// bf16/fp16 compute: each owner's update rounds the compute copy the forward reads, and the
// other ranks receive that copy too (else they run the forward with the weights of the start).
// fp16 adds the loss scaler's verdict, read back on every rank.
TEST(Zero, HalfPrecisionComputeCopiesReachEveryRank) {
  for (const char* precision : {"bf16", "fp16"}) {
    train::TrainConfig c = half_batch("adamw");
    c.precision = precision;
    const RankRun plain = two_ranks(c);
    c.zero = 1;
    const RankRun zero = two_ranks(c);
    EXPECT_EQ(zero.weights, plain.weights) << precision;
    EXPECT_EQ(zero.result.epochs.back().test_loss, plain.result.epochs.back().test_loss) << precision;
  }
}

// bf16 moments (--optimizer-moments bf16): each owned parameter's stochastic rounding draws the
// noise stream the unpartitioned optimizer draws for it, so the weights stay bit for bit.
TEST(Zero, Bf16MomentsGiveTheSameWeightsBitForBit) {
  train::TrainConfig c = half_batch("adamw");
  c.optimizer_moments = "bf16";
  const RankRun plain = two_ranks(c);
  c.zero = 1;
  const RankRun zero = two_ranks(c);
  EXPECT_EQ(zero.weights, plain.weights);
  train::TrainConfig f32 = half_batch("adamw");
  EXPECT_NE(zero.weights, two_ranks(f32).weights) << "bf16 moments should round differently from f32 ones";
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
                       Bad{"cpu", "none", "fp16", false, "--zero 1 --optimizer-device cpu with dynamic loss scaling"}}) {
    train::TrainConfig c = half_batch("adamw");
    c.zero = 1;
    c.optimizer_device = b.optimizer_device;
    c.grad_compression = b.compression;
    c.precision = b.precision;
    if (b.checkpoint) c.checkpoint_dir = "/tmp";
    if (b.checkpoint) c.checkpoint_format = "whole";  // sharded (the default for it) is supported
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

// What a checkpoint of the ZeRO-1 home asks its ZeroOptimizer: what each rank owns, and its
// gathered state (a collective) is the whole unpartitioned state on every rank, while state()
// holds this rank's part (sharded); its updates are ordered on the stream (not offloaded: the
// parameters hold the update once the stream ran it, with nothing to flush).
TEST(Zero, OwnedShareAndGatheredState) {
  comm::LocalGroup group(2, 60);
  std::vector<int> owned_params(2);
  std::vector<int64_t> owned_elements(2);
  std::vector<size_t> own(2), whole(2);
  std::vector<float> moment(2), value(2);
  on_ranks(2, [&](int r) {
    // Two parameters of 30 and 20 elements: the first goes to rank 0, the second to rank 1.
    std::vector<nn::Parameter> ps(2);
    for (size_t i = 0; i < 2; ++i) {
      const int64_t n = i == 0 ? 30 : 20;
      ps[i] = {"w" + std::to_string(i), Tensor::full({n}, 1.0f), Tensor::full({n}, 0.5f * static_cast<float>(i + 1))};
    }
    train::ZeroOptimizer opt("adam", std::vector<nn::Parameter*>{&ps[0], &ps[1]}, optim::OptimizerOptions{},
                             group.communicator(r));
    opt.step();
    const auto u = static_cast<size_t>(r);
    owned_params[u] = opt.owned_params();
    owned_elements[u] = opt.owned_elements();
    own[u] = opt.state().size();
    const std::vector<nn::NamedTensor> all = opt.gathered_state(host_stream());
    host_stream().synchronize();
    whole[u] = all.size();
    for (const nn::NamedTensor& t : all)
      if (t.name == "w1.exp_avg") moment[u] = t.tensor.data<float>()[0];
    value[u] = ps[1].value.data<float>()[0];
  });
  for (int r = 0; r < 2; ++r) {
    const auto u = static_cast<size_t>(r);
    EXPECT_LT(own[u], whole[u]);  // sharded
    EXPECT_NE(value[u], 1.0f) << "rank " << r;  // not offloaded: the update is in the parameters
    EXPECT_EQ(owned_params[u], 1) << "rank " << r;
    EXPECT_EQ(owned_elements[u], r == 0 ? 30 : 20);
    EXPECT_EQ(own[u], 3u);    // exp_avg, exp_avg_sq, step of its parameter
    EXPECT_EQ(whole[u], 6u);  // both parameters'
    // Adam's first moment after one step: (1 - beta1) g = 0.1 x 1.0 for w1, owned by rank 1.
    EXPECT_FLOAT_EQ(moment[u], 0.1f) << "rank " << r;
  }
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
  // Per tensor: fc1.weight ceil(0.01 * 200704) = 2008 and fc2.weight ceil(25.6) = 26 (index,
  // value) pairs of 8 bytes; the biases (10 and 256 values, 1 and 3 entries at 1%) dense, 4 bytes.
  EXPECT_EQ(topk.result.wire_bytes_per_step, (2008.0 + 26) * 8 + (10.0 + 256) * 4);
  EXPECT_NEAR(topk.result.wire_share, 17336.0 / (203530.0 * 4), 1e-12);
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

TEST(Compression, TopKSendsTheLargestAndKeepsTheRestForTheNextSteps) {
  comm::LocalGroup one(1);
  auto topk = train::make_grad_compressor("topk:0.25");  // 16 of 64
  std::vector<float> g(64), in(64), sent(64, 0.0f);
  for (int i = 0; i < 64; ++i) in[static_cast<size_t>(i)] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>((i * 37) % 64 + 1);
  g = in;
  EXPECT_EQ(topk->reduce(*one.communicator(0), 0, g.data(), 64), 16u * 8);
  for (int i = 0; i < 64; ++i) {  // |in| is a permutation of 1..64: the 16 largest are 49..64
    const bool top = std::abs(in[static_cast<size_t>(i)]) >= 49;
    EXPECT_EQ(g[static_cast<size_t>(i)], top ? in[static_cast<size_t>(i)] : 0.0f) << i;
    sent[static_cast<size_t>(i)] += g[static_cast<size_t>(i)];
  }
  // With no new gradient the residual drains, 16 entries a step: after 3 more steps every
  // entry was sent exactly once, with its value.
  for (int step = 0; step < 3; ++step) {
    std::fill(g.begin(), g.end(), 0.0f);
    topk->reduce(*one.communicator(0), 0, g.data(), 64);
    int nonzero = 0;
    for (int i = 0; i < 64; ++i) {
      nonzero += g[static_cast<size_t>(i)] != 0.0f;
      sent[static_cast<size_t>(i)] += g[static_cast<size_t>(i)];
    }
    EXPECT_EQ(nonzero, 16) << step;
  }
  EXPECT_EQ(sent, in);
  // A new gradient adds to what is still owed: entry 5 (sent already) and the residual is empty.
  std::fill(g.begin(), g.end(), 0.0f);
  g[5] = 0.5f;
  topk->reduce(*one.communicator(0), 0, g.data(), 64);
  EXPECT_EQ(g[5], 0.5f);
}

TEST(Compression, TopKSelectsPerTensorAndWarmsUpFromDense) {
  comm::LocalGroup one(1);
  auto topk = train::make_grad_compressor("topk:0.01", 10);
  topk->set_layout(0, {{0, 5000}, {5000, 5000}});
  std::vector<float> g(10000);
  auto fill = [&] {
    for (size_t i = 0; i < g.size(); ++i) g[i] = (i < 5000 ? 1.0f : 1e-6f) * static_cast<float>(i % 97 + 1);
  };
  // Step 0: density 1, both tensors dense (f32, 4 bytes a value), the values unchanged.
  fill();
  const std::vector<float> first = g;
  EXPECT_EQ(topk->reduce(*one.communicator(0), 0, g.data(), 10000), 10000u * 4);
  EXPECT_EQ(g, first);
  // Steps 1..9: density 0.01^(s / 10); step 5: 0.1, 500 pairs per tensor.
  for (int s = 1; s < 10; ++s) {
    fill();
    const size_t bytes = topk->reduce(*one.communicator(0), 0, g.data(), 10000);
    const double d = std::pow(0.01, s / 10.0);
    const size_t k = static_cast<size_t>(std::ceil(d * 5000));
    EXPECT_EQ(bytes, 2 * k >= 5000 ? 10000u * 4 : 2 * k * 8) << s;
  }
  // After the warm-up: 50 pairs per tensor, the tensor of small gradients included.
  fill();
  EXPECT_EQ(topk->reduce(*one.communicator(0), 0, g.data(), 10000), 100u * 8);
  int small_sent = 0;
  for (size_t i = 5000; i < g.size(); ++i) small_sent += g[i] != 0.0f;
  EXPECT_EQ(small_sent, 50);
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
