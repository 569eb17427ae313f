// bf16 optimizer moments on cuda (skipped without a GPU): the device has no kernel for them, so
// a step refuses with Error(not_available) naming the way out (the host optimizer), and
// changes nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "tandem/error.h"
#include "tandem/nn/module.h"
#include "tandem/optim/adam.h"

namespace tandem {
namespace {

TEST(CudaBf16Moments, AStepOnCudaIsRefused) {
  TD_REQUIRE_CUDA();
  const Device cuda{DeviceKind::cuda, 0};
  nn::Parameter w;
  w.name = "w";
  const Stream s = testing::cuda_stream();
  w.value = Tensor::from_vector({4}, {1, 2, 3, 4}).to(cuda, s);
  w.grad = Tensor::from_vector({4}, {1, 1, 1, 1}).to(cuda, s);
  optim::AdamW opt({&w}, 1e-2);
  opt.set_moments_dtype(DType::bf16);
  try {
    opt.step();
    ADD_FAILURE() << "a bf16-moment step ran on cuda";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    EXPECT_NE(std::string(e.what()).find("--param-device cpu"), std::string::npos) << e.what();
  }
  const Tensor back = w.value.to(Device{}, s);
  s.synchronize();
  EXPECT_EQ(back.data<float>()[0], 1.0f);
}

}  // namespace
}  // namespace tandem
