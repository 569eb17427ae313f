// Conv1D: Hugging Face transformers' fully connected layer with the weight stored [in, out]
// (transformers.pytorch_utils.Conv1D, GPT-2's c_attn, c_proj and c_fc):
//   x [..., in] -> y [..., out] = x weight + bias; weight [in, out], bias [out] (f32; the
//   weight has a bf16/f16 compute copy under mixed precision).
// Init (GPT-2's, GPT2PreTrainedModel._init_weights): weight ~ N(0, init_std^2), bias 0.
// State: "weight", "bias" (the layout transformers saves and loads).
// Returned tensors may be reused by the module's next call once the caller dropped them.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Conv1D final : public Module {
 public:
  /// Throws Error(invalid_argument) for feature counts < 1 or init_std < 0.
  Conv1D(int64_t in_features, int64_t out_features, float init_std = 0.02f);

  /// x [..., in] (at least 1-D); throws Error(invalid_argument) for another last dimension.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::linear_in_out_forward, ops::Op::linear_in_out_backward_data,
            ops::Op::linear_in_out_backward_weights};
  }

  Parameter weight, bias;

 private:
  int64_t in_, out_;
  float init_std_;
  Tensor x_, y_, dx_;
};

}  // namespace tandem::nn
