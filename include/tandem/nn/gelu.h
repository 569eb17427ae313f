// GELU, tanh form (GPT-2's; torch.nn.GELU(approximate='tanh'); Hendrycks & Gimpel 2016):
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), element-wise; any shape, f32, bf16 or
//   f16 (computed in f32). No parameters.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class GELU final : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override { return "GELU(approximate='tanh')"; }
  std::vector<ops::Op> own_ops() const override { return {ops::Op::gelu_forward, ops::Op::gelu_backward}; }

 private:
  Tensor x_, y_, dx_;
};

}  // namespace tandem::nn
