// Mixed-precision ops: the device steps of a dynamic loss scaler (PyTorch's GradScaler:
// torch._amp_foreach_non_finite_check_and_unscale_ and torch._amp_update_scale_) and global
// gradient-norm clipping (torch.nn.utils.clip_grad_norm_). Each is ONE op on the device of its
// tensors (inline on cpu, one work item on virt's current stream, kernels on cuda's default
// stream), so a training step that uses them never waits on the host: the scaler's state stays
// on the device and reaches the host with the metrics read-back. The exception is
// run_if_finite on cuda, which reads the found-inf flag back before the optimizer step.
//
// The scaler's state is a [4] f32 tensor on the device, indexed by AmpState:
//   [kScale]         the loss scale (a power of two while the factors are 2 and 0.5)
//   [kGrowthTracker] consecutive steps without inf/NaN since the last change of the scale
//   [kFoundInf]      1 when the last amp_unscale_check_ found an inf or NaN, else 0
//   [kSkippedSteps]  steps skipped so far (counted by amp_update_scale_)
// Floats count steps exactly up to 2^24.
// Errors: Error(invalid_argument, "[<op>] ...") naming the tensor for a wrong shape, dtype,
// device or layout; Error(not_available, "[<op>] ...") on a backend without the op.
// Thread-safety: as the ops of tandem/ops.h.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::ops {

/// Indices into the scaler's state [4] f32.
enum AmpState : int { kScale = 0, kGrowthTracker = 1, kFoundInf = 2, kSkippedSteps = 3, kAmpStateSize = 4 };

/// The scale's update rule (GradScaler's defaults; min_scale is tandem's floor).
struct AmpScaleParams {
  float growth_factor = 2.0f;     // scale *= growth_factor after growth_interval good steps
  float backoff_factor = 0.5f;    // scale *= backoff_factor on a step with inf/NaN
  int64_t growth_interval = 2000;
  float min_scale = 1.0f;         // the scale never drops below this
};

/// dst = src * state[kScale], src [any shape] f32, dst the same numel in f32, bf16 or f16
/// (rounded once, to nearest even). Scales the loss gradient before it enters the
/// low-precision backward (scaling the loss in f32 and casting, as autocast does).
void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst);

/// For every grad (f32, contiguous, on state's device): state[kFoundInf] = 1 if any element
/// of any grad is inf or NaN, else 0; then every grad *= 1 / state[kScale] (the reciprocal
/// rounded to f32 from double, as GradScaler). Grads may be undefined (skipped).
void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state);

/// torch._amp_update_scale_ with a floor: on state[kFoundInf] != 0, scale = max(scale *
/// backoff_factor, min_scale), growth tracker = 0 and state[kSkippedSteps] += 1; otherwise
/// the tracker counts the step and, on reaching growth_interval, scale *= growth_factor (when
/// the product is finite) and the tracker restarts at 0. Throws Error(invalid_argument) for
/// growth_factor <= 1, backoff_factor outside (0, 1), growth_interval < 1 or min_scale <= 0.
void amp_update_scale_(const Tensor& state, const AmpScaleParams& params);

/// The global L2 norm over all grads (f32, one device; accumulated in double), written to
/// total_norm [1] f32 on that device, then grads *= min(1, max_norm / (norm + 1e-6)) (as
/// torch.nn.utils.clip_grad_norm_, in f32; a NaN norm leaves the grads unchanged, an infinite
/// one scales them by 0: such a step is the scaler's to skip). max_norm > 0 (else
/// Error(invalid_argument)).
void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm);

/// Runs `fn` in stream order on state's device when state[kFoundInf] == 0 at that point,
/// else not at all: on cpu inline, on virt on the stream's thread after the work that writes
/// `state` or any tensor of `touched` (which `fn` may read and write through raw_data(); they
/// count as written). There `fn` must not call tensor ops (it runs where the device computes)
/// and must only touch host-addressable memory. On cuda, whose memory the host cannot address,
/// the host waits for state (a 4-byte read-back) and calls `fn` on the calling thread, where
/// it may enqueue tensor ops. state undefined: runs unconditionally.
void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn);

}  // namespace tandem::ops
