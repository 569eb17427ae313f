// Helpers for the cuda GPT tests: a rule-following token batch on cuda:0, host copies of a
// tensor and of every parameter's values, and a few AdamW steps of a GPT on that batch.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "tandem/nn/gpt.h"
#include "tandem/nn/module.h"
#include "tandem/ops.h"
#include "tandem/optim/optimizer.h"

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

/// `steps` AdamW steps (learning rate `lr`, the other options default) of `m`, whose parameters
/// are where it computes on cuda:0 or streamed there, on rule_batch(4, 32, vocab): returns each
/// step's metrics [4] (loss sum, correct, tokens, -) read after the step. `after_forward(step)`
/// runs between forward and backward, `after_backward(step)` before the optimizer's step.
inline std::vector<std::vector<float>> adamw_steps(nn::Gpt& m, int steps, int64_t vocab, double lr = 1e-3,
                                                   const std::function<void(int)>& after_forward = {},
                                                   const std::function<void(int)>& after_backward = {}) {
  const auto [tokens, targets] = rule_batch(4, 32, vocab);
  const Tensor metrics = Tensor::empty({4}, DType::f32, cuda0());
  optim::OptimizerOptions o;
  o.lr = lr;
  auto opt = optim::make_optimizer("adamw", m.parameters(), o);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < steps; ++step) {
    ops::zero_(metrics);
    opt->zero_grad();
    m.forward_loss(tokens, targets, metrics);
    if (after_forward) after_forward(step);
    m.backward_loss();
    if (after_backward) after_backward(step);
    opt->step();
    out.push_back(host_floats(metrics));
  }
  return out;
}

}  // namespace tandem::testing
