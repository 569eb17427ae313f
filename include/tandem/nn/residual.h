// Residual: a residual block y = relu(body(x) + shortcut(x)) (He et al. 2016, "Deep Residual
// Learning"; torchvision's BasicBlock and Bottleneck), with shortcut the identity when none
// is given (then body(x) must have x's shape) or a projection (torchvision's `downsample`,
// a 1x1 strided Conv2d and a BatchNorm2d).
//   x [N, C, H, W] -> y [N, K, P, Q] (the body's output shape; the shortcut's must match).
// Children: the body with an empty name, so its children's names sit directly under the
// block ("conv1.weight", "bn2.running_var", as torchvision), then the shortcut as
// "downsample". Backward: g = dy where y > 0; dx = body'(g) + shortcut'(g) (shortcut' = g
// for the identity). The sum and ReLU run as one op (ops::add_relu_forward).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Residual final : public Module {
 public:
  /// Throws Error(invalid_argument) for a null body.
  explicit Residual(ModulePtr body, ModulePtr shortcut = nullptr);

  std::vector<NamedChild> named_children() override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
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
  Tensor y_, g_;
  bool have_y_ = false;
};

}  // namespace tandem::nn
