// The cuda backend's dtype answers: f32 for every op, zero_ for every dtype, and no 16-bit
// data type yet (its kernels implement none); a bf16 op on cuda throws the query's error.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

using testing::cuda0;

TEST(CudaDtype, AnswersF32Only) {
  TD_REQUIRE_CUDA();
  for (int i = 0; i < ops::kOpCount; ++i) {
    const ops::Op op = static_cast<ops::Op>(i);
    EXPECT_TRUE(ops::supports(op, DType::f32, cuda0())) << ops::op_name(op);
    EXPECT_EQ(ops::supports(op, DType::bf16, cuda0()), op == ops::Op::zero_) << ops::op_name(op);
    EXPECT_EQ(ops::supports(op, DType::f16, cuda0()), op == ops::Op::zero_) << ops::op_name(op);
  }
}

TEST(CudaDtype, Bf16OpThrowsTheQueryError) {
  TD_REQUIRE_CUDA();
  // empty(), not zeros(): zeros() fills on the host and refuses a cuda device.
  const Tensor x = Tensor::empty({2, 3}, DType::bf16, cuda0()), w = Tensor::empty({4, 3}, DType::bf16, cuda0());
  const Tensor y = Tensor::empty({2, 4}, DType::bf16, cuda0());
  try {
    ops::linear_forward(x, w, Tensor(), y);
    ADD_FAILURE() << "bf16 linear_forward on cuda did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[linear_forward] bf16 is not supported on cuda:0");
    EXPECT_EQ(e.code(), ErrorCode::not_available);
  }
}

}  // namespace
}  // namespace tandem
