// Models by name, built for a sample shape [C, H, W] and a number of classes (ModelSpec):
//   "fmnist-cnn": Sequential(Conv2d(C,32,3,padding=1), BatchNorm2d(32), ReLU, MaxPool2d(2),
//                 Conv2d(32,64,3,padding=1), BatchNorm2d(64), ReLU, MaxPool2d(2), Flatten,
//                 Linear(64*(H/4)*(W/4),128), ReLU, Linear(128,classes)) (H/4: two floor halvings);
//                 input [N, C, H, W] -> logits [N, classes]; needs H, W >= 4. For 1x28x28 and
//                 10 classes: Linear(3136,128), same layout and state_dict names as net() in the
//                 PyTorch peer script.
//   "mlp":        Sequential(Flatten, Linear(C*H*W,256), ReLU, Linear(256,classes));
//                 [N, C, H, W] -> [N, classes] (1x28x28: Linear(784,256)).
// Parameters are initialised with PyTorch's default init drawn from Philox(seed, index), so a
// model of a given spec and seed is the same on every run.
// The models need no input gradient (set_needs_input_grad(false)): backward() accumulates
// parameter gradients and returns an undefined Tensor.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/nn/module.h"

namespace tandem::nn {

/// What a model is built for: one input sample [channels, height, width] (elements) and the
/// number of classes of its logits. The defaults are Fashion-MNIST's (1x28x28, 10 classes).
struct ModelSpec {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t num_classes = 10;
};

/// Builds model `name` for `spec`, initialised from `seed`.
/// Throws Error(invalid_argument, "[model] unknown model 'x' (expected fmnist-cnn or mlp)");
/// Error(invalid_argument, "[model] ...") naming the model when a dimension or the class count is
/// below 1, the images are smaller than the model's minimum (fmnist-cnn: 4x4), or C*H*W passes
/// 2^63 - 1 ("[model] mlp: sample shape AxBxC has more than 2^63 - 1 elements"); the
/// tensor's Error(invalid_argument) for a layer whose weight would pass 2^63 - 1 bytes, and
/// Error(out_of_memory) for one the host cannot allocate (very many classes).
ModulePtr make_model(const std::string& name, const ModelSpec& spec, uint64_t seed);
/// make_model(name, ModelSpec{}, seed): the Fashion-MNIST shape, 1x28x28 and 10 classes.
ModulePtr make_model(const std::string& name, uint64_t seed);
/// The names make_model accepts.
std::vector<std::string> model_names();
/// Throws make_model's unknown-model Error(invalid_argument) when `name` is not one of
/// model_names(); lets a caller refuse a bad name before it loads data.
void check_model_name(const std::string& name);

}  // namespace tandem::nn
