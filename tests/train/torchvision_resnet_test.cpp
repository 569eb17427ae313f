// Weights between tandem and torchvision for resnet18 and resnet50, both ways, on 64 images
// (64x64, eval mode): a tandem --save file loads into torchvision with strict=True and gives
// the same logits; a torchvision state_dict given to --init (load_init_weights) gives tandem
// the same logits. Max abs difference at most 1e-4 of the largest |logit|. torchvision runs in
// the peers venv through scripts/torchvision_resnet.py; without it the tests skip, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "data/temp_dir.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/models.h"
#include "tandem/rng.h"
#include "tandem/safetensors.h"
#include "train/weights.h"

namespace tandem::train {
namespace {

constexpr const char* kPython = "/opt/peers/bin/python";
const std::string kScript = std::string(TANDEM_SOURCE_DIR) + "/scripts/torchvision_resnet.py";
constexpr int64_t kImages = 64, kSize = 64, kClasses = 10;

bool have_torchvision() {
  static const bool ok = std::filesystem::exists(kPython) &&
                         std::system((std::string(kPython) + " -c 'import torchvision' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

void run_script(const std::string& args) {
  const std::string cmd = std::string(kPython) + " " + kScript + " " + args;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

Tensor randn(const Shape& s, uint64_t seed, float scale = 1.0f, float shift = 0.0f) {
  Tensor t = Tensor::empty(s);
  Philox rng(seed, 5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = shift + scale * (2.0f * rng.uniform() - 1.0f);
  return t;
}

// max |a - b| / max |b|.
double logit_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(shape_str(a.shape()), shape_str(b.shape()));
  double diff = 0, big = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::fabs(a.item(i) - b.item(i)));
    big = std::max(big, std::fabs(b.item(i)));
  }
  EXPECT_GT(big, 0.0);
  return diff / big;
}

class TorchvisionResNet : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!have_torchvision())
      GTEST_SKIP() << "needs torch and torchvision in the peers venv (" << kPython
                   << "; see ../shared/peers/README.md)";
  }
  testing::TempDir dir_;
};

TEST_P(TorchvisionResNet, SavedWeightsLoadStrictAndGiveTheSameLogits) {
  const std::string name = GetParam();
  const nn::ModelSpec spec{3, kSize, kSize, kClasses};
  nn::ModulePtr m = nn::make_model(name, spec, 11);
  // Trained-looking BatchNorms: random affine values and running statistics from a few
  // training-mode forwards.
  uint64_t seed = 100;
  for (const nn::NamedTensor& t : m->state_dict())
    if (t.is_parameter && t.tensor.dim() == 1) Tensor(t.tensor).copy_from(randn(t.tensor.shape(), ++seed, 0.4f, 1.0f));
  for (int i = 0; i < 2; ++i) m->forward(randn({4, 3, kSize, kSize}, 50 + i, 2.0f));
  m->eval();
  const Tensor x = randn({kImages, 3, kSize, kSize}, 7, 1.5f);
  const Tensor logits = m->forward(x).clone();
  save_model_weights(dir_.file("w.safetensors"), *m, name, spec);
  save_safetensors(dir_.file("x.safetensors"), {{"x", x}});
  run_script("check " + name + " " + dir_.file("w.safetensors") + " " + dir_.file("x.safetensors") + " " +
             dir_.file("out.safetensors"));
  const NamedTensors out = load_safetensors(dir_.file("out.safetensors"));
  const double err = logit_error(logits, find_tensor(out, "logits", "torchvision"));
  std::printf("%s tandem -> torchvision: max |diff| / max |logit| = %.3g\n", name.c_str(), err);
  EXPECT_LE(err, 1e-4) << name;
}

TEST_P(TorchvisionResNet, TorchvisionWeightsGivenToInitGiveTheSameLogits) {
  const std::string name = GetParam();
  run_script("make " + name + " 3 " + std::to_string(kClasses) + " " + std::to_string(kImages) + " " +
             std::to_string(kSize) + " " + dir_.file("tv.safetensors") + " " + dir_.file("ref.safetensors"));
  nn::ModulePtr m = nn::make_model(name, {3, kSize, kSize, kClasses}, 0);
  load_init_weights(*m, dir_.file("tv.safetensors"), {});
  const NamedTensors ref = load_safetensors(dir_.file("ref.safetensors"));
  m->eval();
  const Tensor logits = m->forward(find_tensor(ref, "x", "reference"));
  const double err = logit_error(logits, find_tensor(ref, "logits", "reference"));
  std::printf("%s torchvision -> tandem --init: max |diff| / max |logit| = %.3g\n", name.c_str(), err);
  EXPECT_LE(err, 1e-4) << name;
}

// No torchvision needed: --init from a 1000-class file into a 10-class model.
TEST(InitWeights, MismatchNamesTheTensorAndBothShapesAndExcludeDropsTheClassifier) {
  testing::TempDir dir;
  nn::ModulePtr big = nn::make_model("resnet18-cifar", {3, 32, 32, 1000}, 4);
  save_model_weights(dir.file("big.safetensors"), *big, "resnet18-cifar", {3, 32, 32, 1000});
  nn::ModulePtr small = nn::make_model("resnet18-cifar", {3, 32, 32, 10}, 5);
  try {
    load_init_weights(*small, dir.file("big.safetensors"), {});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_NE(std::string(e.what()).find("tensor 'fc.weight' has shape [1000, 512] in the file, expected [10, 512]"),
              std::string::npos)
        << e.what();
  }
  load_init_weights(*small, dir.file("big.safetensors"), {"fc."});
  const auto a = big->state_dict(), b = small->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name.rfind("fc.", 0) == 0) continue;
    EXPECT_EQ(a[i].tensor.item(0), b[i].tensor.item(0)) << a[i].name;
  }
  // Another model's file names the first tensor that differs.
  nn::ModulePtr r50 = nn::make_model("resnet50", {3, 32, 32, 10}, 5);
  try {
    load_init_weights(*r50, dir.file("big.safetensors"), {"fc."});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'conv1.weight' has shape [64, 3, 3, 3] in the file, "
                                         "expected [64, 3, 7, 7]"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionResNet, ::testing::Values("resnet18", "resnet50"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tandem::train
