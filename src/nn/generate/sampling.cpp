#include "tandem/nn/generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "tandem/error.h"
#include "tandem/rng.h"

namespace tandem::nn {
namespace {

constexpr uint64_t kSamplingStream = 0x73616d706c65ull;  // "sample": the generation draws

// A uniform double in [0, 1) with 53 random bits.
double uniform53(Philox& rng) {
  const uint64_t hi = rng.next_u32() >> 5, lo = rng.next_u32() >> 6;  // 27 + 26 bits
  return static_cast<double>((hi << 26) | lo) * 0x1.0p-53;
}

}  // namespace

void check_sampling(const SamplingOptions& o) {
  TD_CHECK_ARG(std::isfinite(o.temperature) && o.temperature >= 0, "generate",
               "temperature {}: expected a finite number >= 0 (0 = greedy)", o.temperature);
  TD_CHECK_ARG(o.top_k >= 0, "generate", "top_k {}: expected an integer >= 0 (0 = every token)",
               o.top_k);
  TD_CHECK_ARG(o.top_p > 0 && o.top_p <= 1, "generate",
               "top_p {}: expected a number in (0, 1] (1 = every token)", o.top_p);
}

int64_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i]))) best = i;
  return best;
}

int64_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& o,
                     int64_t position) {
  check_sampling(o);
  TD_CHECK_ARG(vocab >= 1, "generate", "expected logits of at least 1 token, found {}", vocab);
  if (o.temperature == 0 || o.top_k == 1) return argmax(logits, vocab);
  const int64_t k = o.top_k == 0 ? vocab : std::min(o.top_k, vocab);
  std::vector<int64_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // NaN counts as the lowest logit, so the order is strict and weak.
  const auto key = [logits](int64_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  const auto higher = [&key](int64_t a, int64_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  };
  if (k < vocab) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), higher);
    order.resize(static_cast<size_t>(k));
  } else {
    std::sort(order.begin(), order.end(), higher);
  }
  const double top = key(order[0]);
  if (!std::isfinite(top)) return order[0];  // +inf wins; all -inf or NaN: the first
  std::vector<double> cum(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const double l = key(order[i]);
    total += std::isfinite(l) ? std::exp((l - top) / o.temperature) : 0.0;
    cum[i] = total;
  }
  if (o.top_p < 1) {  // the nucleus: keep tokens while those before hold less than top_p
    const double want = o.top_p * total;
    size_t kept = 1;
    while (kept < cum.size() && cum[kept - 1] < want) ++kept;
    cum.resize(kept);
    order.resize(kept);
    total = cum.back();
  }
  Philox rng(o.seed, kSamplingStream, static_cast<uint32_t>(position));
  const double u = uniform53(rng) * total;
  const auto it = std::upper_bound(cum.begin(), cum.end(), u);
  return order[static_cast<size_t>(
      std::min<ptrdiff_t>(it - cum.begin(), static_cast<ptrdiff_t>(order.size()) - 1))];
}

}  // namespace tandem::nn
