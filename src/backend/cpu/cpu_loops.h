// Small vectorisable loops shared by the cpu backend's kernels. Loops over more than
// kParallelMin elements run on the OpenMP team.
// Kernels templated on the element type T take float (f32) or uint16_t, which in the cpu
// backend always holds bf16 (it supports no f16 op but zero_); ld() widens an element to
// float and st() rounds a float to the element type (nearest even), so that arithmetic is
// f32 for every T and the float instantiation is the plain f32 code.
#pragma once

#include <cstdint>

#include "tandem/dtype.h"
#include "tandem/tensor.h"

namespace tandem::ops::cpu {

constexpr int64_t kParallelMin = 1 << 15;

/// ld(e): element e as float. st(v, p): v rounded to the element type of p (p only selects it).
inline float ld(float v) { return v; }
inline float ld(uint16_t v) { return bf16_to_float(v); }
inline float st(float v, float*) { return v; }
inline uint16_t st(float v, uint16_t*) { return float_to_bf16(v); }

/// Runs f(T{}) with T = float for f32 tensors and uint16_t (bf16) otherwise.
template <typename F>
inline void by_dtype(DType dt, F&& f) {
  if (dt == DType::f32)
    f(float{});
  else
    f(uint16_t{});
}
/// t's elements as T (float or uint16_t).
template <typename T>
inline T* elems(const Tensor& t) {
  return t.data<T>();
}

/// y[i] += a * x[i] for i < n.
inline void axpy(float* __restrict y, const float* __restrict x, float a, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

/// y[i] = 0 for i < n.
inline void zero(float* __restrict y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
}

}  // namespace tandem::ops::cpu
