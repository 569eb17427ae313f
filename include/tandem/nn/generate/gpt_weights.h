// GPT-2 weights for generation: the sizes of a GPT2LMHeadModel state dict (tandem's --save or
// transformers' model.safetensors) and a host nn::Gpt holding them.
// Sizes: GPT2Config's names in the file's metadata (vocab_size, n_positions, n_embd, n_layer,
// n_head, layer_norm_epsilon: what tandem writes, Module::config_metadata) where present,
// checked against the tensors; otherwise read from the shapes (transformer.wte.weight [V, C],
// transformer.wpe.weight [P, C], the transformer.h.<i> blocks) and, for n_head, which no
// shape holds, from `n_head` (> 0), else from transformers' config.json beside the file.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tandem/nn/gpt.h"
#include "tandem/safetensors.h"

namespace tandem::nn {

/// The sizes of the GPT-2 in `tensors` with file metadata `metadata`; `what` names the source
/// (the file's path) in errors; n_head comes from the metadata, else from `n_head` > 0, else
/// from a config.json beside the file `what` names.
/// Throws Error(invalid_argument, "[generate] FILE holds weights of model 'mlp', which is not
/// a GPT ...") when the metadata records another model, Error(format, "[generate] FILE ...")
/// naming the tensor when transformer.wte.weight or .wpe.weight is missing or not 2-D, no
/// block is found, or a recorded size disagrees with the tensors, and Error(invalid_argument)
/// when n_head is unknown (saying how to give it) or does not divide n_embd.
GptConfig gpt_config_of(const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata, int64_t n_head,
                        const std::string& what);

/// Copies `tensors` into `model`'s parameters by state-dict name (bf16/f16 tensors widened to
/// f32). lm_head.weight may be present and must then equal transformer.wte.weight (GPT-2
/// ties them); transformers' attention-mask buffers (.attn.bias, .attn.masked_bias) are
/// skipped. Throws Error(format, "[generate] FILE: tensor 'x' ...") for a missing tensor,
/// another shape or dtype, an untied lm_head, or a tensor the model does not have.
void load_gpt_weights(Gpt& model, const NamedTensors& tensors, const std::string& what);

/// Reads safetensors file `path` (its Error(io)/Error(format)), works out the sizes as
/// gpt_config_of and returns a host
/// f32 Gpt holding the weights, in eval mode; `metadata` (optional) receives the file's.
std::unique_ptr<Gpt> load_gpt(const std::string& path, int64_t n_head = 0,
                              std::map<std::string, std::string>* metadata = nullptr);

}  // namespace tandem::nn
