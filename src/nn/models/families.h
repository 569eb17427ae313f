// Internal: the model families behind make_model (tandem/nn/models.h), one file each.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/nn/models.h"
#include "tandem/nn/sequential.h"

namespace tandem::nn::models {

/// a * b * c, refusing a product past 2^63 - 1 (names `name` and the sample shape).
int64_t checked_product(const std::string& name, const ModelSpec& s, int64_t a, int64_t b, int64_t c);

/// fmnist_cnn.cpp
std::shared_ptr<Sequential> fmnist_cnn(const ModelSpec& s);
std::shared_ptr<Sequential> mlp(const ModelSpec& s);

/// resnet.cpp: "resnet18", "resnet34", "resnet50" (torchvision layout) and "resnet18-cifar";
/// true when `name` is one of them.
bool is_resnet(const std::string& name);
std::shared_ptr<Sequential> resnet(const std::string& name, const ModelSpec& s);
/// One residual block (not initialised): BasicBlock, or Bottleneck when `bottleneck`.
ModulePtr block(bool bottleneck, int64_t in, int64_t planes, int64_t stride, bool zero_init);

}  // namespace tandem::nn::models
