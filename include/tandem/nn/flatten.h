// Flatten: x [N, d1, d2, ...] -> [N, d1*d2*...] (torch.nn.Flatten(1, -1)); a view, no copy.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Flatten final : public Module {
 public:
  /// x must have at least one dimension.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  std::string describe() const override { return "Flatten(start_dim=1, end_dim=-1)"; }

 private:
  Shape x_shape_;
};

}  // namespace tandem::nn
