// The list of backend ops, written once. Everything that names every op is generated from it:
// the `Op` enum and op_name() (tandem/op_support.h), the pure virtuals of `Backend`
// (tandem/backend.h), the overrides the cpu and cuda backends declare, the cpu storage
// wrapper's widening (src/backend/cpu/cpu_f16.cpp), the virt backend's work items
// (src/backend/virt/virt_ops.cpp) and the declarations of virt's per-op FLOP counts
// (src/backend/virt/virt_cost.h; an op without a count does not link). Shapes, dtypes and
// errors of each op are documented at its front end: tandem/ops.h, tandem/optim_ops.h,
// tandem/amp_ops.h, tandem/transformer_ops.h. docs/design.md ("Adding an op") lists the steps.
//
// TANDEM_OPS(X) calls X(name, return type) once per op, in the order of the Op values.
// TANDEM_OP_<name>(A) lists the op's arguments in order, each A(role, name) or, for a value,
// A(val, name, type). The roles say how each argument is used:
//   data_in     a tensor in the op's data dtype that the op reads
//   data_out    a tensor in the op's data dtype that the op writes (overwrites or accumulates)
//   data_inout  a tensor in the op's data dtype that the op reads and writes
//   in          any other tensor the op reads, passed as it is (f32 biases and statistics,
//               i64 labels, i32 indices, u8 masks, and 16-bit tensors a kernel takes as stored)
//   out         any other tensor the op writes (or reads and writes), passed as it is
//   outs        a std::vector<Tensor> the op reads and writes, passed as it is
//   touched     a std::vector<Tensor> that `fn` reads and writes through raw pointers
//   val         a value (a float, a params struct), copied into deferred work
//   fn          a std::function<void()>, moved along
// The cpu storage wrapper widens data_* tensors of f16 (and of bf16 without native kernels)
// to f32 for the f32 kernel and rounds data_out and data_inout back; the virt backend orders
// its work item after the pending writes of every tensor and marks the written ones (out,
// outs, the device tensors of touched, data_out, data_inout) with its event.
//
// Expansion helpers: TANDEM_OP_PARAMS(name) is the parameter list (`const Tensor& x, ...`),
// TANDEM_OP_ARGS(name) the argument list that forwards them (`x, ...`; fn arguments moved),
// and TANDEM_OP_DECLARE_OVERRIDE the declaration of every op in a Backend subclass:
// `TANDEM_OPS(TANDEM_OP_DECLARE_OVERRIDE)`. Another expansion defines a macro per role
// (e.g. `#define MY_ARG_(role, ...) MY_##role(__VA_ARGS__)`) and calls TANDEM_OP_<name>(MY_ARG_).
// Thread-safety: macros only.
#pragma once

// clang-format off
#define TANDEM_OPS(X)                               \
  X(conv2d_forward, void)                           \
  X(conv2d_backward_data, void)                     \
  X(conv2d_backward_weights, void)                  \
  X(linear_forward, void)                           \
  X(linear_backward_data, void)                     \
  X(linear_backward_weights, void)                  \
  X(batch_norm_forward_training, void)              \
  X(batch_norm_forward_inference, void)             \
  X(batch_norm_backward, void)                      \
  X(max_pool2d_forward, void)                       \
  X(max_pool2d_backward, void)                      \
  X(global_avg_pool2d_forward, void)                \
  X(global_avg_pool2d_backward, void)               \
  X(relu_forward, void)                             \
  X(relu_backward, void)                            \
  X(add_relu_forward, void)                         \
  X(dropout_forward, void)                          \
  X(dropout_backward, void)                         \
  X(add_, void)                                     \
  X(scale_, void)                                   \
  X(zero_, void)                                    \
  X(softmax_cross_entropy_forward, float)           \
  X(softmax_cross_entropy_backward, void)           \
  X(count_correct, int64_t)                         \
  X(softmax_cross_entropy_accumulate, void)         \
  X(adam_step, void)                                \
  X(sgd_step, void)                                 \
  X(amp_scale, void)                                \
  X(amp_unscale_check_, void)                       \
  X(amp_update_scale_, void)                        \
  X(clip_grad_norm_, void)                          \
  X(run_if_finite, void)                            \
  X(embedding_forward, void)                        \
  X(embedding_backward, void)                       \
  X(layer_norm_forward, void)                       \
  X(layer_norm_backward, void)                      \
  X(gelu_forward, void)                             \
  X(gelu_backward, void)                            \
  X(add_forward, void)                              \
  X(attention_forward, void)                        \
  X(attention_backward, void)                       \
  X(classifier_cross_entropy, void)                 \
  X(linear_in_out_forward, void)                    \
  X(linear_in_out_backward_data, void)              \
  X(linear_in_out_backward_weights, void)

// ---- tandem/ops.h ----
#define TANDEM_OP_conv2d_forward(A) \
  A(data_in, x), A(data_in, w), A(in, b), A(val, p, const ops::Conv2dParams&), A(data_out, y)
