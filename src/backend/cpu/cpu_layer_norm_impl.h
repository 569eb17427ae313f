// Layer norm kernels (cpu_transformer_kernels.h), included by the two instruction-set units
// after their target pragma; internal linkage, so each unit keeps its own instantiations.
// Forward per row (torch.nn.LayerNorm, biased variance; Ba, Kiros, Hinton 2016):
//   mean = sum x / C, var = sum (x - mean)^2 / C (two passes), rstd = 1 / sqrt(var + eps),
//   y = (x - mean) * rstd * gamma + beta.
// Backward per row, with xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
//   dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
// dgamma and dbeta are summed per fixed block of rows (the block size depends on the row count
// only) and the blocks' partial sums added in block order, so they are the same bits for any
// thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/cpu_transformer_kernels.h"

namespace tandem::ops::cpu {
namespace {

template <typename T>
void ln_forward(const LayerNormArgs& a) {
  const int64_t n = a.rows, c = a.cols;
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const float* g = a.gamma;
  const float* b = a.beta;
  const float inv_c = 1.0f / static_cast<float>(c);
#pragma omp parallel for schedule(static) if (n * c > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * c;
    T* yi = y + i * c;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < c; ++j) s += ld(xi[j]);
    const float m = s * inv_c;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < c; ++j) {
      const float d = ld(xi[j]) - m;
      v += d * d;
    }
    const float r = 1.0f / std::sqrt(v * inv_c + a.eps);
    if (b) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yi[j] = st((ld(xi[j]) - m) * r * g[j] + b[j], yi);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yi[j] = st((ld(xi[j]) - m) * r * g[j], yi);
    }
    a.mean[i] = m;
    a.rstd[i] = r;
  }
}

// Rows per block of the parameter-gradient partial sums: at least 16, at most 256 blocks.
int64_t ln_block_rows(int64_t rows) { return std::max<int64_t>(16, (rows + 255) / 256); }

template <typename T>
void ln_backward(const LayerNormArgs& a) {
  const int64_t n = a.rows, c = a.cols;
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  T* dx = static_cast<T*>(a.dx);
  const float* g = a.gamma;
  const bool params = a.dgamma != nullptr || a.dbeta != nullptr;
  const int64_t br = ln_block_rows(n);
  const int64_t blocks = (n + br - 1) / br;
  std::vector<float> part(params ? static_cast<size_t>(blocks * 2 * c) : 0);
  const float inv_c = 1.0f / static_cast<float>(c);
#pragma omp parallel for schedule(static) if (n * c > kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float* pg = params ? part.data() + blk * 2 * c : nullptr;
    float* pb = params ? pg + c : nullptr;
    if (params)
      for (int64_t j = 0; j < 2 * c; ++j) pg[j] = 0.0f;
    const int64_t end = std::min(n, (blk + 1) * br);
    for (int64_t i = blk * br; i < end; ++i) {
      const T* xi = x + i * c;
      const T* dyi = dy + i * c;
      const float m = a.mean[i], r = a.rstd[i];
      float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
      for (int64_t j = 0; j < c; ++j) {
        const float gj = ld(dyi[j]) * g[j];
        s1 += gj;
        s2 += gj * (ld(xi[j]) - m) * r;
      }
      const float m1 = s1 * inv_c, m2 = s2 * inv_c;
      if (dx) {
        T* dxi = dx + i * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) {
          const float xh = (ld(xi[j]) - m) * r;
          dxi[j] = st(r * (ld(dyi[j]) * g[j] - m1 - xh * m2), dxi);
        }
      }
      if (params) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) {
          const float d = ld(dyi[j]);
          pg[j] += d * (ld(xi[j]) - m) * r;
          pb[j] += d;
        }
      }
    }
  }
  if (!params) return;
#pragma omp parallel for schedule(static) if (blocks * c > kParallelMin)
  for (int64_t j = 0; j < c; ++j) {
    float sg = 0.0f, sb = 0.0f;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      sg += part[blk * 2 * c + j];
      sb += part[blk * 2 * c + c + j];
    }
    if (a.dgamma) a.dgamma[j] = a.accumulate ? a.dgamma[j] + sg : sg;
    if (a.dbeta) a.dbeta[j] = a.accumulate ? a.dbeta[j] + sb : sb;
  }
}

void layer_norm_forward_k(const LayerNormArgs& a) {
  by_dtype(a.dt, [&](auto t) { ln_forward<decltype(t)>(a); });
}
void layer_norm_backward_k(const LayerNormArgs& a) {
  by_dtype(a.dt, [&](auto t) { ln_backward<decltype(t)>(a); });
}

}  // namespace
}  // namespace tandem::ops::cpu
