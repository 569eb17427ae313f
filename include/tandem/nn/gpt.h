// Gpt: a GPT-2 language model (Radford et al. 2019), the layout of Hugging Face transformers'
// GPT2LMHeadModel:
//   tokens [B, T] i32/i64 (T <= block_size) -> transformer.wte + transformer.wpe
//   (TokenPositionEmbedding) -> n_layer pre-LayerNorm blocks transformer.h.<i> (Block) ->
//   transformer.ln_f -> the lm_head, tied to wte: logits = h wte^T, no bias.
// State-dict names and order as GPT2LMHeadModel.state_dict(): transformer.wte.weight,
// transformer.wpe.weight, transformer.h.0.ln_1.weight, transformer.h.0.ln_1.bias,
// transformer.h.0.attn.c_attn.weight [C, 3C], ..., transformer.h.0.mlp.c_proj.bias, ...,
// transformer.ln_f.weight, transformer.ln_f.bias; lm_head.weight is the same tensor as
// transformer.wte.weight and is not listed again (one parameter, updated once).
// Init (GPT-2's, GPT2PreTrainedModel._init_weights): embeddings and Conv1D weights ~ N(0,
// 0.02^2), attn.c_proj and mlp.c_proj weights ~ N(0, (0.02 / sqrt(2 n_layer))^2), biases 0,
// LayerNorm weight 1 and bias 0; drawn from Philox(seed, parameter index) (init_parameters).
// Two ways through it:
//  - forward(tokens) -> logits [B, T, V] and backward(dlogits) (generation, and any loss on
//    the logits; the logits tensor is materialised);
//  - forward_loss(tokens, targets, metrics) then backward_loss() for training: the lm_head and
//    the cross-entropy are fused (ops::classifier_cross_entropy), so no [B*T, V] tensor
//    exists; the lm_head's gradient is added to wte.grad during forward_loss (train mode).
// Activations take the compute dtype of the weights (f32, or bf16/f16 after
// set_compute_dtype); the loss, LayerNorm parameters and every gradient stay f32.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/device.h"

#include "tandem/nn/block_loop.h"
#include "tandem/nn/embedding.h"
#include "tandem/nn/layer_norm.h"
#include "tandem/nn/module.h"
#include "tandem/nn/param_stream.h"
#include "tandem/nn/transformer_block.h"

namespace tandem::nn {

/// The sizes of a GPT-2 model, named as transformers' GPT2Config (block_size is n_positions).
struct GptConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  float layer_norm_epsilon = 1e-5f;
};

/// The named sizes: "gpt2" (12 layers, 12 heads, 768 wide, block 1024: 124M parameters with
/// the 50257 vocabulary), "gpt2-medium" (24, 16, 1024), "gpt2-large" (36, 20, 1280), "gpt2-xl"
/// (48, 25, 1600), all with block 1024, and "gpt-mini" (6, 6, 384, block 256), each with
/// `vocab_size` tokens. Throws Error(invalid_argument, "[model] unknown GPT 'x' (expected
/// ...)") for another name and for vocab_size < 1.
GptConfig gpt_config(const std::string& name, int64_t vocab_size);
/// The names gpt_config accepts.
std::vector<std::string> gpt_config_names();

class Gpt final : public Module {
 public:
  /// Throws Error(invalid_argument) for a size < 1 or n_head not dividing n_embd. The
  /// parameters are initialised with seed 0 (init_parameters(seed) for another).
  explicit Gpt(const GptConfig& config);

  /// tokens [B, T] -> logits [B, T, V] in the compute dtype.
  Tensor forward(const Tensor& tokens) override;
  /// dlogits [B, T, V] (the compute dtype) after a train-mode forward(): accumulates every
  /// parameter's gradient; returns an undefined Tensor (the input is token ids).
  Tensor backward(const Tensor& dlogits) override;
  /// tokens [B, T] -> the buffers of the fused training step (forward_loss, backward_loss):
  /// the embedding, every block, ln_f and the hidden states' gradient; returns [B, T, C].
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;

