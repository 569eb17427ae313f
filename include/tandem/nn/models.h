// Models by name, built for a sample shape [C, H, W] and a number of classes (ModelSpec):
//   "fmnist-cnn": Sequential(Conv2d(C,32,3,padding=1), BatchNorm2d(32), ReLU, MaxPool2d(2),
//                 Conv2d(32,64,3,padding=1), BatchNorm2d(64), ReLU, MaxPool2d(2), Flatten,
//                 Linear(64*(H/4)*(W/4),128), ReLU, Linear(128,classes)) (H/4: two floor halvings);
//                 input [N, C, H, W] -> logits [N, classes]; needs H, W >= 4. For 1x28x28 and
//                 10 classes: Linear(3136,128), same layout and state_dict names as net() in the
//                 PyTorch peer script.
//   "mlp":        Sequential(Flatten, Linear(C*H*W,256), ReLU, Linear(256,classes));
//                 [N, C, H, W] -> [N, classes] (1x28x28: Linear(784,256)).
//   "resnet18", "resnet34", "resnet50": torchvision's ResNets (torchvision/models/resnet.py:
//                 7x7 stride-2 stem, 3x3 stride-2 max-pool, four stages of BasicBlock (18, 34) or
//                 Bottleneck (50) blocks with the stride on the 3x3 convolution, global average
//                 pool, Linear(512 or 2048, classes)); state-dict names and order as
//                 torchvision.models.resnetXX(num_classes=K).state_dict() (conv1.weight,
//                 bn1.running_mean, layer1.0.conv1.weight, layer2.0.downsample.0.weight, fc.bias,
//                 num_batches_tracked included); conv1 takes C channels. Init as torchvision:
//                 convolutions kaiming_normal (fan_out, relu), BatchNorm weight 1 and bias 0, fc
//                 PyTorch's Linear default; with zero_init_residual each block's last BatchNorm
//                 weight is 0. Any H, W >= 1 (224 is the usual).
//   "resnet18-cifar": resnet18 with a 3x3 stride-1 conv1 and no max-pool, for 32x32 inputs
//                 (same names).
// Sequence models, built for token data (ModelSpec::block_size >= 1, num_classes = the
// vocabulary):
//   "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt-mini": GPT-2 (nn/gpt.h, the sizes of
//                 gpt_config) over spec.num_classes tokens; tokens [B, T] -> logits [B, T, V],
//                 trained through its fused loss (Module::fuses_loss). T <= the size's block
//                 (1024; gpt-mini 256). ModelSpec's n_layer, n_head, n_embd and n_positions,
//                 when not 0, replace the size's (any size: a head count that does not divide
//                 the width is Gpt's Error(invalid_argument)).
// Parameters are initialised with PyTorch's default init drawn from Philox(seed, index), so a
// model of a given spec and seed is the same on every run.
// The models need no input gradient (set_needs_input_grad(false)): backward() accumulates
// parameter gradients and returns an undefined Tensor.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"

