// Choosing the next token from a language model's logits: greedy (temperature 0: the first
// largest logit, as torch.argmax) or sampling from softmax(logits / temperature) restricted to
// the top_k largest logits (Fan et al. 2018, "Hierarchical Neural Story Generation"; the
// rule of transformers' TopKLogitsWarper and TemperatureLogitsWarper) and then to the nucleus
// of top_p probability (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration";
// the rule of transformers' TopPLogitsWarper, applied after top_k). The random draw is one
// uniform double from a Philox stream keyed by (seed, position) (tandem/rng.h), so the same
// seed gives the same tokens on every machine and thread count.
// Thread-safety: reentrant.
#pragma once

#include <cstdint>

namespace tandem::nn {

struct SamplingOptions {
  double temperature = 1.0;  // >= 0 and finite; 0 = greedy (argmax)
  int64_t top_k = 0;         // >= 0; 0 = every token; above the vocabulary: every token
  uint64_t seed = 0;         // key of the random stream
  double top_p = 1.0;        // in (0, 1]; 1 = every token (no nucleus)
};

/// Throws Error(invalid_argument, "[generate] temperature ...: expected ...") for a negative or
/// non-finite temperature, for top_k < 0 and for top_p outside (0, 1] (NaN included).
void check_sampling(const SamplingOptions& o);

/// The index of the first largest of logits[0 .. n) (n >= 1; NaN never wins).
int64_t argmax(const float* logits, int64_t n);

/// The next token for logits[0 .. vocab) f32 at sequence position `position` (the draw of that
/// position: Philox(seed, kSamplingStream, position)). Greedy when temperature is 0 or top_k is
/// 1 (the same token as argmax); otherwise the k = min(top_k or vocab, vocab) largest logits
/// (ties: the lower id first) are weighted exp((l - max) / temperature), computed in double;
/// with top_p < 1 only the nucleus is kept: the shortest run of them, in that order, whose
/// weights sum to at least top_p of their total (a token is kept when the tokens before it
/// hold less than top_p; at least one is always kept). One is drawn by inverse CDF over the
/// kept tokens in that order. top_p = 1 skips the nucleus step, so it draws the same token as
/// no top_p, bit for bit. Throws as check_sampling, and Error(invalid_argument) for vocab < 1.
int64_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& o,
                     int64_t position);

}  // namespace tandem::nn
