// Linear: y = x w^T + b (torch.nn.Linear).
//   x [N, in_features] -> y [N, out_features]; weight [out, in], bias [out].
// Init (PyTorch default, Linear.reset_parameters): weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
// Returned tensors may be reused by the module's next call once the caller dropped them.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Linear final : public Module {
 public:
  /// Throws Error(invalid_argument) for non-positive feature counts.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  /// x [N, in_features] f32 -> [N, out_features]; throws on another shape.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::linear_forward, ops::Op::linear_backward_data, ops::Op::linear_backward_weights};
  }

  Parameter weight, bias;  // bias.value undefined when constructed without bias

 private:
  int64_t in_, out_;
  Tensor x_, y_, dx_;
};

}  // namespace tandem::nn
