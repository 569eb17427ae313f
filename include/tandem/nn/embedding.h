// TokenPositionEmbedding: GPT-2's input, the token embedding plus the learned position
// embedding (transformers' GPT2Model: inputs_embeds = wte(input_ids), position_embeds =
// wpe(position_ids), hidden = inputs_embeds + position_embeds), in one op:
//   tokens [B, T] i32 or i64 with ids in [0, V), T <= block_size -> y [B, T, C] in the
//   weights' compute dtype (f32, or the bf16/f16 copy under mixed precision).
// Parameters: wte [V, C] ("wte.weight"), wpe [block_size, C] ("wpe.weight"), f32 masters with
// a low-precision copy under mixed precision; the backward scatter-adds into their gradients
// deterministically (ops::embedding_backward). No input gradient (the input is ids).
// Init (GPT-2's): both ~ N(0, 0.02^2).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class TokenPositionEmbedding final : public Module {
 public:
  /// Throws Error(invalid_argument) for a size < 1.
  TokenPositionEmbedding(int64_t vocab_size, int64_t block_size, int64_t n_embd, float init_std = 0.02f);

  /// Throws Error(invalid_argument) for tokens that are not [B, T] i32/i64 with T <= block_size,
  /// and (cpu) for an id outside [0, V), naming it and its position.
  Tensor forward(const Tensor& tokens) override;
  /// Accumulates into wte.grad and wpe.grad; returns an undefined Tensor.
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::embedding_forward, ops::Op::embedding_backward}; }

  /// The dtype the embedding computes in: wte's compute copy's when it has one, else f32.
  DType compute_dtype() const { return wte.compute.defined() ? wte.compute.dtype() : DType::f32; }

  Parameter wte, wpe;

 private:
  int64_t vocab_, block_, c_;
  float init_std_;
  Tensor tokens_, y_;
};

}  // namespace tandem::nn
