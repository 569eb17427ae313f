// Internal: matrix products on oneDNN's matmul primitive for 16-bit operands (bf16) with f32
// accumulation, used by the linear layer when its data type is not f32 (f32 keeps sgemm).
// Thread-safety: as the other cached oneDNN primitives (dnnl_context.h).
#pragma once

#include <cstdint>

#include "tandem/dtype.h"

namespace tandem::ops::cpu {

/// One operand of matmul(): `data` holds a [rows, cols] matrix in row-major order, or its
/// transpose ([cols, rows] row-major) when `transposed`.
struct MatArg {
  const void* data;
  bool transposed;
};

/// c [m, n] = a [m, k] * b [k, n] (+ bias [n], f32, when given), computed in f32 from a and b
/// of type `ab` and written as `c_type` (f32 or ab), added to c's values when `accumulate`.
/// m, n, k >= 1.
void matmul(DType ab, int64_t m, int64_t n, int64_t k, MatArg a, MatArg b, const float* bias, void* c,
            DType c_type, bool accumulate);

}  // namespace tandem::ops::cpu
