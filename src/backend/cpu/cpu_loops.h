// Small vectorisable loops shared by the cpu backend's kernels. Loops over more than
// kParallelMin elements run on the OpenMP team.
#pragma once

#include <cstdint>

namespace tandem::ops::cpu {

constexpr int64_t kParallelMin = 1 << 15;

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
