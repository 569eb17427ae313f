// Front end of the element-wise ops: dtype and size checks, then dispatch.
#include <cstdlib>
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

// The memory format element-wise ops run in: the first tensor's when it is a dense 4-D
// channels_last tensor (the others must match it), contiguous otherwise.
MemoryFormat format_of(const Tensor& t) { return t.defined() ? t.memory_format() : MemoryFormat::contiguous; }

// Checks that every tensor has the first one's shape, data dtype and memory format; returns
// that dtype.
DType same_shape(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  const DType dt = data_dtype(op, first.name, *first.t);
  const MemoryFormat f = format_of(*first.t);
  for (const Arg& a : args) expect(op, a.name, *a.t, first.t->shape(), dt, f);
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
  const MemoryFormat f = format_of(x);
  expect(op, "x", x, x.shape(), dt, f);
  expect(op, "y", y, x.shape(), dt, f);
  expect(op, "mask", mask, x.shape(), DType::u8, f);
  dispatch(kOp, dt, {&x, &y, &mask}).dropout_forward(x, p, seed, counter, y, mask);
}

void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  const Op kOp = Op::dropout_backward;
  const char* op = op_name(kOp);
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), found {}", p);
  const DType dt = data_dtype(op, "dy", dy);
  const MemoryFormat f = format_of(dy);
  expect(op, "dy", dy, dy.shape(), dt, f);
  expect(op, "mask", mask, dy.shape(), DType::u8, f);
  expect(op, "dx", dx, dy.shape(), dt, f);
  dispatch(kOp, dt, {&dy, &mask, &dx}).dropout_backward(dy, mask, p, dx);
}

void add_(const Tensor& dst, const Tensor& src, float alpha) {
  const Op kOp = Op::add_;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dst", dst);
  const MemoryFormat f = format_of(dst);
  expect(op, "dst", dst, dst.shape(), dt, f);
  TD_CHECK_ARG(src.defined() && src.numel() == dst.numel(), op, "src {} must have the {} elements of dst {}",
               src.defined() ? shape_str(src.shape()) : "undefined", dst.numel(), shape_str(dst.shape()));
  // Flat element order must agree: a channels_last dst takes a channels_last src of its shape.
  if (f == MemoryFormat::channels_last) expect(op, "src", src, dst.shape(), dt, f);
  else expect(op, "src", src, src.shape(), dt);
  dispatch(kOp, dt, {&dst, &src}).add_(dst, src, alpha);
}

void zero_(const Tensor& dst) {
  const char* op = op_name(Op::zero_);
  TD_CHECK_ARG(dst.defined(), op, "dst is undefined");
  TD_CHECK_ARG(dst.is_dense(), op, "dst must be contiguous or channels_last");
  if (dst.numel() == 0) return;
  // Every backend clears bytes of any dtype: no query (see tandem/op_support.h).
  dispatch(Op::zero_, DType::f32, {&dst}).zero_(dst);
}

void scale_(const Tensor& dst, float alpha) {
  const Op kOp = Op::scale_;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dst", dst);
  expect(op, "dst", dst, dst.shape(), dt, format_of(dst));
  dispatch(kOp, dt, {&dst}).scale_(dst, alpha);
}

MemoryFormat preferred_memory_format(Device device, DType dtype) {
  // Read at every call (once per convolution layer and step): tests compare both layouts in
  // one process.
  const char* off = std::getenv("TANDEM_CHANNELS_LAST");
  if (off && off[0] == '0') return MemoryFormat::contiguous;
  return backend_for(device, "preferred_memory_format").preferred_memory_format(dtype);
}

void convert_memory_format(const Tensor& src, const Tensor& dst) {
  const char* op = "convert_memory_format";
  TD_CHECK_ARG(src.defined() && dst.defined(), op, "src and dst must be defined");
  TD_CHECK_ARG(src.dtype() == dst.dtype() && src.shape() == dst.shape(), op,
               "src {} {} and dst {} {}: expected the same shape and dtype", shape_str(src.shape()),
               dtype_name(src.dtype()), shape_str(dst.shape()), dtype_name(dst.dtype()));
  TD_CHECK_ARG(src.is_dense() && dst.is_dense(), op, "src and dst must be contiguous or channels_last");
  if (src.numel() == 0) return;
  dispatch(Op::zero_, DType::f32, {&src, &dst}).convert_memory_format(src, dst);
}

Tensor to_memory_format(const Tensor& t, MemoryFormat format) {
  if (t.is_contiguous(format)) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device(), format);
  convert_memory_format(t, out);
  return out;
}

}  // namespace tandem::ops
