#include "tandem/optim/loss_scaler.h"

#include <cmath>

#include "tandem/error.h"
#include "tandem/stream.h"

namespace tandem::optim {

namespace {

// Copies host floats into the device state and waits.
void write_state(const Tensor& state, const float (&v)[ops::kAmpStateSize]) {
  Tensor host = Tensor::empty({ops::kAmpStateSize});
  for (int i = 0; i < ops::kAmpStateSize; ++i) host.data<float>()[i] = v[i];
  if (state.device().is_host()) {
    Tensor(state).copy_from(host);
    return;
  }
  const Stream s = runtime_for(state.device()).default_stream(state.device().index);
  if (!state.storage()->pending_write().query()) s.wait(state.storage()->pending_write());
  runtime_for(state.device()).copy_async(state.raw_data(), state.device(), host.raw_data(), Device{}, host.nbytes(),
                                         s);
  s.synchronize();
}

}  // namespace

LossScaler::LossScaler(Device device, LossScalerOptions options) : device_(device), options_(options) {
  TD_CHECK_ARG(options.init_scale > 0 && std::isfinite(options.init_scale), "LossScaler",
               "init_scale must be a finite value > 0, found {}", options.init_scale);
  state_ = Tensor::empty({ops::kAmpStateSize}, DType::f32, device);
  load({static_cast<float>(options.init_scale), 0, 0});
  ops::amp_update_scale_(Tensor::zeros({ops::kAmpStateSize}), options.rule);  // checks the rule now
}

void LossScaler::scale_loss_grad(const Tensor& grad, const Tensor& dst) const { ops::amp_scale(grad, state_, dst); }

void LossScaler::unscale_(const std::vector<nn::Parameter*>& params) {
  TD_CHECK_ARG(!unscaled_, "LossScaler",
               "unscale_() was already called this step: the gradients are unscaled once, before clipping "
               "(call update() to end the step)");
  std::vector<Tensor> grads;
  for (nn::Parameter* p : params)
    if (p->requires_grad && p->grad.defined()) grads.push_back(p->grad);
  ops::amp_unscale_check_(grads, state_);
  unscaled_ = true;
}

void LossScaler::step(Optimizer& optimizer, const std::function<double(int64_t)>& lr_of_step) {
  TD_CHECK_ARG(!stepped_, "LossScaler", "step() was already called this step: call update() after each step()");
  if (!unscaled_) unscale_(optimizer.params());
  optimizer.set_skip_gate(state_, lr_of_step);
  optimizer.step();
  stepped_ = true;
}

void LossScaler::update() {
  ops::amp_update_scale_(state_, options_.rule);
  unscaled_ = stepped_ = false;
}

LossScalerState LossScaler::read() const {
  Tensor host = state_;
  if (!device_.is_host()) {
    const Stream s = runtime_for(device_).default_stream(device_.index);
    host = state_.to(Device{}, s);
    s.synchronize();
  }
  const float* v = host.data<float>();
  return {v[ops::kScale], static_cast<int64_t>(v[ops::kGrowthTracker]), static_cast<int64_t>(v[ops::kSkippedSteps])};
}

void LossScaler::load(const LossScalerState& s) {
  TD_CHECK_ARG(s.scale > 0 && std::isfinite(s.scale) && s.growth_tracker >= 0 && s.skipped_steps >= 0, "LossScaler",
               "expected a finite scale > 0 and counts >= 0, found scale {} tracker {} skipped {}", s.scale,
               s.growth_tracker, s.skipped_steps);
  write_state(state_, {s.scale, static_cast<float>(s.growth_tracker), 0.0f, static_cast<float>(s.skipped_steps)});
}

}  // namespace tandem::optim
