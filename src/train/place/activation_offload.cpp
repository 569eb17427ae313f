#include "train/place/activation_offload.h"

#include "tandem/error.h"
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
