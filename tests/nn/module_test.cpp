// Module behaviour: train/eval modes, dropout determinism, state_dict names and shapes of the
// reference CNN vs PyTorch's, init bounds and determinism, errors, and guard values around
// op outputs (no out-of-bounds writes).
#include <gtest/gtest.h>

#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "nn_test_util.h"
#include "tandem/backend.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/dropout.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/models.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

using nn_test::random_tensor;
using nn_test::rel_err;

TEST(Module, BatchNormTrainUsesBatchStatsEvalUsesRunning) {
  BatchNorm2d bn(2);
  Tensor x = random_tensor({4, 2, 3, 3}, 1, 2.0f, 6.0f);
  Tensor y = bn.forward(x).clone();
  // Training output is normalised per channel: mean ~0 and biased variance ~1.
  for (int64_t c = 0; c < 2; ++c) {
    double s = 0, sq = 0;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t i = 0; i < 9; ++i) {
        const double v = y.item((n * 2 + c) * 9 + i);
        s += v;
        sq += v * v;
      }
    EXPECT_NEAR(s / 36, 0.0, 1e-5);
    EXPECT_NEAR(sq / 36, 1.0, 1e-3);
  }
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  Tensor rm = bn.running_mean.clone();
  bn.eval();
  Tensor ye = bn.forward(x).clone();
  // Eval: y = (x - running_mean) / sqrt(running_var + eps); running stats unchanged.
  EXPECT_EQ(rel_err(bn.running_mean, rm), 0.0);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  const double expect0 = (x.item(0) - bn.running_mean.item(0)) / std::sqrt(bn.running_var.item(0) + 1e-5);
  EXPECT_NEAR(ye.item(0), expect0, 1e-4);
  EXPECT_THROW(bn.backward(ye), Error);
}

TEST(Module, DropoutIdentityInEvalAndDeterministicPerSeed) {
  Dropout a(0.5f, 7), b(0.5f, 7), c(0.5f, 8);
  Tensor x = random_tensor({1000}, 2, 1.0f, 2.0f);
  Tensor ya = a.forward(x).clone(), yb = b.forward(x).clone(), yc = c.forward(x).clone();
  EXPECT_EQ(rel_err(ya, yb), 0.0);
  EXPECT_GT(rel_err(ya, yc), 0.1);
  Tensor ya2 = a.forward(x).clone();  // next call: new counter, new mask
  EXPECT_GT(rel_err(ya, ya2), 0.1);
  a.eval();
  EXPECT_EQ(rel_err(a.forward(x), x), 0.0);
}

TEST(Module, FmnistCnnStateDictMatchesTorch) {
  std::map<std::string, std::string> meta;
  load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/layers.safetensors", &meta);
  std::string expected = meta.at("fmnist_cnn_state"), ours;
  ModulePtr m = make_model("fmnist-cnn", 0);
  for (const NamedTensor& t : m->state_dict()) {
    std::vector<std::string> dims;
    for (int64_t d : t.tensor.shape()) dims.push_back(std::to_string(d));
    if (!ours.empty()) ours.push_back(';');
    ours.append(fmt::format("{}:{}", t.name, fmt::join(dims, "x")));
  }
  EXPECT_EQ(ours, expected);
  EXPECT_EQ(m->num_parameters(), 320 + 32 * 2 + 18496 + 64 * 2 + 3136 * 128 + 128 + 1290);
  auto st = m->state_dict();
  EXPECT_EQ(st[6].name, "1.num_batches_tracked");
  EXPECT_EQ(st[6].tensor.dtype(), DType::i64);
  EXPECT_EQ(st[6].tensor.dim(), 0);
}

TEST(Module, InitIsPyTorchDefaultAndDeterministic) {
  ModulePtr a = make_model("fmnist-cnn", 5), b = make_model("fmnist-cnn", 5), c = make_model("fmnist-cnn", 6);
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  ASSERT_EQ(pa.size(), 12u);
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(rel_err(pa[i]->value, pb[i]->value), 0.0) << pa[i]->name;
  EXPECT_GT(rel_err(pa[0]->value, pc[0]->value), 0.1);
  // 0.weight: fan_in 9 -> U(-1/3, 1/3); 9.weight: fan_in 3136 -> U(-1/56, 1/56); BN weight 1, bias 0.
  auto check_bound = [](const Parameter* p, double bound) {
    double mx = 0;
    for (int64_t i = 0; i < p->value.numel(); ++i) mx = std::max(mx, std::fabs(p->value.item(i)));
    EXPECT_LE(mx, bound) << p->name;
    EXPECT_GT(mx, 0.9 * bound) << p->name;
  };
  check_bound(pa[0], 1.0 / 3.0);
  check_bound(pa[1], 1.0 / 3.0);
  check_bound(pa[8], 1.0 / 56.0);
  EXPECT_EQ(pa[2]->name, "1.weight");
  EXPECT_EQ(pa[2]->value.item(5), 1.0);
  EXPECT_EQ(pa[3]->value.item(5), 0.0);
}

