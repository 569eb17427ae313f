// Flatten: x [N, d1, d2, ...] -> [N, d1*d2*...] (torch.nn.Flatten(1, -1)); a view of a
// contiguous input, a copy to NCHW order of a channels_last one (and its gradient back).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Flatten final : public Module {
 public:
  /// x must have at least one dimension.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override { return "Flatten(start_dim=1, end_dim=-1)"; }

 private:
  Shape x_shape_;
  MemoryFormat x_format_ = MemoryFormat::contiguous;
  Tensor xc_, dx_;  // NCHW copies of a channels_last input and its gradient
};

}  // namespace tandem::nn
