// Front end of the fully connected ops: shape and dtype checks, then dispatch.
#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_rank;

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  const Op kOp = Op::linear_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect_rank(op, "x", x, 2, dt);
  expect_rank(op, "w", w, 2, dt);
  TD_CHECK_ARG(x.size(1) == w.size(1), op, "x {} has {} features but w {} expects {}", shape_str(x.shape()),
               x.size(1), shape_str(w.shape()), w.size(1));
  if (b.defined()) expect(op, "b", b, {w.size(0)});
  expect(op, "y", y, {x.size(0), w.size(0)}, dt);
  dispatch(kOp, dt, {&x, &w, &b, &y}).linear_forward(x, w, b, y);
}

void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const Op kOp = Op::linear_backward_data;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dy", dy);
  expect_rank(op, "dy", dy, 2, dt);
  expect_rank(op, "w", w, 2, dt);
  TD_CHECK_ARG(dy.size(1) == w.size(0), op, "dy {} does not match w {}", shape_str(dy.shape()),
               shape_str(w.shape()));
  expect(op, "dx", dx, {dy.size(0), w.size(1)}, dt);
  dispatch(kOp, dt, {&dy, &w, &dx}).linear_backward_data(dy, w, dx);
}

void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                             bool accumulate) {
  const Op kOp = Op::linear_backward_weights;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect_rank(op, "x", x, 2, dt);
  expect_rank(op, "dy", dy, 2, dt);
  TD_CHECK_ARG(x.size(0) == dy.size(0), op, "x {} and dy {} differ in batch size", shape_str(x.shape()),
               shape_str(dy.shape()));
  expect(op, "dw", dw, {dy.size(1), x.size(1)});
  if (db.defined()) expect(op, "db", db, {dy.size(1)});
  dispatch(kOp, dt, {&x, &dy, &dw, &db}).linear_backward_weights(x, dy, dw, db, accumulate);
}

}  // namespace tandem::ops
