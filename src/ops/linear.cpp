// Front end of the fully connected ops, with the weight stored [out, in] (linear_*, as
// torch.nn.Linear) or [in, out] (linear_in_out_*, tandem/transformer_ops.h): shape and dtype
// checks, then dispatch.
#include "ops/op_checks.h"
#include "tandem/transformer_ops.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_rank;

namespace {

// The weight's in and out sizes: w [out, in], or w [in, out] when `in_out`.
int64_t w_in(const Tensor& w, bool in_out) { return w.size(in_out ? 0 : 1); }
int64_t w_out(const Tensor& w, bool in_out) { return w.size(in_out ? 1 : 0); }

Backend& check_forward(Op k, bool in_out, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  const char* op = op_name(k);
  const DType dt = data_dtype(op, "x", x);
  expect_rank(op, "x", x, 2, dt);
  expect_rank(op, "w", w, 2, dt);
  TD_CHECK_ARG(x.size(1) == w_in(w, in_out), op, "x {} has {} features but w {} expects {}", shape_str(x.shape()),
               x.size(1), shape_str(w.shape()), w_in(w, in_out));
  if (b.defined()) expect(op, "b", b, {w_out(w, in_out)});
  expect(op, "y", y, {x.size(0), w_out(w, in_out)}, dt);
  return dispatch(k, dt, {&x, &w, &b, &y});
}

Backend& check_backward_data(Op k, bool in_out, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const char* op = op_name(k);
  const DType dt = data_dtype(op, "dy", dy);
  expect_rank(op, "dy", dy, 2, dt);
  expect_rank(op, "w", w, 2, dt);
  TD_CHECK_ARG(dy.size(1) == w_out(w, in_out), op, "dy {} does not match w {}", shape_str(dy.shape()),
               shape_str(w.shape()));
  expect(op, "dx", dx, {dy.size(0), w_in(w, in_out)}, dt);
  return dispatch(k, dt, {&dy, &w, &dx});
}

Backend& check_backward_weights(Op k, bool in_out, const Tensor& x, const Tensor& dy, const Tensor& dw,
                                const Tensor& db) {
  const char* op = op_name(k);
  const DType dt = data_dtype(op, "x", x);
  expect_rank(op, "x", x, 2, dt);
  expect_rank(op, "dy", dy, 2, dt);
  TD_CHECK_ARG(x.size(0) == dy.size(0), op, "x {} and dy {} differ in batch size", shape_str(x.shape()),
               shape_str(dy.shape()));
  expect(op, "dw", dw, in_out ? Shape{x.size(1), dy.size(1)} : Shape{dy.size(1), x.size(1)});
  if (db.defined()) expect(op, "db", db, {dy.size(1)});
  return dispatch(k, dt, {&x, &dy, &dw, &db});
}

}  // namespace

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  check_forward(Op::linear_forward, false, x, w, b, y).linear_forward(x, w, b, y);
}

void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  check_backward_data(Op::linear_backward_data, false, dy, w, dx).linear_backward_data(dy, w, dx);
}

void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                             bool accumulate) {
  check_backward_weights(Op::linear_backward_weights, false, x, dy, dw, db)
      .linear_backward_weights(x, dy, dw, db, accumulate);
}

void linear_in_out_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  check_forward(Op::linear_in_out_forward, true, x, w, b, y).linear_in_out_forward(x, w, b, y);
}

void linear_in_out_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  check_backward_data(Op::linear_in_out_backward_data, true, dy, w, dx).linear_in_out_backward_data(dy, w, dx);
}

void linear_in_out_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                                    bool accumulate) {
  check_backward_weights(Op::linear_in_out_backward_weights, true, x, dy, dw, db)
      .linear_in_out_backward_weights(x, dy, dw, db, accumulate);
}

}  // namespace tandem::ops
