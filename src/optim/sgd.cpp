#include "tandem/optim/sgd.h"

#include "tandem/error.h"
#include "tandem/optim/kernels.h"

namespace tandem::optim {

SGD::SGD(std::vector<nn::Parameter*> params, double lr, double momentum, bool nesterov,
         double weight_decay)
    : Optimizer("sgd", std::move(params), lr),
      momentum_(momentum),
      nesterov_(nesterov),
      weight_decay_(weight_decay) {
  TD_CHECK_ARG(momentum >= 0, op_, "momentum must be >= 0, got {}", momentum);
  TD_CHECK_ARG(weight_decay >= 0, op_, "weight_decay must be >= 0, got {}", weight_decay);
  TD_CHECK_ARG(!nesterov || momentum > 0, op_, "nesterov requires momentum > 0, got {}",
               momentum);
}

void SGD::update(size_t index, nn::Parameter& p) {
  SgdParams sp;
  sp.lr = lr();
  sp.momentum = momentum_;
  sp.weight_decay = p.decay ? weight_decay_ : 0.0;
  sp.nesterov = nesterov_;
  Tensor buf;
  if (momentum_ != 0) {
    Tensor* t = find_state(index, "momentum_buffer");
    sp.init_buffer = t == nullptr;
    if (t == nullptr) t = &create_state(index, "momentum_buffer", p.value.shape(), DType::f32);
    buf = *t;
  }
  ops::sgd_step(p.value, p.grad, buf, sp, p.compute);  // rewrites the low-precision copy too  // on the parameter's device
}

std::vector<std::pair<std::string, DType>> SGD::state_keys() const {
  if (momentum_ == 0) return {};
  return {{"momentum_buffer", DType::f32}};
}

}  // namespace tandem::optim
