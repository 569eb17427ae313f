// Argument checks shared by the op front end, and dispatch by device kind.
#include "ops/op_checks.h"

namespace tandem::ops::detail {

void expect(const char* op, const char* arg, const Tensor& t, const Shape& shape, DType dtype) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined, expected {} {}", arg, dtype_name(dtype), shape_str(shape));
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype), dtype_name(t.dtype()));
  TD_CHECK_ARG(t.shape() == shape, op, "{} must have shape {}, found {}", arg, shape_str(shape),
               shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

void expect(const char* op, const char* arg, const Tensor& t, const Shape& shape, DType dtype, MemoryFormat format) {
  if (format == MemoryFormat::contiguous) return expect(op, arg, t, shape, dtype);
  TD_CHECK_ARG(t.defined(), op, "{} is undefined, expected {} {}", arg, dtype_name(dtype), shape_str(shape));
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype), dtype_name(t.dtype()));
  TD_CHECK_ARG(t.shape() == shape, op, "{} must have shape {}, found {}", arg, shape_str(shape),
               shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(format), op, "{} must be {} like the op's input", arg, memory_format_name(format));
}

MemoryFormat expect_image(const char* op, const char* arg, const Tensor& t, DType dtype) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined", arg);
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype), dtype_name(t.dtype()));
  TD_CHECK_ARG(t.dim() == 4, op, "{} must have 4 dimensions, found shape {}", arg, shape_str(t.shape()));
  TD_CHECK_ARG(t.is_dense(), op, "{} must be contiguous or channels_last", arg);
  return t.memory_format();
}

void expect_rank(const char* op, const char* arg, const Tensor& t, int64_t rank, DType dtype) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined", arg);
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype), dtype_name(t.dtype()));
  TD_CHECK_ARG(t.dim() == rank, op, "{} must have {} dimensions, found shape {}", arg, rank,
               shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

DType data_dtype(const char* op, const char* arg, const Tensor& t) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined", arg);
  const DType d = t.dtype();
  TD_CHECK_ARG(d == DType::f32 || d == DType::bf16 || d == DType::f16, op, "{} must be f32, bf16 or f16, found {}",
               arg, dtype_name(d));
  return d;
}

Backend& dispatch(Op op, DType dtype, Device device) {
  Backend& b = backend_for(device, op_name(op));
  if (!b.supports(op, dtype)) throw_unsupported(op, dtype, device);
  return b;
}

Backend& dispatch(Op op, DType dtype, std::initializer_list<const Tensor*> ts) {
  Device dev{};
  bool first = true;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (first) {
      dev = t->device();
      first = false;
    } else {
      TD_CHECK_ARG(t->device() == dev, op_name(op), "tensors on different devices: {} and {}", dev.str(),
                   t->device().str());
    }
  }
  Backend& b = dispatch(op, dtype, dev);
  if (!b.supports_channels_last())
    for (const Tensor* t : ts)
      TD_CHECK_ARG(!t->defined() || t->memory_format() == MemoryFormat::contiguous, op_name(op),
                   "channels_last tensors are not supported on {}: expected contiguous", dev.str());
  return b;
}

}  // namespace tandem::ops::detail