#define TANDEM_OP_conv2d_backward_data(A) \
  A(data_in, dy), A(data_in, w), A(val, p, const ops::Conv2dParams&), A(data_out, dx)
#define TANDEM_OP_conv2d_backward_weights(A)                                                      \
  A(data_in, x), A(data_in, dy), A(val, p, const ops::Conv2dParams&), A(out, dw), A(out, db), \
  A(val, accumulate, bool)
#define TANDEM_OP_linear_forward(A) A(data_in, x), A(data_in, w), A(in, b), A(data_out, y)
#define TANDEM_OP_linear_backward_data(A) A(data_in, dy), A(data_in, w), A(data_out, dx)
#define TANDEM_OP_linear_backward_weights(A) \
  A(data_in, x), A(data_in, dy), A(out, dw), A(out, db), A(val, accumulate, bool)
#define TANDEM_OP_batch_norm_forward_training(A)                                                    \
  A(data_in, x), A(in, gamma), A(in, beta), A(val, eps, double), A(val, momentum, double),          \
  A(data_out, y), A(out, save_mean), A(out, save_var), A(out, running_mean), A(out, running_var), \
  A(val, fuse_relu, bool)
#define TANDEM_OP_batch_norm_forward_inference(A)                                                  \
  A(data_in, x), A(in, gamma), A(in, beta), A(in, running_mean), A(in, running_var), A(val, eps, double), \
  A(data_out, y), A(val, fuse_relu, bool)
#define TANDEM_OP_batch_norm_backward(A)                                                               \
  A(data_in, dy), A(data_in, x), A(in, gamma), A(in, save_mean), A(in, save_var), A(val, eps, double), \
  A(data_out, dx), A(out, dgamma), A(out, dbeta), A(val, accumulate, bool), A(val, fuse_relu, bool),   \
  A(data_in, y)
#define TANDEM_OP_max_pool2d_forward(A) \
  A(data_in, x), A(val, p, const ops::Pool2dParams&), A(data_out, y), A(out, indices)
#define TANDEM_OP_max_pool2d_backward(A) \
  A(data_in, dy), A(in, indices), A(val, p, const ops::Pool2dParams&), A(data_out, dx)
#define TANDEM_OP_global_avg_pool2d_forward(A) A(data_in, x), A(data_out, y)
#define TANDEM_OP_global_avg_pool2d_backward(A) A(data_in, dy), A(data_out, dx)
#define TANDEM_OP_relu_forward(A) A(data_in, x), A(data_out, y)
#define TANDEM_OP_relu_backward(A) A(data_in, dy), A(data_in, y), A(data_out, dx)
#define TANDEM_OP_add_relu_forward(A) A(data_in, a), A(data_in, b), A(data_out, y)
#define TANDEM_OP_dropout_forward(A) \
  A(data_in, x), A(val, p, float), A(val, seed, uint64_t), A(val, counter, uint64_t), A(data_out, y), A(out, mask)
#define TANDEM_OP_dropout_backward(A) A(data_in, dy), A(in, mask), A(val, p, float), A(data_out, dx)
#define TANDEM_OP_add_(A) A(data_inout, dst), A(data_in, src), A(val, alpha, float)
#define TANDEM_OP_scale_(A) A(data_inout, dst), A(val, alpha, float)
#define TANDEM_OP_zero_(A) A(out, dst)
#define TANDEM_OP_softmax_cross_entropy_forward(A) \
  A(data_in, logits), A(in, labels), A(val, label_smoothing, float), A(out, probs)
#define TANDEM_OP_softmax_cross_entropy_backward(A) \
  A(in, probs), A(in, labels), A(val, label_smoothing, float), A(val, grad_loss, float), A(data_out, dlogits)
#define TANDEM_OP_count_correct(A) A(data_in, logits), A(in, labels)
#define TANDEM_OP_softmax_cross_entropy_accumulate(A) \
  A(data_in, logits), A(in, labels), A(val, label_smoothing, float), A(out, probs), A(out, metrics)

// ---- tandem/optim_ops.h: flat f32 tensors of one element count, the constants already
// computed and checked; `out` undefined or an f32/bf16/f16 copy of the updated param (written
// as stored); `momentum_buffer` undefined without momentum ----
#define TANDEM_OP_adam_step(A)                                                                 \
  A(out, param), A(in, grad), A(out, exp_avg), A(out, exp_avg_sq), A(val, c, const ops::AdamConstants&), \
  A(out, out)
#define TANDEM_OP_sgd_step(A) \
  A(out, param), A(in, grad), A(out, momentum_buffer), A(val, c, const ops::SgdConstants&), A(out, out)