namespace tandem::nn {

/// What a model is built for: one input sample [channels, height, width] (elements) and the
/// number of classes of its logits. The defaults are Fashion-MNIST's (1x28x28, 10 classes).
struct ModelSpec {
  int64_t channels = 1;
  int64_t height = 28;
  int64_t width = 28;
  int64_t num_classes = 10;
  /// ResNets: each residual block's last BatchNorm2d starts with weight 0 (torchvision's
  /// zero_init_residual; Goyal et al. 2017).
  bool zero_init_residual = false;
  /// Sequence models: tokens per sample T (0 for images; then channels, height and width
  /// describe nothing and num_classes is the vocabulary).
  int64_t block_size = 0;
  /// Sequence models: sizes in place of the named model's (0 = the name's): layers, heads,
  /// width, and positions (transformers' n_positions, at least block_size).
  int64_t n_layer = 0, n_head = 0, n_embd = 0, n_positions = 0;
};

/// Builds model `name` for `spec`, initialised from `seed`.
/// Throws Error(invalid_argument, "[model] unknown model 'x' (expected fmnist-cnn, mlp, resnet18,
/// resnet34, resnet50, resnet18-cifar, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt-mini)");
/// Error(invalid_argument, "[model] gpt-mini: expected token data ...") for a sequence model on
/// an image spec (block_size 0) or a block_size above the model's, and an image model on token
/// data;
/// Error(invalid_argument, "[model] ...") naming the model when a dimension or the class count is
/// below 1, the images are smaller than the model's minimum (fmnist-cnn: 4x4), or C*H*W passes
/// 2^63 - 1 ("[model] mlp: sample shape AxBxC has more than 2^63 - 1 elements"); the
/// tensor's Error(invalid_argument) for a layer whose weight would pass 2^63 - 1 bytes, and
/// Error(out_of_memory) for one the host cannot allocate (very many classes).
ModulePtr make_model(const std::string& name, const ModelSpec& spec, uint64_t seed);
/// make_model(name, ModelSpec{}, seed): the Fashion-MNIST shape, 1x28x28 and 10 classes.
ModulePtr make_model(const std::string& name, uint64_t seed);
/// make_model's model for planning (tandem/train/memory_plan.h): the same modules, names and
/// parameter shapes, but no parameter or buffer holds memory (each tensor's raw_data() is
/// null) and nothing is initialised, so a model larger than the host can be planned. Only
/// parameters(), state_dict() names and shapes, describe(), set_recompute() and
/// plan_buffers() may be used on it; forward, backward and to() are undefined. A registered factory's own tensors (not made by tandem's modules) do allocate.
/// Errors as make_model.
ModulePtr make_model_shapes(const std::string& name, const ModelSpec& spec);
/// make_model_shapes' model, and in `values` (when given) the source of its initial values: the
/// values make_model(name, spec, seed) holds, bit for bit, for any element range of any
/// parameter (PyTorch's meta-device init). Its parameters (values, gradients, and compute
/// copies after set_compute_dtype, which gives them shape and dtype only) hold no memory until a
/// home writes them from `values` (or a file) part by part: a model larger than the host can be
/// built. Buffers hold no memory either, so it serves models whose state is parameters only
/// (the GPT family). The source refers to the model's parameters by address: it is valid while
/// the model lives. Errors as make_model.
ModulePtr make_model_lazy(const std::string& name, const ModelSpec& spec, uint64_t seed, ValueSource* values);
/// torchvision's residual blocks as tandem modules (Residual), initialised as in make_model
/// (seed 0): BasicBlock (conv3x3 stride, bn1, relu, conv3x3, bn2; output `planes` channels) and
/// Bottleneck (conv1x1, bn1, relu, conv3x3 stride, bn2, relu, conv1x1, bn3; output 4 * planes).
/// A projection shortcut "downsample" (conv1x1 stride, BatchNorm2d) is added when stride != 1 or
/// the channels change. x [N, inplanes, H, W] -> [N, out, ceil(H / stride), ceil(W / stride)].
/// State names as torchvision's block (conv1.weight, bn2.running_var, downsample.0.weight).
/// Throws Error(invalid_argument) for channels or stride < 1.
ModulePtr resnet_basic_block(int64_t inplanes, int64_t planes, int64_t stride, bool zero_init_residual = false);
ModulePtr resnet_bottleneck(int64_t inplanes, int64_t planes, int64_t stride, bool zero_init_residual = false);
/// Builds the modules of a model for `spec` (sample shape and classes); make_model then
/// initialises them from its seed (init_parameters), fuses BatchNorm2d + ReLU pairs and names
/// the parameters, as for the built-in models. Input [N, C, H, W] f32 -> logits [N, classes].
using ModelFactory = std::function<ModulePtr(const ModelSpec& spec)>;
/// Adds model `name` to those make_model builds, so that TrainConfig::model (and the Trainer,
/// evaluation and serving) can name it: a model of one's own made of tandem's nn modules.
/// Throws Error(invalid_argument, "[model] ...") for an empty name, the name of a built-in or
/// an already registered model, or an empty factory; make_model throws it for a factory that
/// returns a null module. Thread-safety: safe from any thread (a lock); register before the
/// Trainer that uses it is built.
void register_model(const std::string& name, ModelFactory factory);
/// The names make_model accepts: the built-in image models, then the registered ones by
/// name (model_names), and the sequence models (sequence_model_names).
std::vector<std::string> model_names();
std::vector<std::string> sequence_model_names();
/// Whether `name` is one of sequence_model_names().
bool is_sequence_model(const std::string& name);
/// The most tokens per sample sequence model `name` takes (its block size, e.g. 256 for
/// gpt-mini); Error(invalid_argument) for another name.
int64_t sequence_block_size(const std::string& name);
/// Throws make_model's unknown-model Error(invalid_argument) when `name` is neither one of
/// model_names() nor of sequence_model_names(); lets a caller refuse a bad name before it
/// loads data.
void check_model_name(const std::string& name);

}  // namespace tandem::nn
