// The dynamic loss scaler's rules (tandem/optim/loss_scaler.h, PyTorch GradScaler semantics),
// each checked on cpu and virt: the scale grows x2 after growth_interval good steps, a step
// with inf/NaN is skipped (parameters, step count and the schedule's clock unchanged) and
// halves the scale, the scale stops at the floor, gradients are unscaled exactly once (before
// clipping), and the state round-trips for checkpoints. Parameters use SGD with lr 1 and no
// momentum, so every update is param -= lr * grad and the expected values are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/virt_test_util.h"
#include "tandem/amp_ops.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/virt.h"

namespace tandem::optim {
namespace {

using tandem::testing::to_host;

Tensor on(Device d, const std::vector<float>& v) {
  Tensor h = Tensor::from_vector({static_cast<int64_t>(v.size())}, v);
  if (d.is_host()) return h;
  Tensor t = h.to(d, virt_current_stream(d.index));
  t.storage()->pending_write().synchronize();
  return t;
}

std::vector<float> values(const Tensor& t) {
  const Tensor h = to_host(t);
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

class LossScalerTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  Device dev() const { return Device{GetParam(), 0}; }
  // One parameter of 3 elements at 10, its grad `g` (already scaled, as backward leaves it).
  void SetUp() override {
    p_.name = "w";
    p_.value = on(dev(), {10, 10, 10});
    p_.grad = on(dev(), {0, 0, 0});
    OptimizerOptions o;
    o.lr = 1.0;
    opt_ = make_optimizer("sgd", {&p_}, o);
  }
  void set_grad(const std::vector<float>& g) { p_.grad = on(dev(), g); }
  // One full step with grads `g` (scaled): step (unscales), update.
  void step(LossScaler& s, const std::vector<float>& g, const std::function<double(int64_t)>& lr = {}) {
    set_grad(g);
    s.step(*opt_, lr);
    s.update();
  }
  nn::Parameter p_;
  std::unique_ptr<Optimizer> opt_;
};

LossScalerOptions interval(int64_t n, double init = 1024) {
  LossScalerOptions o;
  o.init_scale = init;
  o.rule.growth_interval = n;
  return o;
}

TEST_P(LossScalerTest, StartsAtTwoToTheSixteenth) {
  LossScaler s(dev());
  const LossScalerState st = s.read();
  EXPECT_EQ(st.scale, 65536.0f);
  EXPECT_EQ(st.growth_tracker, 0);
  EXPECT_EQ(st.skipped_steps, 0);
  EXPECT_EQ(s.options().rule.growth_interval, 2000);
}

TEST_P(LossScalerTest, GrowsAfterGrowthIntervalGoodSteps) {
  LossScaler s(dev(), interval(3));
  step(s, {1024, 2048, 0});
  step(s, {1024, 2048, 0});
  EXPECT_EQ(s.read().scale, 1024.0f);
  EXPECT_EQ(s.read().growth_tracker, 2);
  step(s, {1024, 2048, 0});
  EXPECT_EQ(s.read().scale, 2048.0f);  // the third good step doubles it
  EXPECT_EQ(s.read().growth_tracker, 0);
  // Each step applied the unscaled gradient (1, 2, 0) with lr 1.
  EXPECT_EQ(values(p_.value), (std::vector<float>{7, 4, 10}));
  EXPECT_EQ(opt_->step_count(), 3);
}

TEST_P(LossScalerTest, InfOrNanSkipsTheStepAndHalvesTheScale) {
  LossScaler s(dev(), interval(3));
  step(s, {1024, 1024, 1024});
  step(s, {1024, 1024, 1024});  // tracker at 2
  const float inf = std::numeric_limits<float>::infinity();
  step(s, {1024, inf, 1024});
  LossScalerState st = s.read();
  EXPECT_EQ(st.scale, 512.0f);
  EXPECT_EQ(st.growth_tracker, 0);  // the good-step run starts again
  EXPECT_EQ(st.skipped_steps, 1);
  EXPECT_EQ(values(p_.value), (std::vector<float>{8, 8, 8}));  // untouched by the skipped step
  EXPECT_EQ(opt_->step_count(), 2);
  step(s, {512, std::nanf(""), 512});
  st = s.read();
  EXPECT_EQ(st.scale, 256.0f);
  EXPECT_EQ(st.skipped_steps, 2);
  EXPECT_EQ(values(p_.value), (std::vector<float>{8, 8, 8}));
  EXPECT_EQ(opt_->step_count(), 2);
  step(s, {256, 256, 256});
  EXPECT_EQ(values(p_.value), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(opt_->step_count(), 3);
}

TEST_P(LossScalerTest, ScaleNeverDropsBelowOne) {
  LossScaler s(dev(), interval(2000, 3.0));
  const float inf = std::numeric_limits<float>::infinity();
  step(s, {inf, 0, 0});
  EXPECT_EQ(s.read().scale, 1.5f);
  step(s, {inf, 0, 0});
  EXPECT_EQ(s.read().scale, 1.0f);  // 0.75 is floored at 1
  step(s, {inf, 0, 0});
  EXPECT_EQ(s.read().scale, 1.0f);
  EXPECT_EQ(s.read().skipped_steps, 3);
}

TEST_P(LossScalerTest, SkippedStepsDoNotAdvanceTheSchedule) {
  LossScaler s(dev(), interval(2000, 1.0));
  // lr of a step = 0.5 * (steps taken before it + 1): 0.5, then 1.0 for the next step that runs.
  auto lr = [](int64_t done) { return 0.5 * static_cast<double>(done + 1); };
  step(s, {2, 2, 2}, lr);  // lr 0.5: 10 - 1 = 9
  EXPECT_EQ(values(p_.value), (std::vector<float>{9, 9, 9}));
  step(s, {std::nanf(""), 2, 2}, lr);  // skipped: the clock stays at 1
  step(s, {2, 2, 2}, lr);  // lr 1.0 (not 1.5): 9 - 2 = 7
  EXPECT_EQ(values(p_.value), (std::vector<float>{7, 7, 7}));
  EXPECT_EQ(opt_->step_count(), 2);
}

TEST_P(LossScalerTest, UnscalesOnceBeforeClipping) {
  LossScaler s(dev(), interval(2000, 1024.0));
  set_grad({3 * 1024, 4 * 1024, 0});  // unscaled (3, 4, 0): norm 5
  s.unscale_(opt_->params());
  Tensor norm = Tensor::empty({1}, DType::f32, dev());
  ops::clip_grad_norm_({p_.grad}, 1.0, norm);  // on the unscaled grads: norm 5 -> scale 1/5
  EXPECT_FLOAT_EQ(values(norm)[0], 5.0f);
  EXPECT_THROW(s.unscale_(opt_->params()), Error);  // a second unscale in one step
  s.step(*opt_);  // must not unscale again
  s.update();
  const std::vector<float> v = values(p_.value);
  EXPECT_NEAR(v[0], 10 - 0.6f, 1e-5);
  EXPECT_NEAR(v[1], 10 - 0.8f, 1e-5);
  EXPECT_EQ(v[2], 10.0f);
}

TEST_P(LossScalerTest, StepTwiceWithoutUpdateIsRefused) {
  LossScaler s(dev(), interval(2000, 1.0));
  set_grad({1, 1, 1});
  s.step(*opt_);
  EXPECT_THROW(s.step(*opt_), Error);
}

TEST_P(LossScalerTest, StateRoundTripsForCheckpoints) {
  LossScaler s(dev(), interval(3));
  s.load({128.0f, 2, 5});
  step(s, {128, 128, 128});  // the third good step: grows
  const LossScalerState st = s.read();
  EXPECT_EQ(st.scale, 256.0f);
  EXPECT_EQ(st.growth_tracker, 0);
  EXPECT_EQ(st.skipped_steps, 5);
  EXPECT_THROW(s.load({0.0f, 0, 0}), Error);
}

TEST_P(LossScalerTest, LossGradientIsScaledInF32BeforeRounding) {
  LossScaler s(dev(), interval(2000, 65536.0));
  // 2^-30 flushes to zero in f16 (smallest subnormal 2^-24); scaled by 2^16 in f32 first it is
  // 2^-14, an f16 normal.
  Tensor g = on(dev(), {std::ldexp(1.0f, -30), std::ldexp(1.0f, -10)});
  Tensor d = Tensor::empty({2}, DType::f16, dev());
  s.scale_loss_grad(g, d);
  const Tensor h = to_host(d);
  EXPECT_EQ(f16_to_float(h.data<uint16_t>()[0]), std::ldexp(1.0f, -14));
  EXPECT_EQ(f16_to_float(h.data<uint16_t>()[1]), 64.0f);
}

INSTANTIATE_TEST_SUITE_P(Devices, LossScalerTest, ::testing::Values(DeviceKind::cpu, DeviceKind::virt),
                         [](const auto& info) { return std::string(device_kind_name(info.param)); });

}  // namespace
}  // namespace tandem::optim
