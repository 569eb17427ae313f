// Front end of the element-wise ops: dtype and size checks, then dispatch.
#include <initializer_list>

#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;

namespace {

struct Arg {
  const char* name;
  const Tensor* t;
};

// Checks that every tensor has the first one's shape and data dtype; returns that dtype.
DType same_shape(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  const DType dt = data_dtype(op, first.name, *first.t);
  for (const Arg& a : args) expect(op, a.name, *a.t, first.t->shape(), dt);
  return dt;
}

}  // namespace

void relu_forward(const Tensor& x, const Tensor& y) {
  const Op kOp = Op::relu_forward;
  const DType dt = same_shape(op_name(kOp), {{"x", &x}, {"y", &y}});
  dispatch(kOp, dt, {&x, &y}).relu_forward(x, y);
}

void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  const Op kOp = Op::relu_backward;
  const DType dt = same_shape(op_name(kOp), {{"y", &y}, {"dy", &dy}, {"dx", &dx}});
  dispatch(kOp, dt, {&dy, &y, &dx}).relu_backward(dy, y, dx);
}

void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  const Op kOp = Op::add_relu_forward;
  const DType dt = same_shape(op_name(kOp), {{"a", &a}, {"b", &b}, {"y", &y}});
  dispatch(kOp, dt, {&a, &b, &y}).add_relu_forward(a, b, y);
}

void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                     const Tensor& mask) {
  const Op kOp = Op::dropout_forward;
  const char* op = op_name(kOp);
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), found {}", p);
  const DType dt = data_dtype(op, "x", x);
  expect(op, "x", x, x.shape(), dt);
  expect(op, "y", y, x.shape(), dt);
  expect(op, "mask", mask, x.shape(), DType::u8);
  dispatch(kOp, dt, {&x, &y, &mask}).dropout_forward(x, p, seed, counter, y, mask);
}

void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  const Op kOp = Op::dropout_backward;
  const char* op = op_name(kOp);
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), found {}", p);
  const DType dt = data_dtype(op, "dy", dy);
  expect(op, "dy", dy, dy.shape(), dt);
  expect(op, "mask", mask, dy.shape(), DType::u8);
  expect(op, "dx", dx, dy.shape(), dt);
  dispatch(kOp, dt, {&dy, &mask, &dx}).dropout_backward(dy, mask, p, dx);
}

void add_(const Tensor& dst, const Tensor& src, float alpha) {
  const Op kOp = Op::add_;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dst", dst);
  expect(op, "dst", dst, dst.shape(), dt);
  TD_CHECK_ARG(src.defined() && src.numel() == dst.numel(), op, "src {} must have the {} elements of dst {}",
               src.defined() ? shape_str(src.shape()) : "undefined", dst.numel(), shape_str(dst.shape()));
  expect(op, "src", src, src.shape(), dt);
  dispatch(kOp, dt, {&dst, &src}).add_(dst, src, alpha);
}

void zero_(const Tensor& dst) {
  const char* op = op_name(Op::zero_);
  TD_CHECK_ARG(dst.defined(), op, "dst is undefined");
  TD_CHECK_ARG(dst.is_contiguous(), op, "dst must be contiguous");
  if (dst.numel() == 0) return;
  // Every backend clears bytes of any dtype: no query (see tandem/op_support.h).
  dispatch(Op::zero_, DType::f32, {&dst}).zero_(dst);
}

void scale_(const Tensor& dst, float alpha) {
  const Op kOp = Op::scale_;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dst", dst);
  expect(op, "dst", dst, dst.shape(), dt);
  dispatch(kOp, dt, {&dst}).scale_(dst, alpha);
}

}  // namespace tandem::ops
