#include "train/place/activation_offload.h"

#include "tandem/error.h"
#include "tandem/nn/kept_inputs.h"
#include "tandem/profile/profiler.h"

namespace tandem::train {

void check_activation_offload_device(Device device) {
  TD_CHECK_ARG(!device.is_host(), "train",
               "--activations-device cpu: expected an accelerator --device (on cpu the activations are in host "
               "memory already), got {}",
               device.str());
}

ActivationOffloader::ActivationOffloader(Device device) : device_(device) {
  check_activation_offload_device(device);
  copy_ = runtime_for(device).new_stream(device.index);
  copy_.set_label("activation copies");
}

ActivationOffloader::~ActivationOffloader() {
  try {
    copy_.synchronize();
  } catch (...) {
  }
}

Tensor ActivationOffloader::to_host(const Tensor& x) {
  profile::ScopedSpan span(profile::Stage::d2h, "activation to host");
  if (!x.storage()->pending_write().impl())
    copy_.wait(runtime_for(device_).current_stream(device_.index).record());
  to_host_bytes_ += static_cast<int64_t>(x.nbytes());
  return x.to(Device{}, copy_);
}

Tensor ActivationOffloader::to_device(const Tensor& host) {
  profile::ScopedSpan span(profile::Stage::h2d, "activation to device");
  Tensor d = host.to(device_, copy_);
  runtime_for(device_).current_stream(device_.index).wait(copy_.record());
  to_device_bytes_ += static_cast<int64_t>(host.nbytes());
  return d;
}

}  // namespace tandem::train

namespace tandem::train {

ActivationOffloads::ActivationOffloads(Device first, bool first_only) {
  if (first_only || !first.is_host()) offloader(first);
}

ActivationOffloader& ActivationOffloads::offloader(Device device) {
  std::unique_ptr<ActivationOffloader>& o = offloaders_[device.str()];
  if (!o) o = std::make_unique<ActivationOffloader>(device);
  return *o;
}

Tensor ActivationOffloads::to_host(const Tensor& x) {
  if (x.device().is_host()) return x;  // a block on the cpu: its input is in host memory already
  Tensor host = offloader(x.device()).to_host(x);
  from_[host.storage().get()] = x.device();
  return host;
}

Tensor ActivationOffloads::to_device(const Tensor& host) {
  const auto it = from_.find(host.storage().get());
  if (it == from_.end()) return host;  // computed on the cpu
  const Device device = it->second;
  from_.erase(it);
  return offloader(device).to_device(host);
}

void ActivationOffloads::install(const std::shared_ptr<ActivationOffloads>& self, nn::Module& model) {
  const nn::ModelBlocks d = model.blocks();
  TD_CHECK_ARG(!d.blocks.empty(), "train", "--activations-device cpu: the model declares no blocks whose inputs could move");
  for (const nn::NamedChild& b : d.blocks)
    TD_CHECK_ARG(b.module->recompute(), "train",
                 "--activations-device cpu: kept block inputs move only with recompute; {} does not recompute",
                 b.name);
  const auto store = std::make_shared<nn::KeptInputs>([self](const Tensor& x) { return self->to_host(x); },
                                                      [self](const Tensor& x) { return self->to_device(x); });
  for (const nn::NamedChild& b : d.blocks) b.module->set_kept_inputs(store);
}

}  // namespace tandem::train
