// Gradient accumulation (--grad-accum-steps K) with the other homes and runners:
//  - --optimizer-device cpu (delay 0): the hook takes nothing before the step's last
//    micro-batch and scales each bucket by 1 / K on the device before it comes down, the op the
//    resident step applies, so 20 steps of K = 4 end at the resident run's weights bit for bit
//    (on virt and on cpu, several buckets); with --offload-delay 1, K = 4 micro-batches of 4
//    end within the float sums' order of the delayed run of batch 16;
//  - --devices (the batch split) with K = 2: each replica sums its micro-batches, the sums are
//    combined and updated once a step: the weights of one device's K = 2 run within the split's
//    1e-5 (split_train_test.cpp's bound), and with the optimizer offloaded the split's own
//    weights bit for bit (as split_precision_test.cpp without accumulation);
//  - an epoch's batches short of a whole step are skipped (floor(batches / K) steps).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/dist_test_util.h"
#include "split_test_util.h"
#include "tandem/error.h"
#include "tandem/train/trainer.h"
#include "tandem/virt.h"

namespace tandem::testing {
namespace {

// dist_config's run (mlp, batch 16, one thread) in `steps` optimizer steps of `accum`
// micro-batches of `batch` samples each.
train::TrainConfig accum_config(const std::string& optimizer, int64_t batch, int64_t accum) {
  train::TrainConfig c = dist_config(optimizer);
  c.batch_size = batch;
  c.grad_accum_steps = accum;
  return c;
}

struct Trained {
  std::vector<std::vector<float>> weights;
  train::TrainResult result;
};

Trained run_of(const train::TrainConfig& c, int64_t samples) {
  train::Trainer t(c, split_train_set(samples), split_test_set());
  Trained out;
  out.result = t.fit();
  out.weights = trained_weights(t);
  return out;
}

// 20 steps of 4 micro-batches of 8: the offloaded optimizer (several buckets) against the
// optimizer on the device, for adamw and sgd with momentum, on virt and on cpu.
TEST(Accumulation, OffloadedOptimizerGivesTheResidentWeightsBitForBit) {
  for (const char* device : {"virt:0", "cpu"})
    for (const char* optimizer : {"adamw", "sgd"}) {
      SCOPED_TRACE(std::string(device) + " " + optimizer);
      train::TrainConfig c = accum_config(optimizer, 8, 4);
      c.device = device;
      c.momentum = 0.9;
      const Trained resident = run_of(c, 8 * 4 * 20);
      c.optimizer_device = "cpu";
      c.bucket_cap_mb = 0.05;
      const Trained offloaded = run_of(c, 8 * 4 * 20);
      EXPECT_EQ(offloaded.weights, resident.weights);
      EXPECT_EQ(offloaded.result.epochs[0].train_loss, resident.result.epochs[0].train_loss);
      // Accumulation ran: one micro-batch a step (the same first 20 batches) ends elsewhere.
      train::TrainConfig once = accum_config(optimizer, 8, 1);
      once.device = device;
      once.momentum = 0.9;
      EXPECT_GT(relative_difference(run_of(once, 8 * 20).weights, resident.weights), 1e-4);
    }
}

// With the one-step delayed update every micro-batch of a step computes at the same stale
// parameters (the exact schedule: tests/optim/offload_test.cpp), those the step of one batch
// of the same samples computes at: 20 SGD steps of 4 micro-batches of 4 end within 1e-5 of the
// largest weight of 20 steps of batch 16 (the order of the float sums), far closer than the
// delay itself moves the run (delay 1 against delay 0: about 0.3 in relative L2).
TEST(Accumulation, DelayedOffloadedUpdateIsTheLargerBatchsDelayedUpdate) {
  auto delayed = [](int64_t accum, int delay) {
    train::TrainConfig c = accum_config("sgd", 16 / accum, accum);
    c.device = "virt:0";
    c.optimizer_device = "cpu";
    c.bucket_cap_mb = 0.05;
    c.offload_delay = delay;
    return run_of(c, 16 * 20).weights;
  };
  const auto big = delayed(1, 1), accumulated = delayed(4, 1);
  const double diff = relative_difference(big, accumulated), delay_moves = relative_l2(delayed(1, 0), big);
  std::printf("delay 1: 4 micro-batches of 4 against batch 16 %.3g; delay 1 against delay 0 %.3g (relative L2)\n",
              diff, delay_moves);
  EXPECT_LT(diff, 1e-5);
  EXPECT_GT(delay_moves, 1e-2);
}

// The split over two devices with 2 micro-batches of 16 a step (20 steps): one device's run
// of the same micro-batches within 1e-5 of the largest weight, and the split with the
// optimizer on the cpu the split's own weights bit for bit.
TEST(Accumulation, SplitRunsAccumulateOnEveryReplica) {
  set_virt_device_count(2);
  train::TrainConfig one = accum_config("sgd", 16, 2);
  const Trained single = run_of(one, 16 * 2 * 20);
  for (const char* split : {"3,1", "auto"}) {
    SCOPED_TRACE(split);
    train::TrainConfig c = one;
    c.devices = "virt:0,virt:1";
    c.split = split;
    const Trained both = run_of(c, 16 * 2 * 20);
    ASSERT_EQ(both.result.split_parts.size(), 20u);
    for (const auto& p : both.result.split_parts) EXPECT_EQ(p[0] + p[1], 32);  // the step's samples
    if (std::string(split) == "3,1") {
      EXPECT_EQ(both.result.split_parts[0][0], 24);
    }
    EXPECT_LT(relative_difference(single.weights, both.weights), 1e-5);
    EXPECT_NEAR(single.result.epochs[0].train_loss, both.result.epochs[0].train_loss, 1e-5);
  }
  train::TrainConfig c = accum_config("adamw", 16, 2);
  c.devices = "virt:0,virt:1";
  c.split = "3,1";
  const Trained on_device = run_of(c, 16 * 2 * 20);
  c.optimizer_device = "cpu";
  const Trained offloaded = run_of(c, 16 * 2 * 20);
  EXPECT_EQ(offloaded.weights, on_device.weights);
}

// 20 batches of 16 with 3 micro-batches a step: 6 steps an epoch, the last 2 batches skipped,
// and the next epoch starts again at its first batch (the figures count 6 x 3 x 16 samples).
TEST(Accumulation, BatchesShortOfAWholeStepEndTheEpoch) {
  train::TrainConfig c = accum_config("sgd", 16, 3);
  c.epochs = 2;
  std::vector<int64_t> steps_at_begin;
  int64_t steps_done = 0, samples_seen = 0;
  train::TrainCallbacks cb;
  cb.on_epoch_begin = [&](int, int64_t steps) { steps_at_begin.push_back(steps); };
  cb.on_step_done = [&](int64_t) { ++steps_done; };
  cb.on_step = [&](int64_t, double, int64_t samples) { samples_seen = samples; };
  train::Trainer t(c, split_train_set(320), split_test_set());
  const train::TrainResult r = t.fit(cb);
  EXPECT_EQ(steps_at_begin, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(steps_done, 12);
  EXPECT_EQ(samples_seen, 6 * 3 * 16);  // the last epoch's samples at its last read-back
  ASSERT_EQ(r.epochs.size(), 2u);
}

}  // namespace
}  // namespace tandem::testing
