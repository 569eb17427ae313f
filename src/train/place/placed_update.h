// The update of a placed model (--place) with a loss scaler (--precision fp16, --loss-scale
// dynamic) or --clip-grad-norm. The inf check, the unscale and the global norm are ops over the
// gradients of one device, and a placed model's live on several: the gradients of the
// parameters on other devices than the run's are copied to the run's device (asynchronously,
// on copy streams: BoundaryCopier), where the inf check, the unscale and the clipping run over
// all of them in the parameters' order. That is the one-device run's op on the same values in
// the same order, so the norm, the found-inf flag and the clipped gradients are its bits; the
// results go back to their parameters' devices (each such gradient tensor is replaced by its
// copy). The cost: the other devices' f32 gradients in transit on the run's device while the
// update runs, and a copy each way. With a loss scaler the optimizer step is gated on the host
// (a device-side gate runs on one device, and the parameters live on several): the host reads
// the found-inf flag (one wait per step) and runs the step at the learning rate of the steps
// that ran, as the gated step does, or skips it; the scale's rule then runs on the device.
// Thread-safety: the training thread only.
#pragma once

#include "train/place/boundary_copy.h"
#include "train/run_builder.h"

namespace tandem::train {

class PlacedUpdate {
 public:
  /// Whether `r` needs it: --place with a loss scaler or --clip-grad-norm.
  static bool needed(const Run& r);
  /// The step's update from r.params' gradients (the mean over the micro-batches taken
  /// already): unscale and inf check (r.scaler), clipping (r.grad_norm), then the optimizer
  /// step (r.home->update(), or the host-gated step with a scaler) and the scale's rule.
  /// Errors: the ops' and the runtimes' (out of device memory for the copies).
  void update(Run& r);

 private:
  BoundaryCopier copier_;
};

}  // namespace tandem::train