TEST(Module, ModelsRunAndUnknownNameThrows) {
  for (const std::string& name : model_names()) {
    ModulePtr m = make_model(name, 1);
    Tensor y = m->forward(random_tensor({3, 1, 28, 28}, 3));
    EXPECT_EQ(shape_str(y.shape()), "[3, 10]") << name;
    EXPECT_FALSE(m->backward(random_tensor({3, 10}, 4)).defined()) << name;  // input is data
    m->set_needs_input_grad(true);
    m->forward(random_tensor({3, 1, 28, 28}, 3));
    Tensor dx = m->backward(random_tensor({3, 10}, 4));
    EXPECT_EQ(shape_str(dx.shape()), "[3, 1, 28, 28]") << name;
  }
  try {
    make_model("resnet", 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "[model] unknown model 'resnet' (expected fmnist-cnn, mlp, resnet18, resnet34, resnet50, resnet18-cifar, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt-mini)");
  }
}

TEST(Module, ErrorsNameTheOpAndShapes) {
  Linear l(4, 3);
  try {
    l.forward(Tensor::zeros({2, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[Linear] expected input [N, 4], found [2, 5]"), std::string::npos);
  }
  EXPECT_THROW(l.backward(Tensor::zeros({2, 3})), Error);
  CrossEntropyLoss ce;
  Tensor labels = nn_test::labels_tensor({0, 7});
  EXPECT_THROW(ce.forward(Tensor::zeros({2, 5}), labels), Error);
  EXPECT_THROW(ops::backend_for(Device(DeviceKind::cuda), "conv2d_forward"), Error);
  try {
    ops::backend_for(Device(DeviceKind::cuda), "conv2d_forward");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::not_available);
    EXPECT_STREQ(e.what(), "[conv2d_forward] no cuda backend in this build");
  }
}

TEST(Module, CountCorrect) {
  Tensor logits = Tensor::from_vector({3, 3}, {0, 2, 1, 5, 1, 1, 0, 0, 3});
  Tensor labels = nn_test::labels_tensor({1, 0, 1});
  EXPECT_EQ(count_correct(logits, labels), 2);
}

// The device-side accumulation equals the host-returning forward and count_correct, adds up
// over calls, and reports (rather than throws for) labels outside [0, C).
TEST(Module, LossAccumulateMatchesForwardAndCountCorrect) {
  Tensor logits = Tensor::from_vector({4, 3}, {0, 2, 1, 5, 1, 1, 0, 0, 3, -1, 4, 4});
  Tensor labels = nn_test::labels_tensor({1, 0, 1, 2});
  for (float e : {0.0f, 0.2f}) {
    CrossEntropyLoss ce(e);
    const double mean = ce.forward(logits, labels).item();
    const Tensor grad = ce.backward().clone();
    Tensor metrics = Tensor::zeros({4});
    ce.forward_accumulate(logits, labels, metrics);
    ce.forward_accumulate(logits, labels, metrics);
    EXPECT_NEAR(metrics.item(0), 2 * 4 * mean, 1e-5);
    EXPECT_EQ(metrics.item(1), 2 * 2);  // rows 0 and 1 are right; row 3 ties 1 and 2, first wins
    EXPECT_EQ(metrics.item(2), 2 * 4);
    EXPECT_EQ(metrics.item(3), 0);
    EXPECT_EQ(ce.backward().to_vector(), grad.to_vector()) << "backward after forward_accumulate";
  }
  // Float64 reference for row 0 without smoothing: logsumexp(0, 2, 1) - 2.
  Tensor one = Tensor::zeros({4});
  CrossEntropyLoss ce;
  ce.forward_accumulate(logits.narrow(0, 0, 1), labels.narrow(0, 0, 1), one);
  EXPECT_NEAR(one.item(0), std::log(std::exp(0.0) + std::exp(2.0) + std::exp(1.0)) - 2.0, 1e-6);

  Tensor bad = nn_test::labels_tensor({1, 3, -1, 2});
  Tensor m = Tensor::zeros({4});
  EXPECT_NO_THROW(ce.forward_accumulate(logits, bad, m));
  EXPECT_EQ(m.item(3), 2);
  EXPECT_EQ(m.item(2), 4);

  Tensor nan_logits = logits.clone();
  nan_logits.data<float>()[4] = std::nanf("");
  Tensor mn = Tensor::zeros({4});
  ce.forward_accumulate(nan_logits, labels, mn);
  EXPECT_TRUE(std::isnan(mn.item(0)));
}

// Outputs written into the middle of a buffer whose guard values must survive.
class Guarded {
 public:
  explicit Guarded(const Shape& s) : n_(shape_numel(s)), buf_(static_cast<size_t>(n_ + 2 * kGuard), kSentinel) {
    t_ = Tensor::from_blob(buf_.data() + kGuard, s, DType::f32);
  }
  const Tensor& t() const { return t_; }
  bool intact() const {
    for (int64_t i = 0; i < kGuard; ++i)
      if (buf_[static_cast<size_t>(i)] != kSentinel || buf_[static_cast<size_t>(kGuard + n_ + i)] != kSentinel)
        return false;
    return true;
  }

 private:
  static constexpr int64_t kGuard = 64;
  static constexpr float kSentinel = 12345.0f;
  int64_t n_;
  std::vector<float> buf_;
  Tensor t_;
};

TEST(Module, OpsLeaveGuardValuesIntact) {
  const ops::Conv2dParams cp{1, 1, 1, 1};
  Tensor x = random_tensor({2, 3, 6, 5}, 1), w = random_tensor({4, 3, 3, 3}, 2), b = random_tensor({4}, 3);
  Guarded y({2, 4, 6, 5}), dx({2, 3, 6, 5}), dw({4, 3, 3, 3}), db({4});
  ops::conv2d_forward(x, w, b, cp, y.t());
  ops::conv2d_backward_data(y.t(), w, cp, dx.t());
  ops::conv2d_backward_weights(x, y.t(), cp, dw.t(), db.t(), true);
  EXPECT_TRUE(y.intact() && dx.intact() && dw.intact() && db.intact());

  Guarded bn_y({2, 3, 6, 5}), mean({3}), var({3}), bn_dx({2, 3, 6, 5}), dg({3}), dbt({3});
  Tensor g = random_tensor({3}, 4), bt = random_tensor({3}, 5);
  ops::batch_norm_forward_training(x, g, bt, 1e-5, 0.1, bn_y.t(), mean.t(), var.t(), Tensor(), Tensor(), true);
  ops::batch_norm_backward(x, x, g, mean.t(), var.t(), 1e-5, bn_dx.t(), dg.t(), dbt.t(), false, true, bn_y.t());
  EXPECT_TRUE(bn_y.intact() && mean.intact() && var.intact() && bn_dx.intact() && dg.intact() && dbt.intact());

  const ops::Pool2dParams pp{3, 3, 2, 2, 1, 1};
  Guarded py({2, 3, 3, 3}), pdx({2, 3, 6, 5});
  Tensor idx = Tensor::empty({2, 3, 3, 3}, DType::i32);
  ops::max_pool2d_forward(x, pp, py.t(), idx);
  ops::max_pool2d_backward(py.t(), idx, pp, pdx.t());
  EXPECT_TRUE(py.intact() && pdx.intact());

  Tensor xl = random_tensor({3, 7}, 6), wl = random_tensor({5, 7}, 7);
  Guarded ly({3, 5}), ldx({3, 7}), ldw({5, 7}), probs({3, 5}), dz({3, 5});
  ops::linear_forward(xl, wl, Tensor(), ly.t());
  ops::linear_backward_data(ly.t(), wl, ldx.t());
  ops::linear_backward_weights(xl, ly.t(), ldw.t(), Tensor(), false);
  Tensor labels = nn_test::labels_tensor({0, 4, 2});
  ops::softmax_cross_entropy_forward(ly.t(), labels, 0.1f, probs.t());
  ops::softmax_cross_entropy_backward(probs.t(), labels, 0.1f, 1.0f, dz.t());
  EXPECT_TRUE(ly.intact() && ldx.intact() && ldw.intact() && probs.intact() && dz.intact());
}

TEST(Module, ReusedOutputIsNotOverwrittenWhileHeld) {
  Linear l(3, 2);
  Tensor a = l.forward(random_tensor({2, 3}, 1));
  Tensor keep = a.clone();
  Tensor b = l.forward(random_tensor({2, 3}, 2));
  EXPECT_EQ(rel_err(a, keep), 0.0);  // a still held: b got fresh memory
  EXPECT_GT(rel_err(b, keep), 0.0);
}

}  // namespace
}  // namespace tandem::nn
