// GELU (tanh form) and the residual add (cpu_transformer_kernels.h), included by the two
// instruction-set units after their target pragma; internal linkage.
// GELU as GPT-2 and torch.nn.GELU(approximate='tanh') (Hendrycks & Gimpel 2016):
//   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
#pragma once

#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_transformer_kernels.h"
#include "backend/cpu/cpu_vec_math.h"

namespace tandem::ops::cpu {
namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

template <typename T>
void gelu_fwd(const T* x, T* y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = ld(x[i]);
    const float t = vtanh(kGeluK * (v + kGeluA * v * v * v));
    y[i] = st(0.5f * v * (1.0f + t), y);
  }
}

template <typename T>
void gelu_bwd(const T* dy, const T* x, T* dx, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = ld(x[i]);
    const float t = vtanh(kGeluK * (v + kGeluA * v * v * v));
    const float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = st(ld(dy[i]) * d, dx);
  }
}

template <typename T>
void add_loop(const T* a, const T* b, T* y, int64_t n) {
#pragma omp parallel for simd if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = st(ld(a[i]) + ld(b[i]), y);
}

void gelu_forward_k(DType dt, const void* x, void* y, int64_t n) {
  by_dtype(dt, [&](auto t) {
    using T = decltype(t);
    gelu_fwd(static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}
void gelu_backward_k(DType dt, const void* dy, const void* x, void* dx, int64_t n) {
  by_dtype(dt, [&](auto t) {
    using T = decltype(t);
    gelu_bwd(static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n);
  });
}
void add_k(DType dt, const void* a, const void* b, void* y, int64_t n) {
  by_dtype(dt, [&](auto t) {
    using T = decltype(t);
    add_loop(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n);
  });
}

}  // namespace
}  // namespace tandem::ops::cpu
