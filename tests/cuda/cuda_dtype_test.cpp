// The cuda backend's dtype answers: f32, bf16 and f16 for every op except the optimizer
// updates and the scaler's f32 steps, zero_ for every dtype; an unsupported combination
// throws the query's error.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem {
namespace {

using testing::cuda0;

TEST(CudaDtype, AnswersF32Bf16AndF16) {
  TD_REQUIRE_CUDA();
  for (int i = 0; i < ops::kOpCount; ++i) {
    const ops::Op op = static_cast<ops::Op>(i);
    const bool master_state = op == ops::Op::adam_step || op == ops::Op::sgd_step ||
                              op == ops::Op::amp_unscale_check_ || op == ops::Op::amp_update_scale_ ||
                              op == ops::Op::clip_grad_norm_ || op == ops::Op::run_if_finite;
    EXPECT_TRUE(ops::supports(op, DType::f32, cuda0())) << ops::op_name(op);
    EXPECT_EQ(ops::supports(op, DType::bf16, cuda0()), !master_state) << ops::op_name(op);
    EXPECT_EQ(ops::supports(op, DType::f16, cuda0()), !master_state) << ops::op_name(op);
    EXPECT_EQ(ops::supports(op, DType::i32, cuda0()), op == ops::Op::zero_) << ops::op_name(op);
    EXPECT_EQ(ops::compute_note(DType::bf16, cuda0()), "");
  }
}

TEST(CudaDtype, UnsupportedDtypeThrowsTheQueryError) {
  TD_REQUIRE_CUDA();
  try {
    ops::require(ops::Op::adam_step, DType::bf16, cuda0());
    ADD_FAILURE() << "bf16 adam_step on cuda did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[adam_step] bf16 is not supported on cuda:0");
    EXPECT_EQ(e.code(), ErrorCode::not_available);
  }
}

}  // namespace
}  // namespace tandem
