// Own kernels: max pooling with indices (forward) and its backward, global average pooling,
// templated on the element type (compared and summed in f32 or double, rounded once on
// store). Launchers return the launch status.
#include <cfloat>

#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

// One thread per output; the first maximum in row-major window order wins, NaN propagates
// (as the CPU backend).
template <typename T>
__global__ void max_pool_fwd_k(const T* x, T* y, int32_t* idx, PoolShape p) {
  const int64_t n = p.planes * p.P * p.Q;
  for (int64_t o = global_index(); o < n; o += global_stride()) {
    const int64_t ow = o % p.Q, oh = (o / p.Q) % p.P, pl = o / (p.P * p.Q);
    const int64_t h0 = max(oh * p.sh - p.ph, int64_t{0}), h1 = min(oh * p.sh - p.ph + p.kh, p.H);
    const int64_t w0 = max(ow * p.sw - p.pw, int64_t{0}), w1 = min(ow * p.sw - p.pw + p.kw, p.W);
    const T* xs = x + pl * p.H * p.W;
    float best = -INFINITY;
    int64_t bi = h0 * p.W + w0;
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) {
        const float v = load(xs, h * p.W + w);
        if (v > best || isnan(v)) best = v, bi = h * p.W + w;
      }
    store(y, o, best);  // a value of x: exact in T
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

// One thread per input element: the sum, in f32 and in window order, of dy over the outputs
// whose window holds the element and chose it; one rounding on store (no 16-bit atomics).
template <typename T>
__global__ void max_pool_bwd_gather_k(const T* dy, const int32_t* idx, T* dx, PoolShape p) {
  const int64_t hw = p.H * p.W, n = p.planes * hw;
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const int64_t pl = i / hw, k = i - pl * hw, h = k / p.W, w = k - h * p.W;
    // Outputs oh with oh * sh - ph <= h < oh * sh - ph + kh (and the same for ow).
    const int64_t oh0 = max((h + p.ph - p.kh + p.sh) / p.sh, int64_t{0}), oh1 = min((h + p.ph) / p.sh + 1, p.P);
    const int64_t ow0 = max((w + p.pw - p.kw + p.sw) / p.sw, int64_t{0}), ow1 = min((w + p.pw) / p.sw + 1, p.Q);
    float sum = 0.0f;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = (pl * p.P + oh) * p.Q + ow;
        if (idx[o] == k) sum += load(dy, o);
      }
    store(dx, i, sum);
  }
}

}  // namespace

cudaError_t max_pool_forward(Elem e, const void* x, void* y, int32_t* indices, const PoolShape& p, cudaStream_t s) {
  const int64_t n = p.planes * p.P * p.Q;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      max_pool_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), indices, p);
    return cudaGetLastError();
  });
}

cudaError_t max_pool_backward(Elem e, const void* dy, const int32_t* indices, void* dx, const PoolShape& p,
                              cudaStream_t s) {
  const int64_t hw = p.H * p.W, pq = p.P * p.Q;
  if (e != Elem::f32) {
    return dispatch(e, [&](auto t) {
      using T = typename decltype(t)::type;
      if (p.planes * hw > 0)
        max_pool_bwd_gather_k<<<blocks_for(p.planes * hw), kThreads, 0, s>>>(static_cast<const T*>(dy), indices,
                                                                             static_cast<T*>(dx), p);
      return cudaGetLastError();
    });
  }
  if (p.planes * hw > 0) {
    const cudaError_t err = cudaMemsetAsync(dx, 0, static_cast<size_t>(p.planes * hw) * sizeof(float), s);
    if (err != cudaSuccess) return err;
  }
  if (p.planes * pq > 0)
    max_pool_bwd_k<<<blocks_for(p.planes * pq), kThreads, 0, s>>>(static_cast<const float*>(dy), indices,
                                                                  static_cast<float*>(dx), p.planes, hw, pq);
  return cudaGetLastError();
}

namespace {

// One warp per plane: lanes stride over the plane, then a shuffle reduction.
template <typename T>
__global__ void global_avg_fwd_k(const T* x, T* y, int64_t planes, int64_t hw) {
  const int64_t warps = global_stride() / 32;
  const int lane = threadIdx.x & 31;
  for (int64_t p = global_index() / 32; p < planes; p += warps) {
    const T* src = x + p * hw;
    double s = 0.0;
    for (int64_t i = lane; i < hw; i += 32) s += load(src, i);
    s = warp_sum(s);
    if (lane == 0) store(y, p, static_cast<float>(s / static_cast<double>(hw)));
  }
}

template <typename T>
__global__ void global_avg_bwd_k(const T* dy, T* dx, int64_t planes, int64_t hw) {
  const int64_t n = planes * hw;
  const float inv = 1.0f / static_cast<float>(hw);
  for (int64_t i = global_index(); i < n; i += global_stride()) store(dx, i, load(dy, i / hw) * inv);
}

}  // namespace

cudaError_t global_avg_pool_forward(Elem e, const void* x, void* y, int64_t planes, int64_t hw, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (planes > 0)
      global_avg_fwd_k<<<blocks_for(planes * 32), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                                    planes, hw);
    return cudaGetLastError();
  });
}

cudaError_t global_avg_pool_backward(Elem e, const void* dy, void* dx, int64_t planes, int64_t hw, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (planes * hw > 0)
      global_avg_bwd_k<<<blocks_for(planes * hw), kThreads, 0, s>>>(static_cast<const T*>(dy), static_cast<T*>(dx),
                                                                    planes, hw);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
