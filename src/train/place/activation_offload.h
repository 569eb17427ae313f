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

#include <map>
#include <memory>

#include "tandem/device.h"
#include "tandem/nn/module.h"
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

// ActivationOffloads: the kept block inputs of models whose blocks run on several devices
// (--place: blocks or modules on devices of their own; --devices: a replica per device). Each
// block's input moves with the ActivationOffloader of the device it was computed on (made at
// its first input); it comes back to that device. An input computed on the cpu stays where it
// is (it is in host memory already). The moves are those of one device's run, so training
// gives the weights of inputs kept on the devices.
class ActivationOffloads {
 public:
  /// `first`: the run's device, whose offloader is made now (an error for the cpu when
  /// `first_only`: a one-device run offloads nothing there); the others are made when used.
  ActivationOffloads(Device first, bool first_only);
  ActivationOffloads(const ActivationOffloads&) = delete;
  ActivationOffloads& operator=(const ActivationOffloads&) = delete;

  /// Gives every declared block of `model` (with recompute on each) one KeptInputs store that
  /// moves with this object's offloaders; `model` keeps this object alive. Checks as
  /// Module::set_activation_offload, save that the blocks may run on devices of their own.
  /// Throws Error(invalid_argument) for a model without blocks or a block without recompute.
  static void install(const std::shared_ptr<ActivationOffloads>& self, nn::Module& model);
  /// `x` (on its device) as a host tensor, copied asynchronously by that device's offloader.
  Tensor to_host(const Tensor& x);
  /// `host` (from to_host) back on the device it came from.
  Tensor to_device(const Tensor& host);

 private:
  ActivationOffloader& offloader(Device device);

  std::map<std::string, std::unique_ptr<ActivationOffloader>> offloaders_;  // by Device::str()
  std::map<const void*, Device> from_;  // host storage -> the device its input came from
};

}  // namespace tandem::train
