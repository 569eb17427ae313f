// Front end of the max-pooling ops: shape and dtype checks (indices i32), then dispatch.
#include <cstdint>

#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_image;

Shape max_pool2d_output_shape(const Shape& x, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  TD_CHECK_ARG(x.size() == 4, op, "input must be [N, C, H, W], found {}", shape_str(x));
  TD_CHECK_ARG(p.kernel_h >= 1 && p.kernel_w >= 1, op, "kernel must be >= 1, found ({}, {})", p.kernel_h,
               p.kernel_w);
  TD_CHECK_ARG(p.stride_h >= 1 && p.stride_w >= 1, op, "stride must be >= 1, found ({}, {})", p.stride_h,
               p.stride_w);
  TD_CHECK_ARG(p.pad_h >= 0 && p.pad_w >= 0 && 2 * p.pad_h <= p.kernel_h && 2 * p.pad_w <= p.kernel_w, op,
               "padding must be in [0, kernel/2], found ({}, {}) for kernel ({}, {})", p.pad_h, p.pad_w,
               p.kernel_h, p.kernel_w);
  const int64_t hp = x[2] + 2 * p.pad_h, wp = x[3] + 2 * p.pad_w;
  TD_CHECK_ARG(hp >= p.kernel_h && wp >= p.kernel_w, op, "padded input {}x{} is smaller than the kernel {}x{}",
               hp, wp, p.kernel_h, p.kernel_w);
  return {x[0], x[1], (hp - p.kernel_h) / p.stride_h + 1, (wp - p.kernel_w) / p.stride_w + 1};
}

namespace {

// The indices are flat i32 positions h*W + w in a plane: a larger plane would wrap them.
void check_plane(const char* op, const char* arg, const Tensor& t) {
  TD_CHECK_ARG(t.size(2) * t.size(3) <= INT32_MAX, op,
               "{} {}: expected planes of at most 2^31 - 1 elements (the indices are i32)", arg,
               shape_str(t.shape()));
}

}  // namespace

void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const Op kOp = Op::max_pool2d_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const MemoryFormat f = expect_image(op, "x", x, dt);
  const Shape ys = max_pool2d_output_shape(x.shape(), p);
  expect(op, "y", y, ys, dt, f);
  if (indices.defined()) {
    expect(op, "indices", indices, ys, DType::i32, f);
    check_plane(op, "x", x);
  }
  dispatch(kOp, dt, {&x, &y, &indices}).max_pool2d_forward(x, p, y, indices);
}

void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx) {
  const Op kOp = Op::max_pool2d_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dx", dx);
  const MemoryFormat f = expect_image(op, "dx", dx, dt);
  const Shape ys = max_pool2d_output_shape(dx.shape(), p);
  expect(op, "dy", dy, ys, dt, f);
  expect(op, "indices", indices, ys, DType::i32, f);
  check_plane(op, "dx", dx);
  dispatch(kOp, dt, {&dy, &indices, &dx}).max_pool2d_backward(dy, indices, p, dx);
}

namespace {

// x [N, C, H, W] with H, W >= 1 and y [N, C, 1, 1], both D.
DType check_global_pool(const char* op, const char* xname, const Tensor& x, const char* yname, const Tensor& y) {
  const DType dt = data_dtype(op, xname, x);
  expect_image(op, xname, x, dt);
  TD_CHECK_ARG(x.size(2) >= 1 && x.size(3) >= 1, op, "{} must have H, W >= 1, found {}", xname,
               shape_str(x.shape()));
  expect(op, yname, y, {x.size(0), x.size(1), 1, 1}, dt);
  return dt;
}

}  // namespace

void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const Op kOp = Op::global_avg_pool2d_forward;
  const DType dt = check_global_pool(op_name(kOp), "x", x, "y", y);
  dispatch(kOp, dt, {&x, &y}).global_avg_pool2d_forward(x, y);
}

void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  const Op kOp = Op::global_avg_pool2d_backward;
  const DType dt = check_global_pool(op_name(kOp), "dx", dx, "dy", dy);
  dispatch(kOp, dt, {&dy, &dx}).global_avg_pool2d_backward(dy, dx);
}

}  // namespace tandem::ops
