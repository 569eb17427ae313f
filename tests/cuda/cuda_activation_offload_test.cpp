// --activations-device cpu on cuda (skipped without a GPU): three AdamW steps of a GPT with
// --recompute blocks give the same losses and weights bit for bit whether the kept block
// inputs wait on the device or in host memory (the same kernels; the copies are exact), and
// the device holds L - 1 = 2 fewer block outputs after each forward.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "cuda/cuda_gpt_util.h"
#include "tandem/nn/gpt.h"
#include "train/place/activation_offload.h"

namespace tandem {
namespace {

using testing::cuda0;
using testing::cuda_stream;

struct OffloadSteps {
  std::vector<float> losses;
  std::vector<int64_t> held;
  std::vector<std::vector<float>> values;
};

OffloadSteps run(bool offload) {
  nn::Gpt m(nn::GptConfig{128, 32, 3, 2, 64, 1e-5f});
  m.set_recompute(true);
  m.init_parameters(4);
  m.to(cuda0());
  m.train();
  std::shared_ptr<train::ActivationOffloader> off;
  if (offload) {
    off = std::make_shared<train::ActivationOffloader>(cuda0());
    m.set_activation_offload([off](const Tensor& x) { return off->to_host(x); },
                             [off](const Tensor& x) { return off->to_device(x); });
  }
  OffloadSteps s;
  const auto metrics = testing::adamw_steps(m, 3, 128, 1e-3, [&](int) {
    cuda_stream().synchronize();
    if (off) off->synchronize();
    s.held.push_back(static_cast<int64_t>(cuda::memory_stats(0).allocated_bytes));
  });
  for (const std::vector<float>& m4 : metrics) s.losses.push_back(m4[0]);
  s.values = testing::parameter_values(m);
  return s;
}

TEST(CudaActivationOffload, BitIdenticalWithFewerDeviceBytes) {
  TD_REQUIRE_CUDA();
  const OffloadSteps kept = run(false), moved = run(true);
  EXPECT_EQ(kept.losses, moved.losses);
  EXPECT_EQ(kept.values, moved.values);
  // Two [4, 32, 64] f32 outputs (32 KiB each; the pool rounds to 512 bytes, which they are).
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(kept.held[i] - moved.held[i], 2 * 4 * 32 * 64 * 4) << "step " << i;
}

}  // namespace
}  // namespace tandem
