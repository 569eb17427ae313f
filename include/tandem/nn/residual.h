// Residual: a residual block y = relu(body(x) + shortcut(x)) (He et al. 2016, "Deep Residual
// Learning"; torchvision's BasicBlock and Bottleneck), with shortcut the identity when none
// is given (then body(x) must have x's shape) or a projection (torchvision's `downsample`,
// a 1x1 strided Conv2d and a BatchNorm2d).
//   x [N, C, H, W] -> y [N, K, P, Q] (the body's output shape; the shortcut's must match).
// Children: the body with an empty name, so its children's names sit directly under the
// block ("conv1.weight", "bn2.running_var", as torchvision), then the shortcut as
// "downsample". Backward: g = dy where y > 0; dx = body'(g) + shortcut'(g) (shortcut' = g
// for the identity). The sum and ReLU run as one op (ops::add_relu_forward).
// Recompute (set_recompute, activation checkpointing, Chen et al. 2016, arXiv 1604.06174; the
// flag, the kept input and the re-run are nn::RecomputingBlock's): the block keeps only its
// input between a training forward and its backward; its internals and its own output buffer
// go back to the allocator after the forward, and the backward runs the forward again from the
// kept input first, with the BatchNorm2d layers inside in replay (their running statistics and
// counters move once per step, as without recompute). Same kernels on the same inputs:
// outputs, gradients and statistics are bit-identical to not recomputing. With
// set_kept_inputs the kept input waits in a KeptInputs store (host memory) instead.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <memory>

#include "tandem/nn/module.h"
#include "tandem/nn/recomputing_block.h"

namespace tandem::nn {

class BatchNorm2d;

class Residual final : public RecomputingBlock {
 public:
  /// Throws Error(invalid_argument) for a null body.
  explicit Residual(ModulePtr body, ModulePtr shortcut = nullptr);

  std::vector<NamedChild> named_children() override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::add_relu_forward, ops::Op::relu_backward, ops::Op::add_};
  }

  Module& body() { return *body_; }
  /// Null for the identity shortcut.
  Module* shortcut() { return shortcut_.get(); }

 private:
  ModulePtr body_, shortcut_;
  std::vector<Parameter*> body_params_, shortcut_params_;
  std::vector<BatchNorm2d*> norms_;  // replayed by the recompute
  Tensor y_, g_;
  // The RecomputingBlock hooks; y_ is an internal (the ReLU's backward reads it).
  Tensor run_forward(const Tensor& x) override;
  void replay_forward(const Tensor& x) override;
  Tensor run_backward(const Tensor& dy) override;
  void release_internals() override;
  Shape plan_internals(const Shape& input, DType dtype, BufferPlan& plan) override;
};

}  // namespace tandem::nn
