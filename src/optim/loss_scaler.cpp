#include "tandem/optim/loss_scaler.h"

#include <algorithm>
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

bool unscale_check_host(float* x, int64_t n, float scale) {
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale));
  int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n > (int64_t{1} << 16)) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    bad |= !std::isfinite(x[i]);
    x[i] *= inv;
  }
  return bad != 0;
}

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

void LossScaler::set_found_inf(bool found_inf) {
  TD_CHECK_ARG(!stepped_, "LossScaler", "set_found_inf() after step(): call update() after each step()");
  const Tensor flag = state_.narrow(0, ops::kFoundInf, 1);
  Tensor host = Tensor::empty({1});
  host.data<float>()[0] = found_inf ? 1.0f : 0.0f;
  if (state_.device().is_host()) {
    Tensor(flag).copy_from(host);
  } else {
    const Stream s = runtime_for(device_).default_stream(device_.index);
    if (!state_.storage()->pending_write().query()) s.wait(state_.storage()->pending_write());
    runtime_for(device_).copy_async(flag.raw_data(), device_, host.raw_data(), Device{}, sizeof(float), s);
    s.synchronize();
  }
  unscaled_ = stepped_ = true;
  host_found_ = found_inf;
  host_checked_ = true;
}

bool LossScaler::check_on_host(const std::vector<nn::Parameter*>& params) {
  TD_CHECK_ARG(!stepped_, "LossScaler", "check_on_host() after step(): call update() after each step()");
  if (!unscaled_) unscale_(params);
  stepped_ = true;
  Tensor flag = state_.narrow(0, ops::kFoundInf, 1);
  if (!device_.is_host()) {
    const Stream s = runtime_for(device_).default_stream(device_.index);
    if (!state_.storage()->pending_write().query()) s.wait(state_.storage()->pending_write());
    flag = flag.to(Device{}, s);
    s.synchronize();
  }
  return flag.data<float>()[0] != 0.0f;
}

void LossScaler::update() {
  ops::amp_update_scale_(state_, options_.rule);
  unscaled_ = stepped_ = false;
  if (!host_checked_) return;
  host_checked_ = false;
  // amp_update_scale_'s rule on the host's copy (the same f32 arithmetic).
  const ops::AmpScaleParams& p = options_.rule;
  const float scale = host_scale_.load();
  if (host_found_) {
    host_scale_ = std::max(scale * p.backoff_factor, p.min_scale);
    host_tracker_ = 0;
  } else if (static_cast<float>(host_tracker_) + 1.0f >= static_cast<float>(p.growth_interval)) {
    const float grown = scale * p.growth_factor;
    if (std::isfinite(grown)) host_scale_ = grown;
    host_tracker_ = 0;
  } else {
    ++host_tracker_;
  }
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
  host_scale_ = s.scale;
  host_tracker_ = s.growth_tracker;
}

}  // namespace tandem::optim
