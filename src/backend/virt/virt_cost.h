// Internal: the cost model of the virt device's throughput-planning mode (options tflops,
// gbps, compute=none; see tandem/virt.h). One op call costs `flops` floating-point operations
// (a multiply-add counts 2) and moves `bytes` bytes of device memory; a device of T TFLOP/s
// and B GB/s takes max(flops / (T * 1e12), bytes / (B * 1e9)) seconds for it (the roofline
// model: Williams, Waterman, Patterson, "Roofline", CACM 2009).
//
// Every op of tandem/op_list.h has a FLOP count, flops_<op>(the op's arguments), declared
// here from the list and defined in virt_cost.cpp with TANDEM_VIRT_FLOPS(<op>) { ... }; the
// virt backend calls it for each call, so an op without one does not link (undefined
// reference to tandem::virt::flops_<op>). Counts (shapes as in tandem/ops.h):
//   conv2d, each of forward, backward data and backward weights: 2*N*K*(C/groups)*R*S*P*Q,
//     from w [K, C/groups, R, S] and y or dy [N, K, P, Q]; a bias (forward) or its gradient
//     (backward weights) adds N*K*P*Q;
//   linear, each of forward, backward data and backward weights: 2*rows*in*out, from x or dy
//     [rows, in or out] and w [out, in]; a bias or its gradient adds rows*out;
//   per element of x (or dy, param), counting each add, multiply, compare, exp or sqrt as 1:
//     batch_norm forward training 7 (sum, square-sum 2, normalize 2, affine 2), forward
//     inference 2 (one fused scale and shift), backward 9; max_pool2d forward R*S compares per
//     output, backward 1 per input-gradient element; global average pooling forward 1 per
//     input element, backward 1 per input-gradient element; relu forward 1, backward 1;
//     add_relu_forward 2 per output element; dropout
//     forward 2, backward 1; add_ 2, scale_ 1, zero_ 0; softmax cross-entropy per logit:
//     forward 5 (max, subtract, exp, sum, divide), backward 3, accumulate 6 (forward + argmax),
//     count_correct 1; adam_step 15 per parameter, sgd_step 6; amp_scale 1 per element,
//     amp_unscale_check_ 2 per gradient element (check, scale), clip_grad_norm_ 3 (square-sum
//     2, scale 1), amp_update_scale_ 4 in all, run_if_finite 1 per element of the device
//     tensors it touches.
// Bytes: the bytes of every tensor the op reads or writes, each counted once.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tandem/backend.h"
#include "tandem/op_list.h"
#include "tandem/tensor.h"

namespace tandem::virt {

struct OpCost {
  double flops = 0;  // floating-point operations
  double bytes = 0;  // device-memory bytes read and written
};

/// 2*N*K*(C/groups)*R*S*P*Q (+ N*K*P*Q when `bias`): w [K, C/groups, R, S], y [N, K, P, Q].
double conv2d_flops(const Shape& w, const Shape& y, bool bias);
/// 2*rows*in*out (+ rows*out when `bias`): w [out, in], `rows` = x.shape[0].
double linear_flops(int64_t rows, const Shape& w, bool bias);
/// max_pool2d forward: kernel_h * kernel_w compares per output element.
double max_pool2d_forward_flops(const Shape& y, int64_t kernel_h, int64_t kernel_w);

// The parameters of flops_<op>: the op's own, with a fn argument by const reference.
#define TANDEM_VIRT_FLOPS_PARAM_(role, ...) TANDEM_VIRT_FLOPS_PARAM_##role(__VA_ARGS__)
#define TANDEM_VIRT_FLOPS_PARAM_data_in(n) TANDEM_OP_PARAM_data_in(n)
#define TANDEM_VIRT_FLOPS_PARAM_data_out(n) TANDEM_OP_PARAM_data_out(n)
#define TANDEM_VIRT_FLOPS_PARAM_data_inout(n) TANDEM_OP_PARAM_data_inout(n)
#define TANDEM_VIRT_FLOPS_PARAM_in(n) TANDEM_OP_PARAM_in(n)
#define TANDEM_VIRT_FLOPS_PARAM_out(n) TANDEM_OP_PARAM_out(n)
#define TANDEM_VIRT_FLOPS_PARAM_outs(n) TANDEM_OP_PARAM_outs(n)
#define TANDEM_VIRT_FLOPS_PARAM_touched(n) TANDEM_OP_PARAM_touched(n)
#define TANDEM_VIRT_FLOPS_PARAM_val(n, ...) TANDEM_OP_PARAM_val(n, __VA_ARGS__)
#define TANDEM_VIRT_FLOPS_PARAM_fn(n) const std::function<void()>& n
/// The head of op `name`'s FLOP count: `double flops_<name>(<the op's parameters>)`.
#define TANDEM_VIRT_FLOPS(name) double flops_##name(TANDEM_OP_##name(TANDEM_VIRT_FLOPS_PARAM_))

/// One FLOP count per op of tandem/op_list.h, for one call with these arguments.
#define TANDEM_VIRT_DECLARE_FLOPS_(name, ret) TANDEM_VIRT_FLOPS(name);
TANDEM_OPS(TANDEM_VIRT_DECLARE_FLOPS_)
#undef TANDEM_VIRT_DECLARE_FLOPS_

/// Modelled seconds of `cost` on a device of `tflops` TFLOP/s and `gbps` GB/s; a rate of 0
/// leaves its term out (both 0: 0 seconds). Capped at 1e6 s.
double modelled_seconds(const OpCost& cost, double tflops, double gbps);

}  // namespace tandem::virt
