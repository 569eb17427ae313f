// Models by name.
//   "fmnist-cnn": Sequential(Conv2d(1,32,3,padding=1), BatchNorm2d(32), ReLU, MaxPool2d(2),
//                 Conv2d(32,64,3,padding=1), BatchNorm2d(64), ReLU, MaxPool2d(2), Flatten,
//                 Linear(3136,128), ReLU, Linear(128,10)); input [N, 1, 28, 28] -> logits [N, 10].
//                 Same layout and state_dict names as net() in the PyTorch peer script.
//   "mlp":        Sequential(Flatten, Linear(784,256), ReLU, Linear(256,10)); [N, 1, 28, 28] -> [N, 10].
// Parameters are initialised with PyTorch's default init drawn from Philox(seed, index).
// The models need no input gradient (set_needs_input_grad(false)): backward() accumulates
// parameter gradients and returns an undefined Tensor.
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <vector>

#include "tandem/nn/module.h"

namespace tandem::nn {

/// Throws Error(invalid_argument, "[model] unknown model 'x' (expected fmnist-cnn or mlp)").
ModulePtr make_model(const std::string& name, uint64_t seed);
/// The names make_model accepts.
std::vector<std::string> model_names();

}  // namespace tandem::nn
