// Helpers for the cuda GPT tests: a rule-following token batch on cuda:0, host copies of a
// tensor and of every parameter's values.
#pragma once

#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "tandem/nn/module.h"

namespace tandem::testing {

/// Tokens and next-token targets [B, T] i64 on cuda:0: id i is (7 i + i / 13) mod vocab.
inline std::pair<Tensor, Tensor> rule_batch(int64_t b, int64_t t, int64_t vocab) {
  Tensor tokens = Tensor::empty({b, t}, DType::i64), targets = Tensor::empty({b, t}, DType::i64);
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.data<int64_t>()[i] = (7 * i + i / 13) % vocab;
    targets.data<int64_t>()[i] = (7 * (i + 1) + (i + 1) / 13) % vocab;
  }
  return {tokens.to(cuda0(), cuda_stream()), targets.to(cuda0(), cuda_stream())};
}

/// The f32 values of a tensor on any device (the host waits for the copy).
inline std::vector<float> host_floats(const Tensor& t) {
  const Tensor h = t.device().is_host() ? t : t.to(Device{}, cuda_stream());
  cuda_stream().synchronize();
  return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
}

/// Every parameter's values, in parameters() order.
inline std::vector<std::vector<float>> parameter_values(nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (nn::Parameter* p : m.parameters()) out.push_back(host_floats(p->value));
  return out;
}

}  // namespace tandem::testing
