// The precision check asks the device only about the ops the run calls in its compute dtype:
// on a virt device whose backend has no bf16 batch norm, an mlp (no batch norm) trains in
// bf16 and the fmnist-cnn is refused naming the op; f32-only ops (the optimizer updates, the
// scaler's steps, clipping) are never asked about in bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "forwarding_backend.h"
#include "tandem/error.h"
#include "tandem/nn/models.h"
#include "train/precision_check.h"

namespace tandem::train {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    return e.what();
  }
  return "no error";
}

TEST(PrecisionCheck, AModelThatDoesNotUseAnOpIsNotRefusedForIt) {
  testing::BackendSwap swap(kVirt);
  const ops::DTypes f32{DType::f32};
  swap->support = swap->support.with(ops::Op::batch_norm_forward_training, f32)
                      .with(ops::Op::batch_norm_forward_inference, f32)
                      .with(ops::Op::batch_norm_backward, f32);
  nn::ModulePtr mlp = nn::make_model("mlp", 1), cnn = nn::make_model("fmnist-cnn", 1);
  EXPECT_EQ(error_of([&] { check_precision_support(DType::bf16, kVirt, "bf16", compute_dtype_ops(*mlp)); }),
            "no error");
  const std::string e =
      error_of([&] { check_precision_support(DType::bf16, kVirt, "bf16", compute_dtype_ops(*cnn)); });
  EXPECT_EQ(e.rfind("[train] --precision bf16: batch_norm_forward_training does not run in bf16 on virt:0 (", 0), 0u)
      << e;
  EXPECT_NE(e.find("); use --precision fp32"), std::string::npos) << e;
  // In f16 the hint leaves bf16 out: the cnn would be refused there too.
  const std::string h =
      error_of([&] { check_precision_support(DType::f16, kVirt, "fp16", compute_dtype_ops(*cnn)); });
  EXPECT_NE(h.find("batch_norm_forward_training does not run in f16 on virt:0"), std::string::npos) << h;
  EXPECT_EQ(h.find(" or bf16"), std::string::npos) << h;
}

TEST(PrecisionCheck, AsksAboutTheComputeDtypeOpsOnly) {
  nn::ModulePtr cnn = nn::make_model("fmnist-cnn", 1);
  const std::vector<ops::Op> ops = compute_dtype_ops(*cnn);
  auto has = [&](ops::Op op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  EXPECT_TRUE(has(ops::Op::conv2d_forward));
  EXPECT_TRUE(has(ops::Op::softmax_cross_entropy_accumulate));  // the loss
  EXPECT_TRUE(has(ops::Op::amp_scale));                          // the loss gradient into bf16
  for (ops::Op op : {ops::Op::adam_step, ops::Op::sgd_step, ops::Op::amp_unscale_check_, ops::Op::clip_grad_norm_,
                     ops::Op::dropout_forward})
    EXPECT_FALSE(has(op)) << op_name(op);
  // The cpu has no bf16 optimizer updates or clipping, yet a bf16 run there passes.
  EXPECT_EQ(error_of([&] { check_precision_support(DType::bf16, Device{}, "bf16", ops); }), "no error");
  EXPECT_NE(error_of([&] { check_precision_support(DType::bf16, Device{}, "bf16", {ops::Op::clip_grad_norm_}); })
                .find("clip_grad_norm_ does not run in bf16 on cpu"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::train
