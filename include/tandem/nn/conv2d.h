// Conv2d: 2-D cross-correlation (torch.nn.Conv2d, groups = 1, no dilation).
//   x [N, in_channels, H, W] -> y [N, out_channels, P, Q],
//   P = (H + 2*padding - kernel_size) / stride + 1 (same for Q);
//   weight [out_channels, in_channels, kernel_size, kernel_size], bias [out_channels].
// Init (PyTorch default): weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// fan_in = in_channels * kernel_size^2 (kaiming_uniform with a = sqrt(5)); or, after
// set_init(ConvInit::kaiming_normal_fan_out), weight ~ N(0, 2 / fan_out) with
// fan_out = out_channels * kernel_size^2 and bias 0 (torchvision's ResNet init:
// kaiming_normal_(mode="fan_out", nonlinearity="relu")).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"
#include "tandem/ops.h"

namespace tandem::nn {

enum class ConvInit { pytorch_default, kaiming_normal_fan_out };

class Conv2d final : public Module {
 public:
  /// Throws Error(invalid_argument) for non-positive channels, kernel or stride, or negative padding.
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::conv2d_forward, ops::Op::conv2d_backward_data, ops::Op::conv2d_backward_weights};
  }
  /// How reset_parameters draws the weights (takes effect at the next reset).
  void set_init(ConvInit init) { init_ = init; }

  Parameter weight, bias;

 private:
  int64_t in_, out_, kernel_, stride_, padding_;
  ConvInit init_ = ConvInit::pytorch_default;
  ops::Conv2dParams params_;
  Tensor x_, y_, dx_;
};

}  // namespace tandem::nn
