// Each layer's forward and backward against PyTorch 1.13 values (scripts/golden_layers.py):
// max|ours - torch| / max|torch| <= 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "nn_test_util.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/fusion.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {
namespace {

using nn_test::gold;
using nn_test::rel_err;
constexpr double kTol = 1e-4;

// Runs forward/backward of m on the case's x and dy and compares y, dx and parameter grads.
void check_case(Module& m, const std::string& c, const std::vector<std::pair<std::string, Parameter*>>& params) {
  for (auto& [name, p] : params) p->value.copy_from(gold(c + "." + name));
  m.zero_grad();
  m.train();
  Tensor y = m.forward(gold(c + ".x"));
  EXPECT_LE(rel_err(y, gold(c + ".y")), kTol) << c << " forward";
  Tensor dx = m.backward(gold(c + ".dy"));
  EXPECT_LE(rel_err(dx, gold(c + ".dx")), kTol) << c << " dx";
  for (auto& [name, p] : params) EXPECT_LE(rel_err(p->grad, gold(c + ".d" + name)), kTol) << c << " d" << name;
}

TEST(LayersGolden, Linear) {
  Linear m(5, 4);
  check_case(m, "linear", {{"weight", &m.weight}, {"bias", &m.bias}});
}

TEST(LayersGolden, Conv2dPadding) {
  Conv2d m(3, 4, 3, 1, 1);
  check_case(m, "conv_p1", {{"weight", &m.weight}, {"bias", &m.bias}});
}

TEST(LayersGolden, Conv2dStride) {
  Conv2d m(2, 3, 3, 2, 0);
  check_case(m, "conv_s2", {{"weight", &m.weight}, {"bias", &m.bias}});
}

TEST(LayersGolden, BatchNorm2dTraining) {
  BatchNorm2d m(3);
  check_case(m, "bn", {{"weight", &m.weight}, {"bias", &m.bias}});
}

TEST(LayersGolden, BatchNormReluFused) {
  auto bn = std::make_shared<BatchNorm2d>(3);
  Sequential s({bn, std::make_shared<ReLU>()});
  ASSERT_FALSE(s.fused_away(1));  // fusion is a pass, not done by the container
  ASSERT_EQ(fuse_batch_norm_relu(s), 1);
  ASSERT_TRUE(s.fused_away(1));
  ASSERT_TRUE(bn->fuse_relu());
  Tensor y = s.forward(gold("bn_relu.x"));
  EXPECT_LE(rel_err(y, gold("bn_relu.y")), kTol);
  Tensor dx = s.backward(gold("bn_relu.dy"));
  EXPECT_LE(rel_err(dx, gold("bn_relu.dx")), kTol);
  EXPECT_LE(rel_err(bn->weight.grad, gold("bn_relu.dweight")), kTol);
  EXPECT_LE(rel_err(bn->bias.grad, gold("bn_relu.dbias")), kTol);
}

TEST(LayersGolden, BatchNormUnfusedMatchesFused) {
  auto bn = std::make_shared<BatchNorm2d>(3);
  Sequential s({bn, std::make_shared<ReLU>()});
  fuse_batch_norm_relu(s);
  ASSERT_EQ(fuse_batch_norm_relu(s, false), 1);
  ASSERT_FALSE(s.fused_away(1));
  ASSERT_FALSE(bn->fuse_relu());
  EXPECT_LE(rel_err(s.forward(gold("bn_relu.x")), gold("bn_relu.y")), kTol);
  EXPECT_LE(rel_err(s.backward(gold("bn_relu.dy")), gold("bn_relu.dx")), kTol);
}

TEST(LayersGolden, BatchNormRunningStatsAndEval) {
  BatchNorm2d m(3, 1e-5, 0.2);
  for (int i = 0; i < 3; ++i) m.forward(gold("bn_steps.x" + std::to_string(i)));
  EXPECT_LE(rel_err(m.running_mean, gold("bn_steps.running_mean")), kTol);
  EXPECT_LE(rel_err(m.running_var, gold("bn_steps.running_var")), kTol);
  EXPECT_EQ(m.num_batches_tracked.item(), gold("bn_steps.num_batches_tracked").item());
  m.eval();
  EXPECT_LE(rel_err(m.forward(gold("bn_steps.x0")), gold("bn_steps.eval_y")), kTol);
}

TEST(LayersGolden, ReLU) {
  ReLU m;
  check_case(m, "relu", {});
}

TEST(LayersGolden, ReLUPropagatesNaNLikePyTorch) {
  // torch.relu(nan) is nan (and its gradient passes through): a NaN must not be hidden as 0,
  // or NaN weights in a hidden layer go unnoticed. Also through BatchNorm + ReLU fused.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::empty({1, 1, 1, 6});
  const float in[6] = {nan, -1.0f, 2.0f, -0.0f, inf, -inf};
  std::memcpy(x.data<float>(), in, sizeof in);
  ReLU m;
  const Tensor y = m.forward(x);
  EXPECT_TRUE(std::isnan(y.data<float>()[0]));
  EXPECT_EQ(y.data<float>()[1], 0.0f);
  EXPECT_EQ(y.data<float>()[2], 2.0f);
  EXPECT_EQ(y.data<float>()[3], 0.0f);
  EXPECT_EQ(y.data<float>()[4], inf);
  EXPECT_EQ(y.data<float>()[5], 0.0f);
  Tensor dy = Tensor::empty({1, 1, 1, 6});
  for (int i = 0; i < 6; ++i) dy.data<float>()[i] = 1.0f;
  const Tensor dx = m.backward(dy);
  const float want[6] = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dx.data<float>()[i], want[i]) << i;

  BatchNorm2d bn(1);
  bn.set_fuse_relu(true);
  bn.eval();
  const Tensor z = bn.forward(x);
  EXPECT_TRUE(std::isnan(z.data<float>()[0]));
  EXPECT_EQ(z.data<float>()[1], 0.0f);
}

TEST(LayersGolden, MaxPool2x2) {
  MaxPool2d m(2);
  check_case(m, "pool2", {});
}

TEST(LayersGolden, MaxPool3x3Stride2Padding1) {
  MaxPool2d m(3, 2, 1);
  check_case(m, "pool3", {});
}

TEST(LayersGolden, CrossEntropy) {
  for (const std::string c : {"ce", "ce_ls"}) {
    CrossEntropyLoss loss(c == "ce" ? 0.0f : 0.1f);
    Tensor l = loss.forward(gold(c + ".logits"), gold(c + ".labels"));
    EXPECT_EQ(l.dim(), 0);
    EXPECT_LE(rel_err(l, gold(c + ".loss")), kTol) << c;
    EXPECT_LE(rel_err(loss.backward(), gold(c + ".dlogits")), kTol) << c;
  }
}

}  // namespace
}  // namespace tandem::nn
