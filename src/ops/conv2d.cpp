// Front end of the convolution ops: shape and dtype checks, then dispatch.
#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_image;
using detail::expect_rank;

Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const char* op = "conv2d";
  TD_CHECK_ARG(x.size() == 4, op, "input must be [N, C, H, W], found {}", shape_str(x));
  TD_CHECK_ARG(w.size() == 4, op, "weight must be [K, C, R, S], found {}", shape_str(w));
  // As torch.nn.functional.conv2d: every dimension but the batch is non-zero (oneDNN builds no
  // primitive for an empty channel, filter or kernel dimension).
  TD_CHECK_ARG(x[1] >= 1 && x[2] >= 1 && x[3] >= 1 && w[0] >= 1 && w[2] >= 1 && w[3] >= 1, op,
               "x {}, w {}: expected C, H, W, K, R and S of at least 1 (N may be 0)", shape_str(x),
               shape_str(w));
  TD_CHECK_ARG(x[1] == w[1], op, "input has {} channels but weight {} expects {}", x[1], shape_str(w), w[1]);
  TD_CHECK_ARG(p.stride_h >= 1 && p.stride_w >= 1, op, "stride must be >= 1, found ({}, {})", p.stride_h,
               p.stride_w);
  TD_CHECK_ARG(p.pad_h >= 0 && p.pad_w >= 0, op, "padding must be >= 0, found ({}, {})", p.pad_h, p.pad_w);
  const int64_t hp = x[2] + 2 * p.pad_h, wp = x[3] + 2 * p.pad_w;
  TD_CHECK_ARG(hp >= w[2] && wp >= w[3], op, "padded input {}x{} is smaller than the kernel {}x{}", hp, wp,
               w[2], w[3]);
  return {x[0], w[0], (hp - w[2]) / p.stride_h + 1, (wp - w[3]) / p.stride_w + 1};
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p, const Tensor& y) {
  const Op kOp = Op::conv2d_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect_image(op, "x", x, dt);
  expect_rank(op, "w", w, 4, dt);
  const Shape ys = conv2d_output_shape(x.shape(), w.shape(), p);
  if (b.defined()) expect(op, "b", b, {w.size(0)});
  expect(op, "y", y, ys, dt, y.memory_format());
  dispatch(kOp, dt, {&x, &w, &b, &y}).conv2d_forward(x, w, b, p, y);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) {
  const Op kOp = Op::conv2d_backward_data;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dx", dx);
  expect_image(op, "dx", dx, dt);
  expect_rank(op, "w", w, 4, dt);
  expect(op, "dy", dy, conv2d_output_shape(dx.shape(), w.shape(), p), dt, dy.memory_format());
  dispatch(kOp, dt, {&dy, &w, &dx}).conv2d_backward_data(dy, w, p, dx);
}

void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                             const Tensor& db, bool accumulate) {
  const Op kOp = Op::conv2d_backward_weights;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect_image(op, "x", x, dt);
  expect_rank(op, "dw", dw, 4);
  expect(op, "dy", dy, conv2d_output_shape(x.shape(), dw.shape(), p), dt, dy.memory_format());
  if (db.defined()) expect(op, "db", db, {dw.size(0)});
  dispatch(kOp, dt, {&x, &dy, &dw, &db}).conv2d_backward_weights(x, dy, p, dw, db, accumulate);
}

}  // namespace tandem::ops
