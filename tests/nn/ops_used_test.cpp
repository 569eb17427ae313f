// Module::ops_used is what a model really calls: every model trained a step and evaluated on a
// virt device behind a recording backend calls only ops that its ops_used() or the loss's list
// name, so the precision check (which asks only about those) misses none, in f32 and bf16; and
// it calls every one they name (but the ReLUs fused into a batch norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "forwarding_backend.h"
#include "nn_test_util.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/models.h"
#include "tandem/virt.h"

namespace tandem::nn {
namespace {

constexpr Device kVirt{DeviceKind::virt, 0};

bool has(const std::vector<ops::Op>& v, ops::Op op) { return std::find(v.begin(), v.end(), op) != v.end(); }

// One training step (forward, loss, backward), zero_grad, and an evaluation pass with
// count_correct, all on kVirt; returns the ops called.
std::vector<ops::Op> ops_called(Module& model, const ModelSpec& spec, DType dtype) {
  testing::BackendSwap swap(kVirt);
  const Stream s = virt_current_stream(0);
  const Tensor x = nn_test::random_tensor({2, spec.channels, spec.height, spec.width}, 5).to(dtype).to(kVirt, s);
  Tensor labels = Tensor::empty({2}, DType::i64);
  labels.data<int64_t>()[0] = 1, labels.data<int64_t>()[1] = 0;
  const Tensor dev_labels = labels.to(kVirt, s);
  CrossEntropyLoss loss;
  const Tensor metrics = Tensor::empty({4}, DType::f32, kVirt);
  ops::zero_(metrics);
  model.train();
  model.zero_grad();
  loss.forward_accumulate(model.forward(x), dev_labels, metrics);
  model.backward(loss.backward());
  model.eval();
  (void)count_correct(model.forward(x), dev_labels);
  model.train();
  return swap->calls();
}

TEST(OpsUsed, EveryModelCallsTheOpsItReports) {
  struct Case {
    std::string model;
    ModelSpec spec;
  };
  const std::vector<Case> cases{{"mlp", {1, 8, 8, 3}}, {"fmnist-cnn", {1, 8, 8, 3}}, {"resnet18-cifar", {3, 8, 8, 3}}};
  for (const Case& c : cases) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      ModulePtr m = make_model(c.model, c.spec, 1);
      if (dtype != DType::f32) m->set_compute_dtype(dtype);
      m->to(kVirt);
      const std::vector<ops::Op> reported = m->ops_used(), loss = CrossEntropyLoss::ops_used();
      const std::vector<ops::Op> called = ops_called(*m, c.spec, dtype);
      for (ops::Op op : called)
        EXPECT_TRUE(has(reported, op) || has(loss, op))
            << c.model << " " << dtype_name(dtype) << " calls " << op_name(op) << " but does not report it";
      // A ReLU fused into the BatchNorm2d before it (nn/fusion.h) is skipped but still reports
      // its ops: reporting more is safe, the check then asks about one op too many.
      for (ops::Op op : reported)
        EXPECT_TRUE(has(called, op) || op == ops::Op::relu_forward)
            << c.model << " " << dtype_name(dtype) << " reports " << op_name(op) << " but did not call it";
    }
  }
}

TEST(OpsUsed, ModelsReportOnlyTheirLayersOps) {
  ModulePtr mlp = make_model("mlp", 1);
  const std::vector<ops::Op> ops = mlp->ops_used();
  EXPECT_TRUE(has(ops, ops::Op::linear_forward));
  EXPECT_TRUE(has(ops, ops::Op::relu_backward));
  EXPECT_TRUE(has(ops, ops::Op::zero_));  // zero_grad
  EXPECT_FALSE(has(ops, ops::Op::batch_norm_forward_training));
  EXPECT_FALSE(has(ops, ops::Op::conv2d_forward));
  EXPECT_TRUE(has(make_model("fmnist-cnn", 1)->ops_used(), ops::Op::batch_norm_forward_training));
}

}  // namespace
}  // namespace tandem::nn
