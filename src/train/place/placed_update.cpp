#include "train/place/placed_update.h"

#include <vector>

#include "tandem/amp_ops.h"
#include "tandem/stream.h"

namespace tandem::train {

bool PlacedUpdate::needed(const Run& r) { return !r.cfg.place.empty() && (r.scaler || r.grad_norm.defined()); }

// Whether the scaler's last inf check found an inf or NaN (the host waits for it).
static bool found_inf(const optim::LossScaler& scaler) {
  Tensor state = scaler.state();
  if (!state.device().is_host()) {
    const Stream s = runtime_for(state.device()).default_stream(state.device().index);
    state = state.to(Device{}, s);
    s.synchronize();
  }
  return state.data<float>()[ops::kFoundInf] != 0.0f;
}

void PlacedUpdate::update(Run& r) {
  const Device home = r.grad_norm.defined() ? r.grad_norm.device() : r.scaler->state().device();
  // The gradients in the parameters' order: those at home as they are, the others' copies.
  std::vector<nn::Parameter> copies(r.params.size());
  std::vector<nn::Parameter*> all;
  std::vector<size_t> away;
  for (size_t i = 0; i < r.params.size(); ++i) {
    nn::Parameter* p = r.params[i];
    if (!p->requires_grad || !p->grad.defined()) continue;
    if (p->grad.device() == home) {
      all.push_back(p);
      continue;
    }
    copies[i].grad = copier_.cross(p->grad, home);
    all.push_back(&copies[i]);
    away.push_back(i);
  }
  if (r.scaler) r.scaler->unscale_(all);  // once, before clipping
  if (r.grad_norm.defined()) {
    std::vector<Tensor> grads;
    for (nn::Parameter* p : all) grads.push_back(p->grad);
    ops::clip_grad_norm_(grads, r.cfg.clip_grad_norm, r.grad_norm);
  }
  for (size_t i : away) r.params[i]->grad = copier_.cross(copies[i].grad, r.params[i]->value.device());
  if (!r.scaler) {
    r.home->update();
    return;
  }
  if (!found_inf(*r.scaler)) {  // the gated step's: the schedule's clock counts the steps that ran
    optim::Optimizer& opt = r.optimizer();
    opt.set_lr(r.schedule->lr(opt.step_count()));
    opt.step();
  }
  r.scaler->update();
}

}  // namespace tandem::train
