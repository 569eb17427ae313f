// ResNets: state-dict names and shapes equal torchvision's (tests/golden/resnet_state_dicts.txt),
// torchvision's BasicBlock and Bottleneck forward and backward (tests/golden/
// resnet_blocks.safetensors, both made by scripts/golden_resnet.py), the fusion pass and init.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "nn_test_util.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/fusion.h"
#include "tandem/nn/models.h"
#include "tandem/nn/residual.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn {
namespace {

using nn_test::rel_err;

constexpr double kTol = 1e-4;

const NamedTensors& blocks() {
  static const NamedTensors g = load_safetensors(TANDEM_SOURCE_DIR "/tests/golden/resnet_blocks.safetensors");
  return g;
}
Tensor bgold(const std::string& name) { return find_tensor(blocks(), name, "resnet golden").clone(); }

std::string dims(const Tensor& t) {
  if (t.dim() == 0) return "-";
  std::string s;
  for (int64_t d : t.shape()) {
    if (!s.empty()) s.push_back('x');
    s.append(std::to_string(d));
  }
  return s;
}

TEST(ResNet, StateDictNamesAndShapesAreTorchvisions) {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/golden/resnet_state_dicts.txt");
  ASSERT_TRUE(in.good());
  std::map<std::string, std::vector<std::string>> want;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string model, rest;
    ls >> model;
    std::getline(ls, rest);
    want[model].push_back(rest.empty() ? rest : rest.substr(1));
  }
  ASSERT_EQ(want.size(), 4u);
  for (const auto& [name, lines] : want) {
    const bool cifar = name == "resnet18-cifar";
    ModelSpec spec{cifar ? 1 : 3, cifar ? 32 : 64, cifar ? 32 : 64, cifar ? 10 : 1000};
    ModulePtr m = make_model(name, spec, 0);
    std::vector<std::string> got;
    for (const NamedTensor& t : m->state_dict()) got.push_back(t.name + " " + dims(t.tensor));
    EXPECT_EQ(got, lines) << name;
  }
}

TEST(ResNet, ParameterCountsAreTorchvisions) {
  EXPECT_EQ(make_model("resnet18", {3, 32, 32, 1000}, 0)->num_parameters(), 11689512);
  EXPECT_EQ(make_model("resnet34", {3, 32, 32, 1000}, 0)->num_parameters(), 21797672);
  EXPECT_EQ(make_model("resnet50", {3, 32, 32, 1000}, 0)->num_parameters(), 25557032);
}

TEST(ResNet, ForwardShapesAndBackwardOnSmallInputs) {
  for (const char* name : {"resnet18", "resnet50", "resnet18-cifar"}) {
    ModulePtr m = make_model(name, {3, 32, 32, 7}, 1);
    Tensor y = m->forward(nn_test::random_tensor({2, 3, 32, 32}, 2));
    EXPECT_EQ(shape_str(y.shape()), "[2, 7]") << name;
    EXPECT_FALSE(m->backward(nn_test::random_tensor({2, 7}, 3)).defined()) << name;
    double g = 0;
    for (Parameter* p : m->parameters()) g += std::fabs(p->grad.item(0));
    EXPECT_GT(g, 0.0) << name;
  }
}

TEST(ResNet, FusionPassFusesEveryBatchNormReluPair) {
  // resnet18: the stem and bn1 of each of 8 blocks; resnet50: the stem and bn1, bn2 of 16 blocks.
  ModulePtr r18 = make_model("resnet18", {3, 32, 32, 10}, 0);
  EXPECT_EQ(fuse_batch_norm_relu(*r18, false), 9);
  EXPECT_EQ(fuse_batch_norm_relu(*r18, true), 9);
  ModulePtr r50 = make_model("resnet50", {3, 32, 32, 10}, 0);
  EXPECT_EQ(fuse_batch_norm_relu(*r50, false), 33);
  // Unfused and fused give the same logits.
  r50->eval();
  const Tensor x = nn_test::random_tensor({2, 3, 32, 32}, 4);
  const Tensor unfused = r50->forward(x).clone();
  fuse_batch_norm_relu(*r50);
  EXPECT_LE(rel_err(r50->forward(x), unfused), 1e-6);
}

TEST(ResNet, InitIsTorchvisions) {
  ModulePtr m = make_model("resnet50", {3, 32, 32, 10}, 5);
  for (const NamedTensor& t : m->state_dict()) {
    if (t.name == "layer3.2.conv2.weight") {  // 256 x 256 x 3 x 3: std sqrt(2 / (256 * 9))
      double s2 = 0;
      for (int64_t i = 0; i < t.tensor.numel(); ++i) s2 += t.tensor.item(i) * t.tensor.item(i);
      EXPECT_NEAR(std::sqrt(s2 / static_cast<double>(t.tensor.numel())), std::sqrt(2.0 / (256 * 9)), 2e-4);
    }
    if (t.name == "layer1.0.bn3.weight") {
      EXPECT_EQ(t.tensor.item(0), 1.0);
    }
  }
  ModelSpec zero{3, 32, 32, 10};
  zero.zero_init_residual = true;
  for (const NamedTensor& t : make_model("resnet50", zero, 5)->state_dict()) {
    if (t.name == "layer1.0.bn3.weight" || t.name == "layer4.2.bn3.weight") {
      EXPECT_EQ(t.tensor.item(0), 0.0);
    }
    if (t.name == "layer1.0.bn2.weight" || t.name == "layer1.0.downsample.1.weight") {
      EXPECT_EQ(t.tensor.item(0), 1.0);
    }
  }
}

void check_block(Module& block, const std::string& c) {
  for (const NamedTensor& t : block.state_dict()) Tensor(t.tensor).copy_from(bgold(c + ".state." + t.name));
  block.train();
  block.zero_grad();
  Tensor y = block.forward(bgold(c + ".x"));
  EXPECT_LE(rel_err(y, bgold(c + ".y")), kTol) << c;
  Tensor dx = block.backward(bgold(c + ".dy"));
  EXPECT_LE(rel_err(dx, bgold(c + ".dx")), kTol) << c;
  for (Parameter* p : block.parameters()) EXPECT_LE(rel_err(p->grad, bgold(c + ".grad." + p->name)), kTol) << p->name;
  for (const NamedTensor& t : block.state_dict()) {
    if (t.is_parameter) continue;
    const Tensor want = bgold(c + ".after." + t.name);
    if (t.tensor.dtype() == DType::i64)
      EXPECT_EQ(t.tensor.data<int64_t>()[0], want.data<int64_t>()[0]) << t.name;
    else
      EXPECT_LE(rel_err(t.tensor, want), kTol) << t.name;
  }
}

TEST(ResNet, BasicBlockMatchesTorchvision) {
  ModulePtr b = resnet_basic_block(4, 4, 1);
  EXPECT_EQ(dynamic_cast<Residual&>(*b).shortcut(), nullptr);
  check_block(*b, "basic");
}

TEST(ResNet, BottleneckMatchesTorchvision) {
  ModulePtr b = resnet_bottleneck(8, 4, 2);
  EXPECT_NE(dynamic_cast<Residual&>(*b).shortcut(), nullptr);
  check_block(*b, "bottleneck");
}

}  // namespace
}  // namespace tandem::nn
