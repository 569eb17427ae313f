// AdaptiveAvgPool2d with output size 1 (torch.nn.AdaptiveAvgPool2d(1), global average pooling):
//   x [N, C, H, W] -> y [N, C, 1, 1], y[n, c] = mean of x[n, c, :, :] (ops::global_avg_pool2d_*).
// Only output size 1 is built (what ResNets use); H, W >= 1.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class AdaptiveAvgPool2d final : public Module {
 public:
  /// Throws Error(invalid_argument) for an output size other than 1.
  explicit AdaptiveAvgPool2d(int64_t output_size = 1);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override { return "AdaptiveAvgPool2d(output_size=(1, 1))"; }
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::global_avg_pool2d_forward, ops::Op::global_avg_pool2d_backward};
  }

 private:
  Shape x_shape_;
  MemoryFormat x_format_ = MemoryFormat::contiguous;
  Tensor y_, dx_;
};

}  // namespace tandem::nn
