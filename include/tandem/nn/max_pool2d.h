// MaxPool2d (torch.nn.MaxPool2d, no dilation, floor mode):
//   x [N, C, H, W] -> y [N, C, P, Q], P = (H + 2*padding - kernel_size) / stride + 1.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"
#include "tandem/ops.h"

namespace tandem::nn {

class MaxPool2d final : public Module {
 public:
  /// stride 0 means stride = kernel_size (PyTorch's default). Throws Error(invalid_argument)
  /// for kernel_size < 1, stride < 0 or padding outside [0, kernel_size / 2].
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::max_pool2d_forward, ops::Op::max_pool2d_backward}; }

 private:
  ops::Pool2dParams params_;
  Shape x_shape_;
  MemoryFormat x_format_ = MemoryFormat::contiguous;
  Tensor y_, indices_, dx_;
};

}  // namespace tandem::nn