// ---- tandem/amp_ops.h: arguments checked; dst of amp_scale is written in its own dtype ----
#define TANDEM_OP_amp_scale(A) A(in, src), A(in, state), A(out, dst)
#define TANDEM_OP_amp_unscale_check_(A) A(outs, grads), A(out, state)
#define TANDEM_OP_amp_update_scale_(A) A(out, state), A(val, params, const ops::AmpScaleParams&)
#define TANDEM_OP_clip_grad_norm_(A) A(outs, grads), A(val, max_norm, double), A(out, total_norm)
#define TANDEM_OP_run_if_finite(A) A(in, state), A(touched, touched), A(fn, fn)

// ---- tandem/transformer_ops.h ----
#define TANDEM_OP_embedding_forward(A) A(in, tokens), A(data_in, wte), A(data_in, wpe), A(data_out, y)
#define TANDEM_OP_embedding_backward(A) \
  A(data_in, dy), A(in, tokens), A(out, dwte), A(out, dwpe), A(val, accumulate, bool)
#define TANDEM_OP_layer_norm_forward(A) \
  A(data_in, x), A(in, gamma), A(in, beta), A(val, eps, float), A(data_out, y), A(out, mean), A(out, rstd)
#define TANDEM_OP_layer_norm_backward(A)                                                                  \
  A(data_in, dy), A(data_in, x), A(in, gamma), A(in, mean), A(in, rstd), A(data_out, dx), A(out, dgamma), \
  A(out, dbeta), A(val, accumulate, bool)
#define TANDEM_OP_gelu_forward(A) A(data_in, x), A(data_out, y)
#define TANDEM_OP_gelu_backward(A) A(data_in, dy), A(data_in, x), A(data_out, dx)
#define TANDEM_OP_add_forward(A) A(data_in, a), A(data_in, b), A(data_out, y)
#define TANDEM_OP_attention_forward(A) A(data_in, qkv), A(val, n_head, int64_t), A(data_out, y), A(out, lse)
#define TANDEM_OP_attention_backward(A) \
  A(data_in, dy), A(data_in, qkv), A(data_in, y), A(in, lse), A(val, n_head, int64_t), A(data_out, dqkv)
#define TANDEM_OP_classifier_cross_entropy(A)                                                            \
  A(data_in, h), A(data_in, w), A(in, targets), A(val, ignore_index, int64_t), A(val, grad_loss, float), \
  A(data_out, dh), A(out, dw), A(val, accumulate, bool), A(out, metrics), A(in, grad_scale)
#define TANDEM_OP_linear_in_out_forward(A) A(data_in, x), A(data_in, w), A(in, b), A(data_out, y)
#define TANDEM_OP_linear_in_out_backward_data(A) A(data_in, dy), A(data_in, w), A(data_out, dx)
#define TANDEM_OP_linear_in_out_backward_weights(A) \
  A(data_in, x), A(data_in, dy), A(out, dw), A(out, db), A(val, accumulate, bool)
// clang-format on

// ---- expansion helpers ----
#define TANDEM_OP_PARAMS(op) TANDEM_OP_##op(TANDEM_OP_PARAM_)
#define TANDEM_OP_PARAM_(role, ...) TANDEM_OP_PARAM_##role(__VA_ARGS__)
#define TANDEM_OP_PARAM_data_in(n) const ::tandem::Tensor& n
#define TANDEM_OP_PARAM_data_out(n) const ::tandem::Tensor& n
#define TANDEM_OP_PARAM_data_inout(n) const ::tandem::Tensor& n
#define TANDEM_OP_PARAM_in(n) const ::tandem::Tensor& n
#define TANDEM_OP_PARAM_out(n) const ::tandem::Tensor& n
#define TANDEM_OP_PARAM_outs(n) const std::vector<::tandem::Tensor>& n
#define TANDEM_OP_PARAM_touched(n) const std::vector<::tandem::Tensor>& n
#define TANDEM_OP_PARAM_val(n, ...) __VA_ARGS__ n
#define TANDEM_OP_PARAM_fn(n) std::function<void()> n

#define TANDEM_OP_ARGS(op) TANDEM_OP_##op(TANDEM_OP_ARG_)
#define TANDEM_OP_ARG_(role, ...) TANDEM_OP_ARG_##role(__VA_ARGS__)
#define TANDEM_OP_ARG_data_in(n) n
#define TANDEM_OP_ARG_data_out(n) n
#define TANDEM_OP_ARG_data_inout(n) n
#define TANDEM_OP_ARG_in(n) n
#define TANDEM_OP_ARG_out(n) n
#define TANDEM_OP_ARG_outs(n) n
#define TANDEM_OP_ARG_touched(n) n
#define TANDEM_OP_ARG_val(n, ...) n
#define TANDEM_OP_ARG_fn(n) std::move(n)

/// Declares op `name` as an override inside a Backend subclass (its definition elsewhere).
#define TANDEM_OP_DECLARE_OVERRIDE(name, ret) ret name(TANDEM_OP_PARAMS(name)) override;
