// Element-wise ops: ReLU, the residual add + ReLU, dropout, axpy-style updates (OpenMP + auto-vectorised loops), for
// f32 and bf16 elements (computed in f32, rounded once on store).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/rng.h"

namespace tandem::ops {
namespace {

using cpu::elems;
using cpu::ld;
using cpu::st;

template <typename T>
void relu_fwd(const T* a, T* b, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = ld(a[i]);
    b[i] = st(v <= 0.0f ? 0.0f : v, b);  // NaN propagates, as in PyTorch
  }
}

template <typename T>
void relu_bwd(const T* g, const T* yp, T* d, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = ld(yp[i]) <= 0.0f ? st(0.0f, d) : g[i];
}

template <typename T>
void add_relu_loop(const T* a, const T* b, T* y, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = ld(a[i]) + ld(b[i]);
    y[i] = st(v <= 0.0f ? 0.0f : v, y);
  }
}

// d[i] = m[i] ? s[i] * scale : 0.
template <typename T>
void masked_scale(const T* s, const uint8_t* m, float scale, T* d, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = st(m[i] ? ld(s[i]) * scale : 0.0f, d);
}

template <typename T>
void scale_loop(T* d, float alpha, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = st(ld(d[i]) * alpha, d);
}

// y[i] += a * x[i] for bf16 (f32 uses cpu::axpy).
void axpy_bf16(uint16_t* y, const uint16_t* x, float a, int64_t n) {
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(ld(y[i]) + a * ld(x[i]));
}

}  // namespace

void CpuBackend::relu_forward(const Tensor& x, const Tensor& y) {
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    relu_fwd(elems<T>(x), elems<T>(y), x.numel());
  });
}

void CpuBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  cpu::by_dtype(y.dtype(), [&](auto t) {
    using T = decltype(t);
    relu_bwd(elems<T>(dy), elems<T>(y), elems<T>(dx), y.numel());
  });
}

void CpuBackend::add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  cpu::by_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    add_relu_loop(elems<T>(a), elems<T>(b), elems<T>(y), a.numel());
  });
}

void CpuBackend::dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                                 const Tensor& mask) {
  uint8_t* m = mask.data<uint8_t>();
  const int64_t n = x.numel();
  Philox rng(seed, counter);
  for (int64_t i = 0; i < n; ++i) m[i] = rng.uniform() >= p ? 1 : 0;
  const float scale = 1.0f / (1.0f - p);
  cpu::by_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    masked_scale(elems<T>(x), m, scale, elems<T>(y), n);
  });
}

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  const float scale = 1.0f / (1.0f - p);
  cpu::by_dtype(dy.dtype(), [&](auto t) {
    using T = decltype(t);
    masked_scale(elems<T>(dy), mask.data<uint8_t>(), scale, elems<T>(dx), dy.numel());
  });
}

void CpuBackend::add_(const Tensor& dst, const Tensor& src, float alpha) {
  if (dst.dtype() == DType::f32)
    cpu::axpy(dst.data<float>(), src.data<float>(), alpha, dst.numel());
  else
    axpy_bf16(dst.data<uint16_t>(), src.data<uint16_t>(), alpha, dst.numel());
}

void CpuBackend::scale_(const Tensor& dst, float alpha) {
  cpu::by_dtype(dst.dtype(), [&](auto t) {
    using T = decltype(t);
    scale_loop(elems<T>(dst), alpha, dst.numel());
  });
}

void CpuBackend::zero_(const Tensor& dst) { std::memset(dst.raw_data(), 0, dst.nbytes()); }

}  // namespace tandem::ops
