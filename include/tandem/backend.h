// Backend: the per-device-kind implementation of the ops in tandem/ops.h, tandem/optim_ops.h
// and tandem/amp_ops.h; their virtuals are generated from the op list (tandem/op_list.h).
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
#include "tandem/op_list.h"
#include "tandem/op_support.h"
#include "tandem/ops.h"
#include "tandem/optim_constants.h"

namespace tandem::ops {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  /// The data dtypes this backend has kernels for, per op (tandem/op_support.h): support is
  /// opt-in, an op without an entry runs in no dtype. Must be cheap and thread-safe.
  virtual const OpSupport& op_support() const = 0;
  /// Whether this backend runs `op` with data dtype `dtype`: op_support().supports(op, dtype).
  bool supports(Op op, DType dtype) const { return op_support().supports(op, dtype); }
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

  /// The ops of tandem/op_list.h, one pure virtual each, e.g.
  /// `virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b,
  /// const Conv2dParams& p, const Tensor& y) = 0;`. Arguments are checked by the front end
  /// (tandem/ops.h, tandem/optim_ops.h, tandem/amp_ops.h), which asks supports() first.
#define TANDEM_OP_PURE_VIRTUAL_(name, ret) virtual ret name(TANDEM_OP_PARAMS(name)) = 0;
  TANDEM_OPS(TANDEM_OP_PURE_VIRTUAL_)
#undef TANDEM_OP_PURE_VIRTUAL_
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
