// Element-wise ops: ReLU, dropout, axpy-style updates (OpenMP + auto-vectorised loops).
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/rng.h"

namespace tandem::ops {

void CpuBackend::relu_forward(const Tensor& x, const Tensor& y) {
  const float* a = x.data<float>();
  float* b = y.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) b[i] = a[i] <= 0.0f ? 0.0f : a[i];  // NaN propagates, as in PyTorch
}

void CpuBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  const float* g = dy.data<float>();
  const float* yp = y.data<float>();
  float* d = dx.data<float>();
  const int64_t n = y.numel();
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = yp[i] <= 0.0f ? 0.0f : g[i];
}

void CpuBackend::dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                                 const Tensor& mask) {
  const float* a = x.data<float>();
  float* b = y.data<float>();
  uint8_t* m = mask.data<uint8_t>();
  const int64_t n = x.numel();
  Philox rng(seed, counter);
  for (int64_t i = 0; i < n; ++i) m[i] = rng.uniform() >= p ? 1 : 0;
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) b[i] = m[i] ? a[i] * scale : 0.0f;
}

void CpuBackend::dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  const float* g = dy.data<float>();
  const uint8_t* m = mask.data<uint8_t>();
  float* d = dx.data<float>();
  const int64_t n = dy.numel();
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = m[i] ? g[i] * scale : 0.0f;
}

void CpuBackend::add_(const Tensor& dst, const Tensor& src, float alpha) {
  cpu::axpy(dst.data<float>(), src.data<float>(), alpha, dst.numel());
}

void CpuBackend::scale_(const Tensor& dst, float alpha) {
  float* d = dst.data<float>();
  const int64_t n = dst.numel();
#pragma omp parallel for simd if (n > cpu::kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] *= alpha;
}

void CpuBackend::zero_(const Tensor& dst) { std::memset(dst.raw_data(), 0, dst.nbytes()); }

}  // namespace tandem::ops
