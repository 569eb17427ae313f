// Optimizer classes: factory, skipping parameters without gradients, weight-decay flag,
// state naming and restore, argument errors.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "optim/reference_optim.h"
#include "tandem/error.h"
#include "tandem/optim/adam.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/sgd.h"

namespace tandem::optim {
namespace {

nn::Parameter make_param(const std::string& name, const Shape& shape, float start) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.1f * static_cast<float>(i);
  std::vector<float> g(v.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f - 0.03f * static_cast<float>(i);
  return {name, Tensor::from_vector(shape, v), Tensor::from_vector(shape, g)};
}

std::string error_message(const std::function<void()>& fn, ErrorCode* code = nullptr) {
  try {
    fn();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

TEST(MakeOptimizer, NamesDefaultsAndUnknownName) {
  nn::Parameter p = make_param("p", {3}, 1.0f);
  EXPECT_STREQ(make_optimizer("sgd", {&p})->name(), "sgd");
  EXPECT_STREQ(make_optimizer("adam", {&p})->name(), "adam");
  auto adamw = make_optimizer("adamw", {&p});
  EXPECT_STREQ(adamw->name(), "adamw");
  EXPECT_DOUBLE_EQ(dynamic_cast<AdamW&>(*adamw).weight_decay(), 0.01);
  EXPECT_DOUBLE_EQ(dynamic_cast<Adam&>(*make_optimizer("adam", {&p})).weight_decay(), 0.0);
  ErrorCode code{};
  EXPECT_EQ(error_message([&] { make_optimizer("x", {&p}); }, &code),
            "[optimizer] unknown optimizer 'x' (expected sgd, adam or adamw)");
  EXPECT_EQ(code, ErrorCode::invalid_argument);
}

TEST(Optimizer, BadHyperParametersThrow) {
  nn::Parameter p = make_param("p", {3}, 1.0f);
  EXPECT_THROW(SGD({&p}, -0.1), Error);
  EXPECT_THROW(SGD({&p}, 0.1, 0.0, /*nesterov=*/true), Error);
  EXPECT_THROW(Adam({&p}, 1e-3, {0.9, 1.0}), Error);
  EXPECT_THROW(AdamW({&p}, 1e-3, {0.9, 0.999}, -1.0), Error);
  nn::Parameter q = make_param("p", {2}, 0.0f);
  EXPECT_NE(error_message([&] { Adam({&p, &q}); }).find("two parameters are named 'p'"),
            std::string::npos);
  Adam opt({&p});
  EXPECT_THROW(opt.set_lr(-1.0), Error);
  opt.set_lr(0.5);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.5);
}

// A parameter without a gradient (frozen or unused) is skipped: no state, no change, and
// its own Adam step count does not advance, as in PyTorch.
TEST(Optimizer, SkipsParametersWithoutGradients) {
  nn::Parameter a = make_param("a", {4}, 1.0f), b = make_param("b", {2, 3}, -1.0f);
  const std::vector<float> b0 = b.value.to_vector();
  const Tensor b_grad = b.grad;
  b.grad = Tensor();
  Adam opt({&a, &b}, 0.1);
  opt.step();
  EXPECT_EQ(b.value.to_vector(), b0);
  std::map<std::string, Tensor> st;
  for (const auto& nt : opt.state()) st[nt.name] = nt.tensor;
  EXPECT_EQ(st.count("b.exp_avg"), 0u);
  ASSERT_EQ(st.count("a.step"), 1u);
  EXPECT_EQ(st["a.step"].dtype(), DType::i64);
  b.grad = b_grad;
  b.requires_grad = false;
  opt.step();
  EXPECT_EQ(b.value.to_vector(), b0);
  b.requires_grad = true;
  opt.step();
  for (const auto& nt : opt.state()) st[nt.name] = nt.tensor;
  EXPECT_EQ(st["a.step"].item(), 3.0);
  EXPECT_EQ(st["b.step"].item(), 1.0);  // b's first update uses bias correction of step 1
  EXPECT_EQ(opt.step_count(), 3);

  // b's update equals a fresh step-1 Adam update of b.
  testing::RefAdamState r{{b0.begin(), b0.end()}, std::vector<double>(6, 0.0),
                          std::vector<double>(6, 0.0)};
  const std::vector<float> g = b_grad.to_vector();
  testing::ref_adam_step(r, {g.begin(), g.end()}, 0.1, 0.9, 0.999, 1e-8, 0.0, false, 1);
  const std::vector<float> got = b.value.to_vector();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], r.param[i], 1e-6) << i;
}

TEST(Optimizer, DecayFlagTurnsWeightDecayOff) {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    SCOPED_TRACE(name);
    nn::Parameter with = make_param("with", {5}, 2.0f), without = make_param("without", {5}, 2.0f);
    nn::Parameter none = make_param("none", {5}, 2.0f);
    without.decay = false;
    OptimizerOptions o;
    o.lr = 0.1;
    o.weight_decay = 0.5;
    auto opt = make_optimizer(name, {&with, &without}, o);
    o.weight_decay = 0.0;
    auto ref = make_optimizer(name, {&none}, o);
    // Two steps with different gradients: Adam's first step is +-lr whatever the L2 term.
    for (float scale : {1.0f, -3.0f}) {
      for (nn::Parameter* p : {&with, &without, &none}) p->grad.fill(scale * 0.1);
      opt->step();
      ref->step();
    }
    EXPECT_EQ(without.value.to_vector(), none.value.to_vector());
    EXPECT_NE(with.value.to_vector(), none.value.to_vector());
  }
}

