// Text generation with a GPT-2: the prompt is run once through the decoder's key/value cache
// (prefill), then each new token is chosen from the last position's logits (sampling.h) and
// run as one more position, until max_new_tokens tokens were made, the end-of-text id was
// made, or the caller's callback says stop. The same weights, prompt and options give the
// same tokens (the draws are keyed by (seed, position)).
// Thread-safety: one thread at a time per decoder (see gpt_decoder.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/nn/generate/gpt_decoder.h"
#include "tandem/nn/generate/sampling.h"

namespace tandem::nn {

struct GenerateOptions {
  int64_t max_new_tokens = 32;  // >= 0; prompt + max_new_tokens <= n_positions
  SamplingOptions sampling;     // temperature, top_k, seed
  int64_t eos_id = -1;          // stop once this id was made (it is kept in the output); -1: never
};

struct GenerateResult {
  std::vector<int64_t> tokens;  // the new tokens, without the prompt
  std::string finish_reason;    // "length" (max_new_tokens), "stop" (eos_id or the callback)
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;  // running the prompt, choosing the first token
  double decode_seconds = 0;   // every later token (one position each)
  /// Tokens per second after the first: (tokens - 1) / decode_seconds, 0 with fewer than 2.
  double decode_tokens_per_s() const;
};

/// Throws Error(invalid_argument, "[generate] ...") naming the field: an empty prompt, an id
/// outside [0, vocab_size) (naming it and its position), max_new_tokens < 0, prompt +
/// max_new_tokens above n_positions (saying how many new tokens fit), and check_sampling's
/// errors. All are checked before anything runs.
void check_generate(const GptConfig& config, const std::vector<int64_t>& prompt,
                    const GenerateOptions& o);

/// Resets `decoder` and generates after `prompt` (see check_generate for its errors).
/// `on_token(id)` is called for each new token as soon as it is chosen (e.g. to print it);
/// returning false stops generation after that token.
GenerateResult generate(GptDecoder& decoder, const std::vector<int64_t>& prompt,
                        const GenerateOptions& o,
                        const std::function<bool(int64_t)>& on_token = {});

}  // namespace tandem::nn
