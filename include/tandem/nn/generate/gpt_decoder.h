// GptDecoder: a GPT-2 (nn::Gpt) run one sequence at a time with a key/value cache, for text
// generation. append(ids) runs the new tokens at the next positions: each layer's c_attn
// output for them is written to that layer's cache (keys and values [n_positions, C] f32) and
// their queries attend to every cached position (cached_attention.h), so a prompt of T tokens
// is one pass over T positions (prefill) and each further token one pass over one position,
// never a rerun of the sequence. The arithmetic is Gpt::forward's, layer by layer, with the
// same ops (ops::embedding_forward, layer_norm_forward, linear_in_out_forward, gelu_forward,
// add_forward and the tied lm_head as linear_forward against wte), so the logits of position t
// equal Gpt::forward's at t to f32 rounding (tests/generate/gpt_decoder_test.cpp: 1e-4 of the
// largest).
// Why f32 on the host: one sequence is a row of a few hundred numbers per layer, and a GPU
// step would be bound by kernel launches and the read-back of each token's logits to choose
// the next; on the CPU the weights are read once per token through oneDNN's matrix-vector
// products (gpt-mini: 11 M parameters, 45 MB) and nothing crosses a bus. A model trained on a
// device is served from its host copy (Trainer::capture_weights, a weights file).
// Memory: 2 * n_layer * n_positions * n_embd floats of cache (gpt-mini: 4.7 MB; gpt2: 75 MB).
// Positions: at most n_positions (GPT2Config) tokens in all; append() refuses more, it never
// slides a window (a slid window changes every later position's embedding, so the cache
// would have to be rebuilt).
// Thread-safety: one thread at a time per decoder; decoders over one model may run on several
// threads at once (they only read its parameters), as long as nobody changes the parameters
// meanwhile.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/nn/gpt.h"
#include "tandem/tensor.h"

namespace tandem::nn {

class GptDecoder {
 public:
  /// Reads `model`'s parameters (kept by reference: the model must outlive the decoder) and
  /// allocates the cache. Throws Error(invalid_argument, "[GptDecoder] ...") when a parameter
  /// is not an f32 host tensor (a model on a device: copy its state to a host model first).
  explicit GptDecoder(const Gpt& model);

  const GptConfig& config() const { return config_; }
  /// Tokens cached so far (the next token's position).
  int64_t position() const { return pos_; }
  /// Forgets the cached tokens (a new sequence starts at position 0).
  void reset() { pos_ = 0; }

  /// Runs `ids` (n >= 1 token ids) at positions position() .. position() + n - 1 and caches
  /// them. Returns host f32 logits [n, V] of every new position when `all_logits`, else [1, V]
  /// of the last one (the tensor is the decoder's and is overwritten by the next call).
  /// Throws Error(invalid_argument, "[GptDecoder] ...") naming the id and its position for an
  /// id outside [0, vocab_size), and for position() + n > n_positions (nothing is cached then).
  Tensor append(const std::vector<int64_t>& ids, bool all_logits = false);

 private:
  struct Layer {
    const Block* block;
    Tensor k, v;  // [n_positions, C]
  };
  const Gpt& model_;
  GptConfig config_;
  std::vector<Layer> layers_;
  int64_t pos_ = 0;
  // Scratch for n rows, reallocated when n changes.
  Tensor tokens_, x_, a_, qkv_, att_, proj_, fc_, mean_, rstd_, logits_;
};

}  // namespace tandem::nn
