// --place on a GPT with cuda (skipped without a GPU): blocks 0..1 on cuda:0, block 2 on the
// cpu, the embedding, ln_f and the tied lm_head on cuda:0. Three AdamW steps give the losses
// and weights of the same model all on cuda:0 within 1e-4 (the cpu block runs other kernels;
// the boundaries only copy), and every parameter lives on its block's device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_gpt_util.h"
#include "tandem/nn/gpt.h"
#include "train/place/placed_blocks.h"

namespace tandem {
namespace {

using testing::cuda0;
using testing::cuda_stream;

struct Steps {
  std::vector<float> losses;
  std::vector<std::vector<float>> values;
};

Steps run(const char* place) {
  nn::GptConfig c = nn::gpt_config("gpt-mini", 128);
  c.n_layer = 3;
  c.block_size = 32;
  nn::Gpt m(c);
  m.train();
  if (place) {
    std::vector<Device> devices;
    for (const DeviceSpec& spec : train::parse_block_place(place, m.blocks(), cuda0())) devices.push_back(spec.device);
    EXPECT_EQ(train::place_blocks(m, devices, cuda0()),
              "transformer.h.0..transformer.h.1 on cuda:0, transformer.h.2 on cpu (embedding, ln_f and lm_head on "
              "cuda:0)");
    EXPECT_TRUE(m.h[2]->parameters().front()->value.device().is_host());
    EXPECT_EQ(m.h[0]->parameters().front()->value.device(), cuda0());
  } else {
    m.to(cuda0());
  }
  Steps s;
  for (const std::vector<float>& m4 : testing::adamw_steps(m, 3, 128)) s.losses.push_back(m4[0] / m4[2]);
  s.values = testing::parameter_values(m);
  return s;
}

TEST(CudaPlaceGpt, BlocksOnCudaAndCpuTrainLikeAllOnCuda) {
  TD_REQUIRE_CUDA();
  const Steps one = run(nullptr), placed = run("transformer.h.2=cpu");
  ASSERT_EQ(one.losses.size(), 3u);
  EXPECT_LT(one.losses[2], one.losses[0]);  // it trained
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(placed.losses[i], one.losses[i], 1e-4 * std::abs(one.losses[i]));
  ASSERT_EQ(placed.values.size(), one.values.size());
  for (size_t p = 0; p < one.values.size(); ++p) {
    float worst = 0, top = 0;
    for (size_t i = 0; i < one.values[p].size(); ++i) {
      worst = std::max(worst, std::abs(placed.values[p][i] - one.values[p][i]));
      top = std::max(top, std::abs(one.values[p][i]));
    }
    EXPECT_LE(worst, 1e-4f * top) << "parameter " << p;
  }
}

}  // namespace
}  // namespace tandem
