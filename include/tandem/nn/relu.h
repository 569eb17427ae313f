// ReLU: y = max(x, 0), any shape (torch.nn.ReLU, not in place).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class ReLU final : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override { return "ReLU()"; }
  std::vector<ops::Op> own_ops() const override { return {ops::Op::relu_forward, ops::Op::relu_backward}; }

 private:
  Tensor y_, dx_;
  bool have_y_ = false;
};

}  // namespace tandem::nn
