// Which dtypes each op runs with on each device: one query per (op, dtype, device) that
// callers (mixed precision, placement) ask before they run, answered by the device's backend.
//
// Dtype rules (every op in tandem/ops.h checks them; ops.h says per op which tensors are
// "data" tensors):
//  - An op's data tensors (x, w, y, dy, dx, logits, dlogits, dst, src) share one dtype, the
//    op's data dtype: f32, bf16 or f16. It is the dtype the query is asked about.
//  - Tensors that must stay f32 are f32 whatever the data dtype: biases and their gradients
//    (b, db), weight gradients (dw: fp32 master weights take fp32 gradients, computed with
//    fp32 accumulation from low-precision x and dy, never rounded to 16 bits), batch-norm
//    gamma/beta/running and saved statistics and dgamma/dbeta, softmax probabilities (probs),
//    the loss value and the metrics. Labels are i64, max-pool indices i32, dropout masks u8.
//  - zero_ clears bytes and accepts every dtype on every backend.
//  - adam_step and sgd_step update f32 master weights, gradients and moments: their data
//    dtype is f32 on every backend; the optional low-precision copy they write (out_dtype
//    f32, bf16 or f16) is not a data dtype and every backend writes all three.
//  - Every backend supports f32 for every op, so the f32 path asks no query.
// An op called with a data dtype its backend does not support throws
// Error(not_available, "[<op>] <dtype> is not supported on <device>"), e.g.
// "[conv2d_forward] f16 is not supported on cpu".
//
// What the backends answer:
//  - cpu: bf16 for every op when oneDNN runs bf16 convolutions and matrix products on this
//    CPU (avx512_core or newer; native with avx512_bf16 and AMX), probed once; f16 for every
//    op as storage only: oneDNN 2.6 has no f16 convolution or matmul on the CPU, so f16 ops
//    widen to f32, run the f32 kernels and round their outputs to f16 (compute_note says so).
//  - virt: what cpu answers (it runs the cpu kernels).
//  - cuda: f32, bf16 and f16 for every op (adam_step and sgd_step: f32, as everywhere):
//    cuDNN convolutions and cuBLAS matrix products on tensor cores with f32 accumulation,
//    own kernels for the rest; compute_note is "" (computed natively).
//  - a device kind without a backend in this build (cuda when built without CUDA) supports
//    nothing.
// Thread-safety: all functions here are thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/device.h"
#include "tandem/dtype.h"

namespace tandem::ops {

/// Every op of tandem/ops.h and tandem/optim_ops.h that runs on a backend, named as the function.
enum class Op : uint8_t {
  conv2d_forward,
  conv2d_backward_data,
  conv2d_backward_weights,
  linear_forward,
  linear_backward_data,
  linear_backward_weights,
  batch_norm_forward_training,
  batch_norm_forward_inference,
  batch_norm_backward,
  max_pool2d_forward,
  max_pool2d_backward,
  global_avg_pool2d_forward,
  global_avg_pool2d_backward,
  relu_forward,
  relu_backward,
  add_relu_forward,
  dropout_forward,
  dropout_backward,
  add_,
  scale_,
  zero_,
  softmax_cross_entropy_forward,
  softmax_cross_entropy_backward,
  count_correct,
  softmax_cross_entropy_accumulate,
  adam_step,  // tandem/optim_ops.h: the data dtype is the master weights' (f32 on every backend)
  sgd_step,
};

/// Number of values of Op (for iterating over all ops).
inline constexpr int kOpCount = static_cast<int>(Op::sgd_step) + 1;

/// The op's function name, e.g. "conv2d_forward" (a static string).
const char* op_name(Op op);

/// True when `op` runs with data dtype `dtype` on `device`. False for dtypes that are never
/// data dtypes (i32, i64, u8) except for zero_, for every op on a device kind this build
/// has no backend for, on a device that does not exist (negative index, index >= the kind's
/// device count, e.g. virt:1 before set_virt_device_count), and for values outside the Op,
/// DType or DeviceKind enums. May create the device kind's runtime on first use (as the first
/// tensor on that device would). Never throws.
bool supports(Op op, DType dtype, Device device);

/// How `device` computes data dtype `dtype` when it stores but does not compute in it, e.g.
/// "f16 stored, computed in f32: oneDNN 2.6.3 has no f16 convolution or matmul on this CPU"
/// for cpu and virt; "" otherwise (and for a device without a backend). Never throws.
std::string compute_note(DType dtype, Device device);

/// Throws Error(not_available, "[<op>] <dtype> is not supported on <device>") unless
/// supports(op, dtype, device), e.g. "[conv2d_forward] f16 is not supported on cpu" (an Op
/// value outside the enum is named "op N").
void require(Op op, DType dtype, Device device);

/// Throws the error require() throws for (op, dtype, device), unconditionally.
[[noreturn]] void throw_unsupported(Op op, DType dtype, Device device);

}  // namespace tandem::ops
