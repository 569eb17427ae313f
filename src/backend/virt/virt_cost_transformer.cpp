// FLOP counts of the transformer ops (formulas in virt_cost_transformer.h).
#include "virt_cost_transformer.h"

namespace tandem::virt {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

}  // namespace

double embedding_flops(int64_t positions, int64_t channels, bool backward) {
  return (backward ? 2.0 : 1.0) * d(positions) * d(channels);
}

double layer_norm_flops(int64_t elements, bool backward) { return (backward ? 11.0 : 8.0) * d(elements); }

double gelu_flops(int64_t elements, bool backward) { return (backward ? 16.0 : 9.0) * d(elements); }

double add_flops(int64_t elements) { return d(elements); }

double attention_flops(int64_t batch, int64_t seq, int64_t channels, int64_t heads, bool backward) {
  if (heads <= 0) return 0;
  const double pairs = d(batch) * d(heads) * d(seq) * (d(seq) + 1) / 2;
  const double head_dim = d(channels) / d(heads);
  if (!backward) return pairs * (2 * 2 * head_dim + 5);
  return pairs * (5 * 2 * head_dim + 4) + d(batch) * d(seq) * d(channels) * 2;
}

double classifier_flops(int64_t rows, int64_t channels, int64_t vocab, bool grad) {
  const double logits = d(rows) * d(vocab);
  return logits * (2 * d(channels) + 5) + (grad ? logits * (4 * d(channels) + 2) : 0.0);
}

}  // namespace tandem::virt
