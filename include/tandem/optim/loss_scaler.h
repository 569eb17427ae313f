// LossScaler: dynamic loss scaling with the semantics of PyTorch's torch.amp.GradScaler
// (docs: "Automatic Mixed Precision", GradScaler), for fp16 training (bf16 runs without one by
// default; it can be asked for). Its state lives on the device (tandem/amp_ops.h, [4] f32:
// scale, growth tracker, found_inf, skipped steps) and every rule runs as a device op, so a
// step never waits on the host; the state reaches the host with the metrics read-back.
//
// One training step with a scaler:
//   dlogits = scale_loss_grad(loss gradient)     // times the scale, before low precision
//   model backward
//   unscale_(params)                             // optional; ONCE per step, before clipping
//   ops::clip_grad_norm_(grads, max)             // optional, on the unscaled grads
//   step(optimizer)                              // unscales if not yet done, then the gated
//                                                // optimizer step: skipped on inf/NaN
//   update()                                     // the scale's rule; ends the step
// Rules (GradScaler's defaults): scale starts at 2^16; after growth_interval (2000)
// consecutive steps without inf/NaN it doubles; a step whose gradients hold inf/NaN is
// skipped (parameters, moments, step count and the schedule's clock unchanged) and halves the
// scale, which never drops below min_scale (1).
// Errors: unscale_ twice in one step, or step() without an update() after the previous one,
// throw Error(invalid_argument) (GradScaler raises RuntimeError for the first).
// Thread-safety: one thread drives a scaler (the one running the steps).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tandem/amp_ops.h"
#include "tandem/nn/module.h"
#include "tandem/optim/optimizer.h"
#include "tandem/tensor.h"

namespace tandem::optim {

struct LossScalerOptions {
  double init_scale = 65536.0;  // 2^16
  ops::AmpScaleParams rule;     // growth_factor 2, backoff_factor 0.5, growth_interval 2000, min_scale 1
};

/// The scaler's state as the host sees it (a read-back, a checkpoint).
struct LossScalerState {
  float scale = 65536.0f;
  int64_t growth_tracker = 0;
  int64_t skipped_steps = 0;
};

/// amp_unscale_check_'s maths on host floats (a host update's own check): x[i] *= the f32 1 /
/// scale (GradScaler's scale.double().reciprocal().float()) over n floats; returns whether any
/// was inf or NaN. OpenMP threads of the calling thread for large n; the same bits for any count.
bool unscale_check_host(float* x, int64_t n, float scale);

class LossScaler {
 public:
  /// State on `device` (cpu, virt or cuda; on cuda step() reads the found-inf flag back before
  /// the optimizer update, one 4-byte wait per step). Throws Error(invalid_argument) for init_scale <= 0 or a bad rule.
  LossScaler(Device device, LossScalerOptions options = {});

  /// The state tensor [4] f32 on the device (read it only in stream order: a read-back).
  const Tensor& state() const { return state_; }
  const LossScalerOptions& options() const { return options_; }

  /// dst (f32, bf16 or f16) = grad (f32) * scale: the loss gradient entering the backward.
  void scale_loss_grad(const Tensor& grad, const Tensor& dst) const;
  /// Checks every grad for inf/NaN and divides them by the scale (one device op). Once per
  /// step: a second call before update() throws Error(invalid_argument).
  void unscale_(const std::vector<nn::Parameter*>& params);
  /// unscale_(optimizer's parameters) unless done this step, then optimizer.step() gated on
  /// the check (Optimizer::set_skip_gate; `lr_of_step` as there). Throws
  /// Error(invalid_argument) when the previous step() had no update().
  void step(Optimizer& optimizer, const std::function<double(int64_t)>& lr_of_step = {});
  /// In place of unscale_ and step() where the update checked the gradients itself (an
  /// offloaded optimizer's host check, OffloadOptions::loss_scale): sets the state's found_inf
  /// to `found_inf` in stream order (waits for the 4-byte copy). Throws as step().
  void set_found_inf(bool found_inf);
  /// In place of step() where the update cannot be gated on the device (ZeRO-1: each rank's
  /// update ends in collectives): unscale_(params) unless done this step, then blocks until the
  /// check ran and returns whether it found an inf/NaN; the caller runs the update only when
  /// it did not, then calls update(). Throws as step().
  bool check_on_host(const std::vector<nn::Parameter*>& params);
  /// The scale as the host follows it: set by the constructor and load(), and moved by the
  /// rule at each update() after set_found_inf() (the host knows the verdict then). Exact while
  /// every step since the last load() went through set_found_inf(); any thread may read it.
  float host_scale() const { return host_scale_.load(); }
  /// The scale's rule for this step (one device op); ends the step.
  void update();

  /// Blocks until the device ran the queued work and returns the state (tests, checkpoints
  /// after a drain).
  LossScalerState read() const;
  /// Sets the state (a resumed run); waits for the copy.
  void load(const LossScalerState& s);

 private:
  Device device_;
  LossScalerOptions options_;
  Tensor state_;
  bool unscaled_ = false, stepped_ = false;
  bool host_found_ = false, host_checked_ = false;  // set_found_inf's verdict this step
  std::atomic<float> host_scale_{0};
  int64_t host_tracker_ = 0;
};

}  // namespace tandem::optim
