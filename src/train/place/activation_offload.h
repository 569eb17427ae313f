// ActivationOffloader: --activations-device cpu. With --recompute blocks each block keeps
// only its input between forward and backward; this moves that input to host memory while it
// waits. to_host() copies a device tensor to the host on a copy stream of the device, after
// the compute stream's work so far (device-side wait; the host does not block) and returns the
// host tensor at once (its storage carries the copy's pending write). to_device() copies it
// back on the same stream (so after that write) and makes the compute stream wait for the
// copy's event. Tensor::to keeps both storages alive until each copy ran, so the device
// buffer can be dropped at once after to_host(). The values are copied bit for bit: training
// gives the weights of --activations-device device.
// Thread-safety: one thread (the training thread), as Module.
#pragma once

#include "tandem/device.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::train {

/// Throws Error(invalid_argument, "[train] --activations-device cpu: expected an accelerator
/// --device ...") when `device` is the host (the run's dry runs check it before building).
void check_activation_offload_device(Device device);

class ActivationOffloader {
 public:
  /// `device`: the accelerator the model computes on (not the cpu). Errors: the runtime's.
  explicit ActivationOffloader(Device device);
  ActivationOffloader(const ActivationOffloader&) = delete;
  ActivationOffloader& operator=(const ActivationOffloader&) = delete;
  /// Waits for the copies in flight (errors are not raised from here).
  ~ActivationOffloader();

  /// `x` (on the device) as a host tensor, copied asynchronously.
  Tensor to_host(const Tensor& x);
  /// `host` (from to_host) back on the device, copied asynchronously; the compute stream waits.
  Tensor to_device(const Tensor& host);
  /// Waits for the copies queued so far (until then they keep their source storages alive).
  void synchronize() { copy_.synchronize(); }
  /// Bytes copied each way so far (to_host, to_device).
  int64_t bytes_to_host() const { return to_host_bytes_; }
  int64_t bytes_to_device() const { return to_device_bytes_; }

 private:
  Device device_;
  Stream copy_;
  int64_t to_host_bytes_ = 0, to_device_bytes_ = 0;
};

}  // namespace tandem::train
