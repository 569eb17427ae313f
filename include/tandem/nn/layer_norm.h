// LayerNorm over the last dimension (torch.nn.LayerNorm(C, eps); Ba et al. 2016):
//   x [..., C] f32, bf16 or f16 -> y of x's shape and dtype, y = (x - mean) / sqrt(var + eps)
//   * weight + bias with the biased variance of each row; weight [C] and bias [C] stay f32.
// Init (PyTorch's and GPT-2's): weight 1, bias 0. State: "weight", "bias".
// Returned tensors may be reused by the module's next call once the caller dropped them.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class LayerNorm final : public Module {
 public:
  /// Throws Error(invalid_argument) for features < 1 or eps <= 0.
  explicit LayerNorm(int64_t features, float eps = 1e-5f);

  /// x [..., C]; throws Error(invalid_argument) when the last dimension is not C.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::layer_norm_forward, ops::Op::layer_norm_backward}; }

  Parameter weight, bias;

 private:
  int64_t c_;
  float eps_;
  Tensor x_, y_, mean_, rstd_, dx_;
};

}  // namespace tandem::nn
