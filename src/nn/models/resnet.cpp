// ResNet-18/34/50 in torchvision's layout (torchvision/models/resnet.py, ResNet v1.5: the
// stride of a Bottleneck sits on its 3x3 convolution) and resnet18-cifar (3x3 stride-1 stem,
// no max-pool, for 32x32 inputs). State-dict names are torchvision's: conv1, bn1, layer1.0.conv1,
// layer2.0.downsample.0, fc.
#include "nn/models/families.h"
#include "tandem/nn/adaptive_avg_pool2d.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/conv2d.h"
#include "tandem/nn/flatten.h"
#include "tandem/nn/fusion.h"
#include "tandem/nn/linear.h"
#include "tandem/nn/max_pool2d.h"
#include "tandem/nn/relu.h"
#include "tandem/nn/residual.h"

namespace tandem::nn::models {

namespace {

struct Arch {
  bool bottleneck;
  int blocks[4];
  bool cifar_stem;
};

Arch arch_of(const std::string& name) {
  if (name == "resnet18") return {false, {2, 2, 2, 2}, false};
  if (name == "resnet34") return {false, {3, 4, 6, 3}, false};
  if (name == "resnet50") return {true, {3, 4, 6, 3}, false};
  return {false, {2, 2, 2, 2}, true};  // resnet18-cifar
}

// A bias-free convolution with torchvision's ResNet init.
ModulePtr conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  auto c = std::make_shared<Conv2d>(in, out, k, stride, k / 2, false);
  c->set_init(ConvInit::kaiming_normal_fan_out);
  return c;
}

ModulePtr bn(int64_t c, bool zero_init = false) {
  auto b = std::make_shared<BatchNorm2d>(c);
  b->set_zero_init(zero_init);
  return b;
}

}  // namespace

// BasicBlock: conv3x3(stride), bn, relu, conv3x3, bn; Bottleneck: conv1x1, bn, relu,
// conv3x3(stride), bn, relu, conv1x1 (x4 channels), bn. Then + shortcut, relu.
ModulePtr block(bool bottleneck, int64_t in, int64_t planes, int64_t stride, bool zero_init) {
  const int64_t out = bottleneck ? planes * 4 : planes;
  std::vector<std::pair<std::string, ModulePtr>> body;
  if (bottleneck) {
    body = {{"conv1", conv(in, planes, 1, 1)},          {"bn1", bn(planes)}, {"", std::make_shared<ReLU>()},
            {"conv2", conv(planes, planes, 3, stride)}, {"bn2", bn(planes)}, {"", std::make_shared<ReLU>()},
            {"conv3", conv(planes, out, 1, 1)},         {"bn3", bn(out, zero_init)}};
  } else {
    body = {{"conv1", conv(in, planes, 3, stride)}, {"bn1", bn(planes)}, {"", std::make_shared<ReLU>()},
            {"conv2", conv(planes, planes, 3, 1)},  {"bn2", bn(planes, zero_init)}};
  }
  ModulePtr shortcut;
  if (stride != 1 || in != out)
    shortcut = std::make_shared<Sequential>(std::vector<ModulePtr>{conv(in, out, 1, stride), bn(out)});
  return std::make_shared<Residual>(std::make_shared<Sequential>(std::move(body)), std::move(shortcut));
}

bool is_resnet(const std::string& name) {
  return name == "resnet18" || name == "resnet34" || name == "resnet50" || name == "resnet18-cifar";
}

std::shared_ptr<Sequential> resnet(const std::string& name, const ModelSpec& s) {
  TD_CHECK_ARG(is_resnet(name), "model", "unknown model '{}'", name);
  checked_product(name, s, s.channels, s.height, s.width);
  const Arch a = arch_of(name);
  auto m = std::make_shared<Sequential>();
  if (a.cifar_stem) {
    m->add("conv1", conv(s.channels, 64, 3, 1));
    m->add("bn1", bn(64));
    m->add("relu", std::make_shared<ReLU>());
  } else {
    m->add("conv1", conv(s.channels, 64, 7, 2));
    m->add("bn1", bn(64));
    m->add("relu", std::make_shared<ReLU>());
    m->add("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  }
  int64_t in = 64;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t planes = int64_t{64} << layer;
    auto seq = std::make_shared<Sequential>();
    for (int b = 0; b < a.blocks[layer]; ++b) {
      seq->add(block(a.bottleneck, in, planes, b == 0 && layer > 0 ? 2 : 1, s.zero_init_residual));
      in = a.bottleneck ? planes * 4 : planes;
    }
    m->add_stage("layer" + std::to_string(layer + 1), seq);
  }
  m->add("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  m->add("flatten", std::make_shared<Flatten>());
  m->add("fc", std::make_shared<Linear>(in, s.num_classes));
  m->set_block_words("ResNet", "stem, classifier", "the stem and the classifier");
  return m;
}

}  // namespace tandem::nn::models

namespace tandem::nn {

static ModulePtr checked_block(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, bool zero_init) {
  TD_CHECK_ARG(inplanes >= 1 && planes >= 1 && stride >= 1, "model",
               "{}: expected inplanes, planes and stride >= 1, found {}, {}, {}",
               bottleneck ? "Bottleneck" : "BasicBlock", inplanes, planes, stride);
  ModulePtr b = models::block(bottleneck, inplanes, planes, stride, zero_init);
  b->init_parameters(0);
  fuse_batch_norm_relu(*b);
  b->parameters();  // full names
  return b;
}

ModulePtr resnet_basic_block(int64_t inplanes, int64_t planes, int64_t stride, bool zero_init_residual) {
  return checked_block(false, inplanes, planes, stride, zero_init_residual);
}

ModulePtr resnet_bottleneck(int64_t inplanes, int64_t planes, int64_t stride, bool zero_init_residual) {
  return checked_block(true, inplanes, planes, stride, zero_init_residual);
}

}  // namespace tandem::nn
