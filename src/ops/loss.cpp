// Front end of the loss ops: logits / dlogits carry the data dtype; probs and metrics are
// f32, labels i64.
#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_rank;

namespace {

// Checks `z` [N, C] (C >= 1) of dtype `dt` and labels [N] i64.
void check_loss_args(const char* op, const char* arg, const Tensor& z, DType dt, const Tensor& labels) {
  expect_rank(op, arg, z, 2, dt);
  TD_CHECK_ARG(z.size(1) >= 1, op, "{} must have at least one class, found {}", arg, shape_str(z.shape()));
  expect(op, "labels", labels, {z.size(0)}, DType::i64);
}

void check_smoothing(const char* op, float label_smoothing) {
  TD_CHECK_ARG(label_smoothing >= 0.0f && label_smoothing <= 1.0f, op,
               "label_smoothing must be in [0, 1], found {}", label_smoothing);
}

}  // namespace

float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                    const Tensor& probs) {
  const Op kOp = Op::softmax_cross_entropy_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "logits", logits);
  check_loss_args(op, "logits", logits, dt, labels);
  TD_CHECK_ARG(logits.size(0) >= 1, op, "empty batch: logits {}", shape_str(logits.shape()));
  check_smoothing(op, label_smoothing);
  expect(op, "probs", probs, logits.shape());
  return dispatch(kOp, dt, {&logits, &labels, &probs})
      .softmax_cross_entropy_forward(logits, labels, label_smoothing, probs);
}

void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                    float grad_loss, const Tensor& dlogits) {
  const Op kOp = Op::softmax_cross_entropy_backward;
  const char* op = op_name(kOp);
  check_loss_args(op, "probs", probs, DType::f32, labels);
  const DType dt = data_dtype(op, "dlogits", dlogits);
  expect(op, "dlogits", dlogits, probs.shape(), dt);
  dispatch(kOp, dt, {&probs, &labels, &dlogits})
      .softmax_cross_entropy_backward(probs, labels, label_smoothing, grad_loss, dlogits);
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  const Op kOp = Op::count_correct;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "logits", logits);
  check_loss_args(op, "logits", logits, dt, labels);
  return dispatch(kOp, dt, {&logits, &labels}).count_correct(logits, labels);
}

void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      const Tensor& probs, const Tensor& metrics) {
  const Op kOp = Op::softmax_cross_entropy_accumulate;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "logits", logits);
  check_loss_args(op, "logits", logits, dt, labels);
  check_smoothing(op, label_smoothing);
  expect(op, "probs", probs, logits.shape());
  expect(op, "metrics", metrics, {4});
  if (logits.size(0) == 0) return;
  dispatch(kOp, dt, {&logits, &labels, &probs, &metrics})
      .softmax_cross_entropy_accumulate(logits, labels, label_smoothing, probs, metrics);
}

}  // namespace tandem::ops
