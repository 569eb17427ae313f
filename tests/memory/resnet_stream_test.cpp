// --param-device cpu for a ResNet (train/place/stream_layout.h): resnet18-cifar's residual
// blocks, which differ in shape from stage to stage, stream through three shared device slots
// laid out per block; the stem and the head stay for the step; BatchNorm's running statistics
// move with their block. 20 AdamW steps and an evaluation give the resident model's state_dict
// bit for bit (weights and running statistics), the device's high-water mark stays under what
// the resident run allocates, and the plan names the layout.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/synthetic_dataset.h"
#include "tandem/nn/models.h"
#include "tandem/train/trainer.h"
#include "tandem/virt.h"
#include "dist/dist_test_util.h"
#include "memory/trained_state.h"
#include "train/place/stream_layout.h"

namespace tandem {
namespace {

using Trained = testing::TrainedState;

// 20 steps of batch 4 (an epoch of the 80 samples), evaluated on 16.
train::TrainConfig resnet_config() {
  train::TrainConfig c = testing::dist_config("adamw");
  c.model = "resnet18-cifar";
  c.device = "virt:0";
  c.max_steps = 20;
  c.batch_size = 4, c.eval_batch_size = 8, c.threads = 2;
  return c;
}

Trained train_it(const train::TrainConfig& c) {
  return testing::train_and_keep(c, [] { return virt_allocator(0).stats().peak_allocated_bytes; });
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST(ResNetStream, LayoutDividesTheResidualBlocks) {
  nn::ModelSpec spec;
  spec.channels = 1;
  spec.height = spec.width = 28;
  spec.num_classes = 10;
  nn::ModulePtr m = nn::make_model("resnet18-cifar", spec, 0);
  ASSERT_TRUE(train::streamable(*m));
  const train::StreamLayout l = train::stream_layout(*m, "resnet18-cifar");
  ASSERT_EQ(l.blocks.size(), 8u);  // layer1.0 .. layer4.1
  // conv1 + bn1 (weight, bias) and fc (weight, bias) stay; bn1's two statistics move with them.
  EXPECT_EQ(l.outer.size(), 5u);
  EXPECT_EQ(l.outer_buffers.size(), 2u);
  EXPECT_EQ(l.blocks[0].size(), 6u);   // two convolutions, two BatchNorms
  EXPECT_EQ(l.blocks[2].size(), 9u);   // layer2.0: and the downsample's convolution and BatchNorm
  EXPECT_EQ(l.block_buffers[2].size(), 6u);
  EXPECT_EQ(l.blocks[2][0]->name, "layer2.0.conv1.weight");
  EXPECT_EQ(l.outer_label, "stem, classifier");
  const std::vector<int> parts = train::stream_parts(*m, "resnet18-cifar");
  EXPECT_EQ(parts.front(), nn::kOuterPart);  // conv1.weight
  EXPECT_EQ(parts.back(), nn::kOuterPart);   // fc.bias
  EXPECT_EQ(parts[5], 0);                    // layer1.0.conv1.weight
}

TEST(ResNetStream, TrainsToTheResidentStateDict) {
  // Streamed first: virt's high-water mark is process-wide, so the resident run's comes after.
  train::TrainConfig c = resnet_config();
  c.param_device = "cpu";
  const Trained streamed = train_it(c);
  const Trained resident = train_it(resnet_config());
  ASSERT_EQ(resident.state.size(), streamed.state.size());
  size_t buffers = 0;
  for (size_t i = 0; i < resident.state.size(); ++i) {
    EXPECT_EQ(resident.state[i].name, streamed.state[i].name);
    EXPECT_TRUE(same_bytes(resident.state[i].tensor, streamed.state[i].tensor)) << resident.state[i].name;
    buffers += resident.state[i].name.find("running_mean") != std::string::npos;
  }
  EXPECT_EQ(buffers, 20u);  // every BatchNorm's statistics compared
  EXPECT_EQ(resident.test_loss, streamed.test_loss);
  // The device held the stem, the head and three slots of the largest block (layer4.1's two
  // 512 x 512 x 3 x 3 convolutions and their gradients), not the 11.2 M parameters, their
  // gradients and AdamW's moments.
  EXPECT_LT(streamed.device_peak, resident.device_peak / 2) << streamed.device_peak << " vs " << resident.device_peak;
}

// With --recompute blocks and --activations-device cpu as well, on a device capped below what
// the resident run needs: the residual blocks keep only their inputs, in host memory, and run
// their forwards again in backward; 20 AdamW steps still give the resident model's state_dict
// bit for bit. The resident run is refused at that cap before it allocates anything.
TEST(ResNetStream, RecomputeAndHostInputsTrainOnACappedDevice) {
  constexpr int kCapMiB = 136;  // the streamed plan is 130.1 MiB (the slots: 108 MiB)
  train::TrainConfig c = resnet_config();
  c.param_device = "cpu";
  c.recompute = "blocks";
  c.activations_device = "cpu";
  c.device = "virt:0?memory_mb=" + std::to_string(kCapMiB);
  const Trained streamed = train_it(c);
  train::TrainConfig r = resnet_config();
  r.device = "virt:1";
  const Trained resident =
      testing::train_and_keep(r, [] { return virt_allocator(1).stats().peak_allocated_bytes; });
  ASSERT_EQ(resident.state.size(), streamed.state.size());
  for (size_t i = 0; i < resident.state.size(); ++i)
    EXPECT_TRUE(same_bytes(resident.state[i].tensor, streamed.state[i].tensor)) << resident.state[i].name;
  EXPECT_EQ(resident.test_loss, streamed.test_loss);
  EXPECT_LE(streamed.device_peak, size_t{kCapMiB} << 20);
  // fp32 values, gradients and AdamW's two moments: 16 bytes per parameter.
  int64_t params = 0;
  for (const nn::NamedTensor& t : resident.state)
    if (t.name.find("running_") == std::string::npos && t.name.find("num_batches") == std::string::npos)
      params += t.tensor.numel();
  std::printf("resnet18-cifar streamed with recompute and host inputs: device peak %.1f MiB (cap %d MiB), "
              "resident %.1f MiB; fp32 AdamW training state %.1f MiB (%.2fx the cap)\n",
              static_cast<double>(streamed.device_peak) / (1 << 20), kCapMiB,
              static_cast<double>(resident.device_peak) / (1 << 20), static_cast<double>(16 * params) / (1 << 20),
              static_cast<double>(16 * params) / (kCapMiB << 20));
  // Resident at the cap: refused by the plan, naming --param-device cpu.
  train::TrainConfig capped = resnet_config();
  capped.device = "virt:2?memory_mb=" + std::to_string(kCapMiB);
  try {
    testing::train_and_keep(capped, [] { return size_t{0}; });
    ADD_FAILURE() << "the resident run at the cap was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--param-device cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