TEST(Optimizer, ZeroGradAndGradShapeCheck) {
  nn::Parameter a = make_param("a", {3}, 1.0f), b = make_param("b", {2}, 1.0f);
  SGD opt({&a, &b}, 0.1, 0.9);
  opt.zero_grad();
  EXPECT_EQ(a.grad.to_vector(), std::vector<float>(3, 0.0f));
  const std::vector<float> a0 = a.value.to_vector();
  b.grad = Tensor::zeros({3});
  a.grad.fill(1.0);
  ErrorCode code{};
  const std::string msg = error_message([&] { opt.step(); }, &code);
  EXPECT_EQ(code, ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
  EXPECT_EQ(a.value.to_vector(), a0) << "no half step when a later gradient is bad";
  EXPECT_EQ(opt.step_count(), 0);
}

// Saving state() and step_count() and loading them into a fresh optimizer continues the run
// bit for bit.
TEST(Optimizer, StateRoundTripContinuesIdentically) {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    SCOPED_TRACE(name);
    nn::Parameter p = make_param("layer.weight", {4, 3}, 0.5f);
    OptimizerOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    auto opt = make_optimizer(name, {&p}, o);
    opt->step();
    opt->step();
    std::vector<nn::NamedTensor> saved;
    for (const auto& nt : opt->state()) saved.push_back({nt.name, nt.tensor.clone(), false});
    for (const auto& nt : saved) EXPECT_EQ(nt.name.rfind("layer.weight.", 0), 0u) << nt.name;
    EXPECT_FALSE(saved.empty());
    nn::Parameter q{"layer.weight", p.value.clone(), p.grad.clone()};
    auto resumed = make_optimizer(name, {&q}, o);
    resumed->load_state(saved, opt->step_count());
    EXPECT_EQ(resumed->step_count(), 2);
    opt->step();
    resumed->step();
    const std::vector<float> a = p.value.to_vector(), b = q.value.to_vector();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  }
}

TEST(Optimizer, LoadStateRejectsUnknownNamesAndShapes) {
  nn::Parameter p = make_param("w", {4}, 0.5f);
  Adam opt({&p});
  EXPECT_NE(error_message([&] { opt.load_state({{"v.exp_avg", Tensor::zeros({4}), false}}, 1); })
                .find("v.exp_avg"),
            std::string::npos);
  EXPECT_THROW(opt.load_state({{"w.exp_avg", Tensor::zeros({5}), false}}, 1), Error);
  EXPECT_THROW(opt.load_state({{"w.step", Tensor::zeros({}, DType::f32), false}}, 1), Error);
  EXPECT_TRUE(opt.state().empty()) << "a rejected load leaves the optimizer unchanged";
  EXPECT_EQ(opt.step_count(), 0);
}

}  // namespace
}  // namespace tandem::optim
