// Internal: the argument checks shared by the op front end files (src/ops/*.cpp) and the
// dispatch to the backend of the tensors' device, which also enforces the dtype query.
#pragma once

#include <initializer_list>

#include "tandem/backend.h"

namespace tandem::ops::detail {

/// Checks that `t` is a defined, contiguous tensor of `dtype` with exactly `shape`.
void expect(const char* op, const char* arg, const Tensor& t, const Shape& shape, DType dtype = DType::f32);
/// Checks that `t` is a defined tensor of `dtype` with exactly `shape`, dense in `format`
/// (an activation argument; see tandem/ops.h for the ops that take channels_last).
void expect(const char* op, const char* arg, const Tensor& t, const Shape& shape, DType dtype, MemoryFormat format);
/// Checks a defined 4-D activation of `dtype`, dense in either memory format; returns it.
MemoryFormat expect_image(const char* op, const char* arg, const Tensor& t, DType dtype);
/// Checks a defined contiguous tensor of `dtype` and rank `rank`.
void expect_rank(const char* op, const char* arg, const Tensor& t, int64_t rank, DType dtype = DType::f32);
/// The op's data dtype, read from its first data tensor `t`: throws Error(invalid_argument)
/// unless t is defined and f32, bf16 or f16.
DType data_dtype(const char* op, const char* arg, const Tensor& t);

/// The backend of `device` after checking that it supports `op` with data dtype `dtype`
/// (Error(not_available) naming the op, the dtype and the device otherwise). No allocation
/// on success.
Backend& dispatch(Op op, DType dtype, Device device);
/// All defined tensors on one device; returns its backend after checking that it supports
/// `op` with data dtype `dtype`, and that it takes channels_last when one of them is. No
/// allocation on success.
Backend& dispatch(Op op, DType dtype, std::initializer_list<const Tensor*> ts);

}  // namespace tandem::ops::detail
