// Internal: the cost model of the virt device's throughput-planning mode (options tflops,
// gbps, compute=none; see tandem/virt.h). One op call costs `flops` floating-point operations
// (a multiply-add counts 2) and moves `bytes` bytes of device memory; a device of T TFLOP/s
// and B GB/s takes max(flops / (T * 1e12), bytes / (B * 1e9)) seconds for it (the roofline
// model: Williams, Waterman, Patterson, "Roofline", CACM 2009).
//
// FLOP counts (shapes as in tandem/ops.h):
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
//     count_correct 1; adam_step 15 per parameter, sgd_step 6.
// Bytes: the bytes of every tensor the op reads or writes, each counted once.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "tandem/op_support.h"
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
/// FLOPs per element of the op's main tensor for the per-element ops above (batch norm,
/// relu, dropout, add_, scale_, zero_, softmax cross-entropy, optimizer steps; max_pool2d
/// backward); 0 for the conv, linear and max_pool2d forward ops, whose cost is not per element.
double flops_per_element(ops::Op op);
/// max_pool2d forward: kernel_h * kernel_w compares per output element.
double max_pool2d_forward_flops(const Shape& y, int64_t kernel_h, int64_t kernel_w);
/// Modelled seconds of `cost` on a device of `tflops` TFLOP/s and `gbps` GB/s; a rate of 0
/// leaves its term out (both 0: 0 seconds). Capped at 1e6 s.
double modelled_seconds(const OpCost& cost, double tflops, double gbps);

}  // namespace tandem::virt
