// The device seam on a GPU: the current stream of a cuda device is the stream its ops run on,
// `tandem info`'s listing shows the device and its properties, and cuda takes no options.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

using testing::cuda0;

TEST(CudaSeam, CurrentStreamIsTheOpsStream) {
  TD_REQUIRE_CUDA();
  Runtime& rt = runtime_for(cuda0());
  EXPECT_EQ(rt.current_stream(0).impl(), rt.default_stream(0).impl());
  // An op enqueued on it, then a copy ordered after it on the same stream, sees its result.
  Tensor x = Tensor::empty({1000}, DType::f32, cuda0());  // zeros() is host-only
  ops::zero_(x);
  ops::scale_(x, 2.0f);
  Tensor h = Tensor::empty({1000});
  Tensor src = testing::random_tensor({1000}, 3);
  Tensor d = src.to(cuda0(), rt.current_stream(0));
  ops::add_(x, d, 1.0f);
  rt.copy_async(h.raw_data(), Device{}, x.raw_data(), cuda0(), 1000 * sizeof(float), rt.current_stream(0));
  rt.current_stream(0).synchronize();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(h.data<float>()[i], src.data<float>()[i]) << i;
}

TEST(CudaSeam, ListingShowsTheDevice) {
  TD_REQUIRE_CUDA();
  const std::string s = describe_devices();
  EXPECT_NE(s.find("  cuda:0  allocated "), std::string::npos) << s;
  EXPECT_NE(s.find("    cuda:0 " + cuda::device_properties(0).name), std::string::npos) << s;
}

TEST(CudaSeam, TakesNoOptions) {
  TD_REQUIRE_CUDA();
  EXPECT_NO_THROW(configure_device(DeviceSpec::parse("cuda:0")));
  try {
    configure_device(DeviceSpec::parse("cuda:0?speed=0.5"));
    ADD_FAILURE() << "options on cuda were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
}

}  // namespace
}  // namespace tandem
