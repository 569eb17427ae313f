// Backend: the per-device-kind implementation of the ops in tandem/ops.h.
// The free functions in tandem::ops validate their arguments and then call the backend of
// their tensors' device kind through backend_for(); a backend may assume valid arguments
// (shapes, dtypes and contiguity already checked, all tensors on its device).
// The cpu backend is always present. Others (virt, cuda) register themselves at start-up with
// register_backend(); op code never changes to add one. A virt backend can forward to
// cpu_backend() on its own thread.
// Thread-safety: backend_for() and register_backend() are thread-safe; backends must allow
// concurrent calls on distinct outputs.
#pragma once

#include <cstdint>
#include <string>

#include <functional>
#include <vector>

#include "tandem/amp_ops.h"
#include "tandem/device.h"
#include "tandem/ops.h"
#include "tandem/optim_constants.h"

namespace tandem::ops {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  /// Whether this backend runs `op` with data dtype `dtype` (see tandem/op_support.h). The
  /// default answers f32 for every op and any dtype for zero_. Must be cheap and thread-safe.
  virtual bool supports(Op op, DType dtype) const;
  /// How this backend computes data dtype `dtype` when not natively, for banners ("" when it
  /// computes in that dtype or does not support it). The default answers "".
  virtual std::string compute_note(DType dtype) const { return ""; }
  /// Whether this backend's kernels take channels_last activations (MemoryFormat) where the
  /// ops accept them (see tandem/ops.h); the default is false, and the op front end then
  /// refuses a channels_last tensor on this backend's device.
  virtual bool supports_channels_last() const { return false; }
  /// The activation layout convolutions on this backend write for data dtype `dtype`
  /// (ops::preferred_memory_format); the default is contiguous.
  virtual MemoryFormat preferred_memory_format(DType dtype) const { return MemoryFormat::contiguous; }
  /// dst = src with another memory format (same shape and dtype, both dense); the default
  /// throws Error(not_available).
  virtual void convert_memory_format(const Tensor& src, const Tensor& dst);

  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                              const Tensor& y) = 0;
  virtual void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p,
                                    const Tensor& dx) = 0;
  virtual void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p,
                                       const Tensor& dw, const Tensor& db, bool accumulate) = 0;

  virtual void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) = 0;
  virtual void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) = 0;
  virtual void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw,
                                       const Tensor& db, bool accumulate) = 0;

  virtual void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           double eps, double momentum, const Tensor& y,
                                           const Tensor& save_mean, const Tensor& save_var,
                                           const Tensor& running_mean, const Tensor& running_var,
                                           bool fuse_relu) = 0;
  virtual void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            const Tensor& running_mean, const Tensor& running_var,
                                            double eps, const Tensor& y, bool fuse_relu) = 0;
  virtual void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                   const Tensor& save_mean, const Tensor& save_var, double eps,
                                   const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                   bool accumulate, bool fuse_relu, const Tensor& y) = 0;

  virtual void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                  const Tensor& indices) = 0;
  virtual void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                   const Tensor& dx) = 0;

  virtual void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) = 0;
  virtual void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) = 0;

  virtual void relu_forward(const Tensor& x, const Tensor& y) = 0;
  virtual void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) = 0;
  virtual void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
  virtual void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter,
                               const Tensor& y, const Tensor& mask) = 0;
  virtual void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) = 0;
  virtual void add_(const Tensor& dst, const Tensor& src, float alpha) = 0;
  virtual void scale_(const Tensor& dst, float alpha) = 0;
  /// Zeroes dst's bytes. The default throws Error(not_available, "[zero_] ...") naming the
  /// backend (so a backend without it still builds); cpu, virt and cuda override it.
  virtual void zero_(const Tensor& dst);

  virtual float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels,
                                              float label_smoothing, const Tensor& probs) = 0;
  virtual void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                              float label_smoothing, float grad_loss,
                                              const Tensor& dlogits) = 0;
  virtual int64_t count_correct(const Tensor& logits, const Tensor& labels) = 0;
  virtual void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels,
                                                float label_smoothing, const Tensor& probs,
                                                const Tensor& metrics) = 0;

  /// Optimizer updates (tandem/optim_ops.h): flat f32 tensors of one element count, the
  /// constants already computed and checked; `out` undefined or an f32/bf16/f16 copy of the
  /// updated param; `momentum_buffer` undefined without momentum.
  virtual void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq, const AdamConstants& c, const Tensor& out) = 0;
  virtual void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                        const SgdConstants& c, const Tensor& out) = 0;

  /// Mixed-precision ops (tandem/amp_ops.h), arguments checked. The defaults throw
  /// Error(not_available, "[<op>] not available on <backend>"); cpu, virt and cuda override them.
  virtual void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst);
  virtual void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state);
  virtual void amp_update_scale_(const Tensor& state, const AmpScaleParams& params);
  virtual void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm);
  virtual void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn);
};

/// The backend for `device`'s kind. Throws Error(not_available, "[<op>] no <kind> backend in
/// this build") when none is registered; `op` names the calling operation.
Backend& backend_for(Device device, const char* op);
/// The backend registered for `kind` (cpu: always), or nullptr when there is none yet.
Backend* find_backend(DeviceKind kind);
/// Registers (or replaces) the backend for a kind. The backend must outlive all op calls.
void register_backend(DeviceKind kind, Backend* backend);
/// The cpu backend (oneDNN and vectorised loops); always available.
Backend& cpu_backend();

}  // namespace tandem::ops
