// Gradient accumulation with the offloaded optimizer on cuda (skipped without a GPU): the
// CPU optimizer takes no bucket before the step's last micro-batch and scales each one by 1 / K
// on the device before it comes down, the op the resident step applies, so 20 steps of K = 4
// micro-batches end at the resident K = 4 run's weights bit for bit, as on virt and the cpu
// (tests/train/accum_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "dist/dist_test_util.h"
#include "tandem/train/trainer.h"
#include "train/split_test_util.h"

namespace tandem::testing {
namespace {

std::vector<std::vector<float>> trained(const train::TrainConfig& c, int64_t samples) {
  train::Trainer t(c, split_train_set(samples), split_test_set());
  t.fit();
  return trained_weights(t);
}

TEST(CudaAccumulation, OffloadedOptimizerGivesTheResidentWeightsBitForBit) {
  TD_REQUIRE_CUDA();
  for (const char* optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    train::TrainConfig c = dist_config(optimizer);
    c.device = "cuda:0";
    c.batch_size = 8;
    c.grad_accum_steps = 4;
    c.momentum = 0.9;
    const std::vector<std::vector<float>> resident = trained(c, 8 * 4 * 20);
    c.optimizer_device = "cpu";
    c.bucket_cap_mb = 0.05;
    EXPECT_EQ(trained(c, 8 * 4 * 20), resident);
    // Accumulation ran: one micro-batch a step ends elsewhere.
    train::TrainConfig once = dist_config(optimizer);
    once.device = "cuda:0";
    once.batch_size = 8;
    once.momentum = 0.9;
    EXPECT_GT(relative_difference(trained(once, 8 * 20), resident), 1e-4);
  }
}

}  // namespace
}  // namespace tandem::testing
