// --param-device cpu for a ResNet on cuda (skipped without a GPU): resnet18-cifar's residual
// blocks stream from pinned host memory through three shared device slots and train 10 AdamW
// steps to the resident model's losses and state_dict within 1e-4 (the host AdamW rounds
// differently from the device kernel; BatchNorm's running statistics come back from the device
// after each block's pass), with a smaller device high-water mark; with --optimizer-split 0.8
// the stem, the head and the first blocks stay on the device and are updated there, to the same
// figures; with --recompute blocks and --activations-device cpu, resident runs keep their bits
// and streamed runs the same figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "memory/trained_state.h"

namespace tandem {
namespace {

testing::TrainedState train_on_cuda(bool streamed, double optimizer_split = 1.0, bool recompute = false) {
  train::TrainConfig c;
  if (recompute) c.recompute = "blocks", c.activations_device = "cpu";
  c.model = "resnet18-cifar";
  c.device = "cuda:0";
  c.param_device = streamed ? "cpu" : "device";
  c.optimizer_split = optimizer_split;
  c.max_steps = 10;
  c.batch_size = 8, c.eval_batch_size = 16, c.num_workers = 0, c.progress = 0;
  c.optimizer = "adamw", c.lr = 1e-3, c.schedule = "constant", c.warmup_epochs = 0;
  return testing::train_and_keep(c, [] { return cuda::memory_stats(0).peak_allocated_bytes; });
}

void expect_close(const testing::TrainedState& streamed, const testing::TrainedState& resident) {
  EXPECT_NEAR(streamed.train_loss, resident.train_loss, 1e-4 * std::abs(resident.train_loss));
  ASSERT_EQ(streamed.state.size(), resident.state.size());
  for (size_t i = 0; i < resident.state.size(); ++i) {
    const Tensor& a = resident.state[i].tensor;
    const Tensor& b = streamed.state[i].tensor;
    ASSERT_EQ(a.shape(), b.shape()) << resident.state[i].name;
    if (a.dtype() != DType::f32) continue;
    double worst = 0, largest = 1e-6;
    for (int64_t k = 0; k < a.numel(); ++k) {
      worst = std::max(worst, static_cast<double>(std::fabs(a.data<float>()[k] - b.data<float>()[k])));
      largest = std::max(largest, static_cast<double>(std::fabs(a.data<float>()[k])));
    }
    EXPECT_LE(worst, 1e-4 * largest) << resident.state[i].name;
  }
}

TEST(CudaResNetStream, TrainsLikeTheResidentModel) {
  TD_REQUIRE_CUDA();
  const testing::TrainedState streamed = train_on_cuda(true);  // first: the high-water mark is process-wide
  const testing::TrainedState resident = train_on_cuda(false);
  expect_close(streamed, resident);
  EXPECT_LT(streamed.device_peak, resident.device_peak);
}

TEST(CudaResNetStream, OptimizerSplitTrainsLikeTheResidentModel) {
  TD_REQUIRE_CUDA();
  expect_close(train_on_cuda(true, 0.8), train_on_cuda(false));
}

// --recompute blocks with the kept inputs in host memory: resident, the same bits as without
// (the same kernels on the same inputs; the BatchNorms replay without moving their statistics);
// streamed, the resident figures within 1e-4.
TEST(CudaResNetStream, RecomputeWithHostInputsKeepsTheResults) {
  TD_REQUIRE_CUDA();
  const testing::TrainedState streamed = train_on_cuda(true, 1.0, true);
  const testing::TrainedState rc = train_on_cuda(false, 1.0, true);
  const testing::TrainedState resident = train_on_cuda(false);
  ASSERT_EQ(rc.state.size(), resident.state.size());
  for (size_t i = 0; i < resident.state.size(); ++i) {
    const Tensor& a = resident.state[i].tensor;
    const Tensor& b = rc.state[i].tensor;
    EXPECT_TRUE(a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0)
        << resident.state[i].name;
  }
  expect_close(streamed, resident);
}

}  // namespace
}  // namespace tandem
