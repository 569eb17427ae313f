// SGD with momentum, Nesterov momentum and L2 weight decay (torch.optim.SGD, dampening 0):
//   d = grad + weight_decay*param
//   buf = d on a parameter's first update, else momentum*buf + d
//   d = nesterov ? d + momentum*buf : buf
//   param -= lr*d
// State per parameter: "momentum_buffer" (only when momentum != 0).
// Thread-safety: as Optimizer.
#pragma once

#include "tandem/optim/optimizer.h"

namespace tandem::optim {

class SGD : public Optimizer {
 public:
  ~SGD() override { wait_gated(); }
  /// Throws Error(invalid_argument) for negative lr, momentum or weight_decay, and for
  /// nesterov with momentum 0 (PyTorch's rule).
  SGD(std::vector<nn::Parameter*> params, double lr, double momentum = 0.0, bool nesterov = false,
      double weight_decay = 0.0);

  const char* name() const override { return "sgd"; }
  double momentum() const { return momentum_; }
  bool nesterov() const { return nesterov_; }
  double weight_decay() const { return weight_decay_; }
  std::vector<std::pair<std::string, DType>> state_keys() const override;

 protected:
  void update(size_t index, nn::Parameter& p) override;
  void prepare_state(size_t index, nn::Parameter& p) override;

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
};

}  // namespace tandem::optim