  /// The fused training forward: targets [B, T] i32/i64 (the next tokens; `ignore_index`
  /// counts nowhere). Adds to metrics [4] f32 (on the model's device, optional) the loss sum,
  /// the correct rows, the counted rows and the rows with a target outside [0, V) (see
  /// ops::classifier_cross_entropy); the mean loss is metrics[0] / metrics[2]. In train mode
  /// it also adds grad_loss times the mean loss's gradient w.r.t. the lm_head to wte.grad and
  /// keeps the one w.r.t. the final hidden states for backward_loss(). `grad_scale`
  /// (optional, a loss scaler's state on the device) multiplies grad_loss by its element 0
  /// in stream order (ops::classifier_cross_entropy): the scaled gradients of fp16 training.
  void forward_loss(const Tensor& tokens, const Tensor& targets, const Tensor& metrics, float grad_loss = 1.0f,
                    int64_t ignore_index = -1, const Tensor& grad_scale = Tensor());
  /// The rest of the backward after a train-mode forward_loss(): accumulates every
  /// parameter's gradient. Throws Error(invalid_argument) without one.
  void backward_loss();

  /// The trainer's fused loss (Module::fuses_loss): forward_loss with grad_loss 1 and
  /// ignore_index -1 (metrics count token positions) and the loss scale `grad_scale`, and
  /// backward_loss.
  bool fuses_loss() const override { return true; }
  void loss_forward(const Tensor& input, const Tensor& target, const Tensor& metrics,
                    const Tensor& grad_scale = Tensor()) override {
    forward_loss(input, target, metrics, 1.0f, -1, grad_scale);
  }
  void loss_backward() override { backward_loss(); }

  std::vector<NamedChild> named_children() override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override;
  /// {"lm_head.weight", "transformer.wte.weight"}: the tied output embedding.
  std::vector<std::pair<std::string, std::string>> tied_state() const override;
  /// vocab_size, n_positions (block_size), n_embd, n_layer, n_head, layer_norm_epsilon, as
  /// decimal text under GPT2Config's names.
  std::vector<std::pair<std::string, std::string>> config_metadata() const override;
  const GptConfig& config() const { return config_; }

  /// The blocks (Module::blocks): transformer.h.0 .. transformer.h.{n_layer - 1}; the
  /// embedding ("transformer": wte, wpe) and ln_f ("transformer.ln_f") outside them, with the
  /// tied lm_head. Blocks placed on devices of their own (places_blocks).
  ModelBlocks blocks() override;
  /// Blocks on several devices (--place; Module::set_block_devices): block i runs on
  /// devices[i] and must already be there; the embedding, ln_f and the tied lm_head stay
  /// where the embedding is. The hidden states cross before each block on another device than
  /// its input and back before ln_f; their gradients cross the same boundaries in reverse.
  /// Throws Error(invalid_argument) for a count other than n_layer or an empty `cross` with
  /// devices.
  void set_block_devices(std::vector<Device> devices, CrossFn cross) override;
  /// The devices set_block_devices gave (empty: none given).
  const std::vector<Device>& block_devices() const { return loop_.devices(); }

  /// The seam to parameters streamed from their home (tandem/nn/param_stream.h): the blocks
  /// are the parts, kOuter (embeddings, ln_f and the tied lm_head) the part in use for the step.
  using Pass = StreamPass;
  static constexpr int kOuter = kOuterPart;
  /// Installs `stream` (Module::set_param_stream; not owned, null removes it). Throws
  /// Error(invalid_argument) with set_block_devices.
  void set_param_stream(ParamStream* stream) override;

  TokenPositionEmbedding embed;  // transformer.wte, transformer.wpe
  std::vector<std::unique_ptr<Block>> h;
  LayerNorm ln_f;

 private:
  Tensor hidden(const Tensor& tokens);  // ln_f's output [B, T, C]
  void backward_hidden(const Tensor& dh);
  GptConfig config_;
  std::vector<std::string> block_names_;
  std::vector<Module*> blocks_;  // h, in forward order
  BlockLoop loop_;  // after h: its copy function is destroyed (waiting for its copies) before the blocks
  Tensor hf_, logits_, dh_;
  bool have_logits_ = false, have_loss_ = false;
};

}  // namespace tandem::nn
