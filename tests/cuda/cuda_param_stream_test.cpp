// --param-device cpu on cuda (skipped without a GPU): a 6-layer GPT whose parameters live in
// pinned host memory, streamed through three device slots, computes the same first-step loss and
// gradients bit for bit as the resident model (the same kernels on the same values), trains on
// with AdamW on the host to losses within 1e-4 of the resident model's device AdamW (whose
// kernel rounds differently), and holds fewer device bytes than the resident weights.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cuda/cuda_gpt_util.h"
#include "tandem/nn/gpt.h"
#include "train/place/param_stream.h"

namespace tandem {
namespace {

using testing::cuda0;

struct StreamSteps {
  std::vector<float> losses;
  std::vector<std::vector<float>> first_grads;
  int64_t device_bytes = 0;  // allocated on cuda:0 once the weights (or the slots) are there
  int64_t fetches = 0;
};

StreamSteps run(bool streamed) {
  nn::Gpt m(nn::GptConfig{128, 32, 6, 2, 64, 1e-5f});
  m.init_parameters(4);
  testing::cuda_stream().synchronize();
  const auto before = static_cast<int64_t>(cuda::memory_stats(0).allocated_bytes);
  std::unique_ptr<train::ParamStreamer> stream;
  if (streamed) {
    stream = std::make_unique<train::ParamStreamer>(m, cuda0());
  } else {
    m.to(cuda0());
  }
  testing::cuda_stream().synchronize();
  StreamSteps s;
  s.device_bytes = static_cast<int64_t>(cuda::memory_stats(0).allocated_bytes) - before;
  m.train();
  const auto metrics = testing::adamw_steps(m, 3, 128, 1e-3, {}, [&](int step) {
    if (step == 0)
      for (nn::Parameter* p : m.parameters()) s.first_grads.push_back(testing::host_floats(p->grad));
  });
  for (const std::vector<float>& m4 : metrics) s.losses.push_back(m4[0]);
  if (stream) s.fetches = stream->block_fetches();
  return s;
}

TEST(CudaParamStream, SameGradientsAndLossesWithFewerDeviceBytes) {
  TD_REQUIRE_CUDA();
  const StreamSteps resident = run(false), streamed = run(true);
  ASSERT_EQ(resident.losses.size(), 3u);
  EXPECT_EQ(resident.losses[0], streamed.losses[0]);
  EXPECT_EQ(resident.first_grads, streamed.first_grads);
  for (size_t i = 1; i < 3; ++i)
    EXPECT_NEAR(resident.losses[i], streamed.losses[i], 1e-4 * std::abs(resident.losses[i])) << "step " << i;
  EXPECT_LT(resident.losses[2], resident.losses[0]);
  // Three slots against six resident blocks (and no gradients kept between steps on the device).
  EXPECT_LT(streamed.device_bytes, resident.device_bytes);
  EXPECT_EQ(streamed.fetches, 3 * (2 * 6 - 3));  // per step: 6 forward, 3 again in backward
}

}  // namespace
}  // namespace tandem
