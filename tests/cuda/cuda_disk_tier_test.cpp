// The disk tier with the offloaded optimizer on cuda (skipped without a GPU): the master copy
// and the moments in files under a scratch folder, read ahead of each bucket's update and
// written behind its upload, give the pinned host home's weights bit for bit (f32 and bf16
// compute, AdamW and SGD with momentum), as on virt (tests/storage/cli_disk_test.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "data/temp_dir.h"
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

TEST(CudaDiskTier, DiskStateGivesTheHostHomesWeightsBitForBit) {
  TD_REQUIRE_CUDA();
  for (const char* optimizer : {"adamw", "sgd"}) {
    for (const char* precision : {"fp32", "bf16"}) {
      SCOPED_TRACE(std::string(optimizer) + " " + precision);
      TempDir dir;
      train::TrainConfig c = dist_config(optimizer);
      c.device = "cuda:0";
      c.batch_size = 8;
      c.momentum = 0.9;
      c.precision = precision;
      c.optimizer_device = "cpu";
      c.bucket_cap_mb = 0.05;
      const std::vector<std::vector<float>> host = trained(c, 8 * 20);
      c.optimizer_state_device = "disk";
      c.offload_dir = dir.str();
      EXPECT_EQ(trained(c, 8 * 20), host);
    }
  }
}

}  // namespace
}  // namespace tandem::testing
