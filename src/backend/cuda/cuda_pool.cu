// Own kernels: max pooling with indices (forward) and its backward. Launchers return the
// launch status.
#include <cfloat>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

// One thread per output; the first maximum in row-major window order wins, NaN propagates
// (as the CPU backend).
__global__ void max_pool_fwd_k(const float* x, float* y, int32_t* idx, PoolShape p) {
  const int64_t n = p.planes * p.P * p.Q;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    const int64_t ow = o % p.Q, oh = (o / p.Q) % p.P, pl = o / (p.P * p.Q);
    const int64_t h0 = max(oh * p.sh - p.ph, int64_t{0}), h1 = min(oh * p.sh - p.ph + p.kh, p.H);
    const int64_t w0 = max(ow * p.sw - p.pw, int64_t{0}), w1 = min(ow * p.sw - p.pw + p.kw, p.W);
    const float* xs = x + pl * p.H * p.W;
    float best = -INFINITY;
    int64_t bi = h0 * p.W + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const float v = xs[h * p.W + w];
        if (v > best || isnan(v)) best = v, bi = h * p.W + w;
      }
    y[o] = best;
    if (idx) idx[o] = static_cast<int32_t>(bi);
  }
}

__global__ void max_pool_bwd_k(const float* dy, const int32_t* idx, float* dx, int64_t planes, int64_t hw,
                               int64_t pq) {
  const int64_t n = planes * pq;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    const int32_t k = idx[o];
    if (k >= 0 && k < hw) atomicAdd(dx + (o / pq) * hw + k, dy[o]);
  }
}
}  // namespace

cudaError_t max_pool_forward(const float* x, float* y, int32_t* indices, const PoolShape& p, cudaStream_t s) {
  const int64_t n = p.planes * p.P * p.Q;
  if (n > 0) max_pool_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, indices, p);
  return cudaGetLastError();
}

cudaError_t max_pool_backward(const float* dy, const int32_t* indices, float* dx, const PoolShape& p,
                              cudaStream_t s) {
  const int64_t hw = p.H * p.W, pq = p.P * p.Q;
  if (p.planes * hw > 0) {
    const cudaError_t err = cudaMemsetAsync(dx, 0, static_cast<size_t>(p.planes * hw) * sizeof(float), s);
    if (err != cudaSuccess) return err;
  }
  if (p.planes * pq > 0)
    max_pool_bwd_k<<<blocks_for(p.planes * pq), kThreads, 0, s>>>(dy, indices, dx, p.planes, hw, pq);
  return cudaGetLastError();
}

namespace {

// One warp per plane: lanes stride over the plane, then a shuffle reduction.
__global__ void global_avg_fwd_k(const float* x, float* y, int64_t planes, int64_t hw) {
  const int64_t warps = global_stride() / 32;
  const int lane = threadIdx.x & 31;
  for (int64_t p = global_index() / 32; p < planes; p += warps) {
    const float* src = x + p * hw;
    double s = 0.0;
    for (int64_t i = lane; i < hw; i += 32) s += src[i];
    s = warp_sum(s);
    if (lane == 0) y[p] = static_cast<float>(s / static_cast<double>(hw));
  }
}

__global__ void global_avg_bwd_k(const float* dy, float* dx, int64_t planes, int64_t hw) {
  const int64_t n = planes * hw;
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = dy[i / hw] * inv;
}

}  // namespace

cudaError_t global_avg_pool_forward(const float* x, float* y, int64_t planes, int64_t hw, cudaStream_t s) {
  if (planes > 0) global_avg_fwd_k<<<blocks_for(planes * 32), kThreads, 0, s>>>(x, y, planes, hw);
  return cudaGetLastError();
}

cudaError_t global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw, cudaStream_t s) {
  if (planes * hw > 0) global_avg_bwd_k<<<blocks_for(planes * hw), kThreads, 0, s>>>(dy, dx, planes, hw);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
