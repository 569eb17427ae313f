// The parts of a GPT-2 decoder block (Radford et al. 2019; transformers' GPT2Attention, GPT2MLP
// and GPT2Block, whose state-dict names and Conv1D [in, out] weight layouts they keep):
//   CausalSelfAttention: x [B, T, C] -> c_attn (Conv1D C -> 3C: q, k, v side by side) ->
//     fused causal attention over n_head heads (ops::attention_forward; no [B, H, T, T] tensor
//     is kept) -> c_proj (Conv1D C -> C) -> [B, T, C]. State: c_attn.weight [C, 3C],
//     c_attn.bias, c_proj.weight [C, C], c_proj.bias.
//   MLP: x [..., C] -> c_fc (Conv1D C -> 4C) -> GELU (tanh) -> c_proj (Conv1D 4C -> C).
//   Block (pre-LayerNorm): h = x + attn(ln_1(x)); y = h + mlp(ln_2(h)) (residual adds without
//     activation, ops::add_forward). Children ln_1, attn, ln_2, mlp.
// Activations keep the input's dtype (f32, bf16 or f16; LayerNorm parameters, biases, the
// attention's log-sum-exp and all gradients of parameters stay f32).
// Init: Conv1D weights ~ N(0, 0.02^2), the c_proj weights (attention's and the MLP's, the
// projections into the residual stream) ~ N(0, (0.02 / sqrt(2 n_layer))^2) (GPT-2's scaling,
// as transformers' GPT2PreTrainedModel._init_weights), biases 0, LayerNorm weight 1, bias 0.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <memory>

#include "tandem/nn/conv1d.h"
#include "tandem/nn/gelu.h"
#include "tandem/nn/layer_norm.h"
#include "tandem/nn/module.h"
#include "tandem/nn/recomputing_block.h"

namespace tandem::nn {

class CausalSelfAttention final : public Module {
 public:
  /// Throws Error(invalid_argument) unless n_embd >= 1, n_head >= 1 and n_head divides n_embd.
  CausalSelfAttention(int64_t n_embd, int64_t n_head, float proj_init_std);

  /// x [B, T, C] -> [B, T, C]; throws Error(invalid_argument) for another shape.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::vector<NamedChild> named_children() override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::attention_forward, ops::Op::attention_backward}; }

  Conv1D c_attn, c_proj;

 private:
  int64_t c_, n_head_;
  Tensor qkv_, y_, lse_, dqkv_;
  bool have_forward_ = false;
};

class MLP final : public Module {
 public:
  MLP(int64_t n_embd, float proj_init_std);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  std::vector<NamedChild> named_children() override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;

  Conv1D c_fc;
  GELU act;
  Conv1D c_proj;
};

// Recompute (Module::set_recompute; the flag, the kept input and the re-run are
// nn::RecomputingBlock's): keeps only the input between forward and backward; the block's
// output is still kept (the next block's input). With set_kept_inputs the kept input waits in
// the store (host memory with --activations-device cpu), and the block's output is not kept
// either (it lives on with the caller, the next block's input, until that one moved it out);
// the next forward takes a new output buffer from the allocator.
class Block final : public RecomputingBlock {
 public:
  /// n_layer sets the residual projections' init scale; eps is the LayerNorms'.
  Block(int64_t n_embd, int64_t n_head, int64_t n_layer, float eps = 1e-5f);

  std::vector<NamedChild> named_children() override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::add_forward}; }

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;

 private:
  // h = x + attn(ln_1(x)) into h_; with `output`, y = h + mlp(ln_2(h)) into y_.
  void compute(const Tensor& x, bool output);
  // The RecomputingBlock hooks; y_ is the block's own output, apart from the internals.
  Tensor run_forward(const Tensor& x) override;
  void replay_forward(const Tensor& x) override { compute(x, false); }
  Tensor run_backward(const Tensor& dy) override;
  void release_internals() override;
  void release_output() override { y_ = Tensor(); }
  Shape plan_internals(const Shape& input, DType dtype, BufferPlan& plan) override;
  Tensor h_, y_, dh_, dx_;
};

}  // namespace tandem::nn
