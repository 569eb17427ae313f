// Float64 reference updates (torch.optim.Adam / AdamW / SGD docs), one element at a time,
// written independently of the kernels for the tests to compare against.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace tandem::optim::testing {

struct RefAdamState {
  std::vector<double> param, exp_avg, exp_avg_sq;
};

// One update with the PyTorch formulas: bias corrections from the integer step, eps added
// after dividing sqrt(v) by sqrt(bc2), AdamW decay from the previous weights.
inline void ref_adam_step(RefAdamState& s, const std::vector<double>& grad, double lr,
                          double beta1, double beta2, double eps, double weight_decay,
                          bool decoupled, int64_t step) {
  const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  for (size_t i = 0; i < s.param.size(); ++i) {
    double p = s.param[i];
    double g = grad[i];
    if (decoupled) {
      p *= 1.0 - lr * weight_decay;
    } else {
      g += weight_decay * s.param[i];
    }
    s.exp_avg[i] = beta1 * s.exp_avg[i] + (1.0 - beta1) * g;
    s.exp_avg_sq[i] = beta2 * s.exp_avg_sq[i] + (1.0 - beta2) * g * g;
    const double denom = std::sqrt(s.exp_avg_sq[i]) / std::sqrt(bc2) + eps;
    s.param[i] = p - (lr / bc1) * s.exp_avg[i] / denom;
  }
}

struct RefSgdState {
  std::vector<double> param, momentum_buffer;
  bool has_buffer = false;
};

inline void ref_sgd_step(RefSgdState& s, const std::vector<double>& grad, double lr,
                         double momentum, double weight_decay, bool nesterov) {
  if (momentum != 0 && !s.has_buffer) s.momentum_buffer.assign(s.param.size(), 0.0);
  for (size_t i = 0; i < s.param.size(); ++i) {
    double d = grad[i] + weight_decay * s.param[i];
    if (momentum != 0) {
      double& b = s.momentum_buffer[i];
      b = s.has_buffer ? momentum * b + d : d;
      d = nesterov ? d + momentum * b : b;
    }
    s.param[i] -= lr * d;
  }
  if (momentum != 0) s.has_buffer = true;
}

}  // namespace tandem::optim::testing
