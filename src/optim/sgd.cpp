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

void SGD::prepare_state(size_t index, nn::Parameter& p) {
  if (momentum_ != 0 && !find_state(index, "momentum_buffer"))
    create_state(index, "momentum_buffer", p.value.shape(), DType::f32);
}

void SGD::update(size_t index, nn::Parameter& p) {
  SgdParams sp;
  sp.lr = step_lr();
  sp.momentum = momentum_;
  sp.weight_decay = p.decay ? weight_decay_ : 0.0;
  sp.nesterov = nesterov_;
  Tensor buf;
  if (momentum_ != 0) {
    Tensor* t = find_state(index, "momentum_buffer");
    // A gated step's buffer exists already (prepare_state): the first step that runs sets it.
    sp.init_buffer = in_gated_step() ? step_count() == 0 : t == nullptr;
    if (t == nullptr) t = &create_state(index, "momentum_buffer", p.value.shape(), DType::f32);
    buf = *t;
  }
  if (gated_on_device()) {
    ops::sgd_step(static_cast<float*>(p.value.raw_data()), static_cast<const float*>(p.grad.raw_data()),
                  buf.defined() ? static_cast<float*>(buf.raw_data()) : nullptr, p.value.numel(), sp,
                  p.compute.defined() ? p.compute.raw_data() : nullptr,
                  p.compute.defined() ? p.compute.dtype() : DType::f32);
  } else {
    ops::sgd_step(p.value, p.grad, buf, sp, p.compute);  // rewrites the low-precision copy too
  }  // on the parameter's device
}

std::vector<std::pair<std::string, DType>> SGD::state_keys() const {
  if (momentum_ == 0) return {};
  return {{"momentum_buffer", DType::f32}};
}

}  // namespace tandem::optim
