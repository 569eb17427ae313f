// Models built from a ModelSpec: the Fashion-MNIST spec gives exactly the default models; other
// sample shapes and class counts size the first and last layers (fmnist-cnn's flatten from the
// pooled shape), init follows the layers' fan-in, forward and backward run with the right
// shapes, the mlp's logits match a float64 reference, and too-small or empty specs are refused
// naming the model.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "nn_test_util.h"
#include "tandem/error.h"
#include "tandem/nn/models.h"

namespace tandem::nn {
namespace {

using nn_test::random_tensor;

std::string shapes(Module& m) {
  std::string out;
  for (const NamedTensor& t : m.state_dict()) out += t.name + ":" + shape_str(t.tensor.shape()) + " ";
  return out;
}

double max_abs(const Tensor& t) {
  double mx = 0;
  for (int64_t i = 0; i < t.numel(); ++i) mx = std::max(mx, std::fabs(t.item(i)));
  return mx;
}

std::string error_of(const std::string& name, const ModelSpec& spec) {
  try {
    make_model(name, spec, 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Models, FashionMnistSpecIsTheDefaultModelBitForBit) {
  for (const std::string& name : model_names()) {
    ModulePtr a = make_model(name, 7), b = make_model(name, ModelSpec{1, 28, 28, 10}, 7);
    auto sa = a->state_dict(), sb = b->state_dict();
    ASSERT_EQ(sa.size(), sb.size()) << name;
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].name, sb[i].name);
      ASSERT_EQ(sa[i].tensor.shape(), sb[i].tensor.shape()) << sa[i].name;
      for (int64_t k = 0; k < sa[i].tensor.numel(); ++k)
        ASSERT_EQ(sa[i].tensor.item(k), sb[i].tensor.item(k)) << name << " " << sa[i].name << "[" << k << "]";
    }
  }
}

// The default models' state_dict names and shapes are those of the PyTorch peer script's
// nn.Sequential (/work/shared/peers/torch_fmnist.py), so that saved weights stay loadable;
// written out here rather than derived, so that a layout change cannot pass unnoticed.
TEST(Models, DefaultStateDictNamesAreThePyTorchOnes) {
  EXPECT_EQ(
      shapes(*make_model("fmnist-cnn", 0)),
      "0.weight:[32, 1, 3, 3] 0.bias:[32] 1.weight:[32] 1.bias:[32] 1.running_mean:[32] "
      "1.running_var:[32] "
      "1.num_batches_tracked:[] 4.weight:[64, 32, 3, 3] 4.bias:[64] 5.weight:[64] 5.bias:[64] "
      "5.running_mean:[64] 5.running_var:[64] 5.num_batches_tracked:[] 9.weight:[128, 3136] "
      "9.bias:[128] "
      "11.weight:[10, 128] 11.bias:[10] ");
  EXPECT_EQ(shapes(*make_model("mlp", 0)),
            "1.weight:[256, 784] 1.bias:[256] 3.weight:[10, 256] 3.bias:[10] ");
}

TEST(Models, FmnistCnnFor3x32x32And100ClassesRunsForwardAndBackward) {
  ModulePtr m = make_model("fmnist-cnn", ModelSpec{3, 32, 32, 100}, 1);
  // 32 -> 16 -> 8 after the two pools: Linear(64 * 8 * 8, 128).
  EXPECT_EQ(shapes(*m),
            "0.weight:[32, 3, 3, 3] 0.bias:[32] 1.weight:[32] 1.bias:[32] 1.running_mean:[32] 1.running_var:[32] "
            "1.num_batches_tracked:[] 4.weight:[64, 32, 3, 3] 4.bias:[64] 5.weight:[64] 5.bias:[64] "
            "5.running_mean:[64] 5.running_var:[64] 5.num_batches_tracked:[] 9.weight:[128, 4096] 9.bias:[128] "
            "11.weight:[100, 128] 11.bias:[100] ");
  auto p = m->parameters();
  // PyTorch default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in 27 for the first conv, 4096 for 9.weight.
  EXPECT_LE(max_abs(p[0]->value), 1.0 / std::sqrt(27.0));
  EXPECT_GT(max_abs(p[0]->value), 0.9 / std::sqrt(27.0));
  EXPECT_LE(max_abs(p[8]->value), 1.0 / 64.0);
  EXPECT_GT(max_abs(p[8]->value), 0.9 / 64.0);
  m->set_needs_input_grad(true);
  Tensor y = m->forward(random_tensor({2, 3, 32, 32}, 5));
  EXPECT_EQ(shape_str(y.shape()), "[2, 100]");
  Tensor dx = m->backward(random_tensor({2, 100}, 6));
  EXPECT_EQ(shape_str(dx.shape()), "[2, 3, 32, 32]");
  EXPECT_GT(max_abs(dx), 0.0);
  for (Parameter* q : m->parameters()) {
    EXPECT_EQ(q->grad.shape(), q->value.shape()) << q->name;
    EXPECT_TRUE(std::isfinite(max_abs(q->grad))) << q->name;
  }
  EXPECT_GT(max_abs(p[10]->grad), 0.0);  // 11.weight
}

TEST(Models, FmnistCnnFlattenFollowsTheFlooredPoolShape) {
  // 30x30 -> 15x15 -> 7x7 and 5x9 -> 2x4 -> 1x2: floors, as PyTorch's MaxPool2d(2).
  ModulePtr a = make_model("fmnist-cnn", ModelSpec{1, 30, 30, 10}, 0);
  EXPECT_EQ(shape_str(a->parameters()[8]->value.shape()), "[128, 3136]");
  ModulePtr b = make_model("fmnist-cnn", ModelSpec{2, 5, 9, 4}, 0);
  EXPECT_EQ(shape_str(b->parameters()[8]->value.shape()), "[128, 128]");
  EXPECT_EQ(shape_str(b->forward(random_tensor({3, 2, 5, 9}, 2)).shape()), "[3, 4]");
  ModulePtr c = make_model("fmnist-cnn", ModelSpec{1, 4, 4, 2}, 0);  // the minimum: 1x1 after the pools
  EXPECT_EQ(shape_str(c->forward(random_tensor({1, 1, 4, 4}, 2)).shape()), "[1, 2]");
}

TEST(Models, MlpIsSizedFromTheSampleAndMatchesAFloat64Reference) {
  const ModelSpec spec{3, 32, 32, 100};
  ModulePtr m = make_model("mlp", spec, 4);
  auto p = m->parameters();  // 1.weight [256, 3072], 1.bias, 3.weight [100, 256], 3.bias
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(shape_str(p[0]->value.shape()), "[256, 3072]");
  EXPECT_EQ(shape_str(p[2]->value.shape()), "[100, 256]");
  const Tensor x = random_tensor({2, 3, 32, 32}, 8);
  const Tensor y = m->forward(x);
  ASSERT_EQ(shape_str(y.shape()), "[2, 100]");
  double max_err = 0, max_ref = 0;
  for (int64_t n = 0; n < 2; ++n) {
    std::vector<double> h(256);
    for (int64_t j = 0; j < 256; ++j) {
      double s = p[1]->value.item(j);
      for (int64_t k = 0; k < 3072; ++k) s += p[0]->value.item(j * 3072 + k) * x.item(n * 3072 + k);
      h[static_cast<size_t>(j)] = std::max(s, 0.0);
    }
    for (int64_t c = 0; c < 100; ++c) {
      double s = p[3]->value.item(c);
      for (int64_t j = 0; j < 256; ++j) s += p[2]->value.item(c * 256 + j) * h[static_cast<size_t>(j)];
      max_err = std::max(max_err, std::fabs(y.item(n * 100 + c) - s));
      max_ref = std::max(max_ref, std::fabs(s));
    }
  }
  EXPECT_GT(max_ref, 0.0);
  EXPECT_LE(max_err / max_ref, 1e-5);
  m->zero_grad();
  m->backward(random_tensor({2, 100}, 9));
  EXPECT_GT(max_abs(p[0]->grad), 0.0);
}

TEST(Models, TooSmallOrEmptySpecsAreRefusedNamingTheModel) {
  EXPECT_EQ(error_of("fmnist-cnn", {1, 3, 28, 10}),
            "[model] fmnist-cnn needs images of at least 4x4 (two 2x2 max-pools), found 3x28");
  EXPECT_EQ(error_of("fmnist-cnn", {3, 32, 2, 10}),
            "[model] fmnist-cnn needs images of at least 4x4 (two 2x2 max-pools), found 32x2");
  EXPECT_EQ(error_of("mlp", {0, 28, 28, 10}),
            "[model] mlp: expected a sample shape and a class count of at least 1, found 0x28x28 and 10 classes");
  EXPECT_EQ(error_of("fmnist-cnn", {1, 28, 28, 0}),
            "[model] fmnist-cnn: expected a sample shape and a class count of at least 1, found 1x28x28 and 0 "
            "classes");
  EXPECT_EQ(error_of("resnet", {}), "[model] unknown model 'resnet' (expected fmnist-cnn, mlp, resnet18, resnet34, resnet50, resnet18-cifar, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt-mini)");
  // Sample shapes whose element count passes 2^63 used to wrap (2^32 x 2^32 x 1 gave an mlp of
  // 0 inputs, refused only as "[Linear] feature counts must be positive, found (0, 256)").
  const int64_t g = int64_t{1} << 32;
  EXPECT_EQ(error_of("mlp", {g, g, 1, 10}),
            "[model] mlp: sample shape 4294967296x4294967296x1 has more than 2^63 - 1 elements");
  EXPECT_EQ(
      error_of("fmnist-cnn", {1, g * 16, g * 16, 10}),
      "[model] fmnist-cnn: sample shape 1x68719476736x68719476736 has more than 2^63 - 1 elements");
  // Classes past what a weight can hold are an error, not a wrapped 0-byte weight.
  EXPECT_NE(error_of("mlp", {1, 28, 28, int64_t{1} << 62}).find("expected at most 2^63 - 1"),
            std::string::npos);
  EXPECT_EQ(shape_str(make_model("mlp", ModelSpec{1, 1, 1, 1}, 0)->forward(random_tensor({2, 1, 1, 1}, 1)).shape()),
            "[2, 1]");
}

}  // namespace tandem::nn
