// The check that a run's low-precision ops run on its device, before anything is built on it:
// only the ops the run calls in its compute dtype are asked about (a model without batch
// norm is not refused for a device without bf16 batch norm).
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/dtype.h"
#include "tandem/nn/module.h"
#include "tandem/op_support.h"

namespace tandem::train {

/// The ops a training run of `model` calls with its compute dtype as the data dtype: the
/// model's (Module::ops_used), the loss's (CrossEntropyLoss::ops_used) and amp_scale (the
/// loss gradient and the offloaded optimizer's transfers are rounded into the compute dtype
/// by it). The optimizer updates and the scaler's other steps work on f32 and are not listed.
std::vector<ops::Op> compute_dtype_ops(nn::Module& model);

/// Throws Error(not_available, "[train] --precision P: <op> does not run in <dtype> on
/// <device> (<backend versions>); use --precision fp32[ or bf16]") for the first op of `ops`
/// that `device` does not run with data dtype `dtype` (ops::supports); " or bf16" when the
/// device runs every op of `ops` in bf16.
void check_precision_support(DType dtype, Device device, const std::string& precision,
                             const std::vector<ops::Op>& ops);

}  // namespace tandem::train
