// KeptInputs: where recomputing blocks (Module::set_recompute) keep their inputs between a
// training forward and its backward when those inputs wait away from the device
// (--activations-device cpu, train/place/activation_offload.h). A block puts its input after
// its forward (moved out at once with `to_host`) and takes it back at the start of its backward;
// blocks run their backwards in the reverse order of their forwards, so taking block i's input
// brings the input put just before it (block i - 1's) back ahead with `to_device`, and that
// copy overlaps block i's backward. The moves are bit-exact copies: training gives the weights
// of inputs kept on the device.
// Owners are the blocks (any stable pointer). A block that puts again before taking (a training
// forward without its backward) replaces its older input.
// Shapes and dtypes: whatever the blocks keep ([N, C, H, W] activations of a ResNet, in any
// memory format; the moves keep it).
// Thread-safety: one thread at a time (the one that runs the model, see Module).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::nn {

class KeptInputs {
 public:
  /// Copies a tensor away from the device, or back; both return at once (asynchronous
  /// copies ordered by the caller's streams and events).
  using MoveFn = std::function<Tensor(const Tensor&)>;
  /// Throws Error(invalid_argument) when either function is empty.
  KeptInputs(MoveFn to_host, MoveFn to_device);

  /// After `owner`'s training forward: keeps `x` (a device tensor) away from the device.
  void put(const void* owner, const Tensor& x);
  /// At the start of `owner`'s backward: its input on the device (brought back ahead when the
  /// block after it took its own), and the input put before `owner`'s starts coming back.
  /// Throws Error(invalid_argument) when `owner` has put nothing since it last took.
  Tensor take(const void* owner);
  /// Inputs kept away from the device now.
  size_t size() const { return away_.size(); }

 private:
  MoveFn to_host_, to_device_;
  std::vector<std::pair<const void*, Tensor>> away_;  // in put order
  const void* ahead_owner_ = nullptr;                 // whose input is coming back ahead
  Tensor ahead_;
};

}  // namespace tandem::nn
