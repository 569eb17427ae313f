// Own kernels: element-wise ops, dropout (Philox, same mask as the CPU backend), biases, widening
// and column sums for linear layers and convolutions, templated on the element type (f32
// arithmetic, one rounding on store). Launchers return the launch status.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

template <typename T>
__global__ void relu_fwd_k(const T* x, T* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = load(x, i);
    store(y, i, v <= 0.0f ? 0.0f : v);  // NaN propagates
  }
}

template <typename T>
__global__ void relu_bwd_k(const T* dy, const T* y, T* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) store(dx, i, load(y, i) <= 0.0f ? 0.0f : load(dy, i));
}

template <typename T>
__global__ void add_relu_k(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = load(a, i) + load(b, i);
    store(y, i, v <= 0.0f ? 0.0f : v);
  }
}

// Philox4x32-10 (Salmon et al. 2011), the same rounds as tandem::Philox::block.
__device__ uint4 philox_block(uint4 c, uint2 k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(kM0, c.x), lo0 = kM0 * c.x;
    const uint32_t hi1 = __umulhi(kM1, c.z), lo1 = kM1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += kW0;
    k.y += kW1;
  }
  return c;
}

// One thread per Philox block of 4 draws (elements 4j .. 4j+3).
template <typename T>
__global__ void dropout_fwd_k(const T* x, T* y, uint8_t* mask, int64_t n, float p, float scale, PhiloxKey key) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = global_index(); j < blocks; j += global_stride()) {
    const uint4 r = philox_block(make_uint4(static_cast<uint32_t>(j), key.ctr[0], key.ctr[1], key.ctr[2]),
                                 make_uint2(key.key[0], key.key[1]));
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int64_t i = 4 * j + q;
      if (i >= n) break;
      const float u = static_cast<float>(w[q] >> 8) * (1.0f / 16777216.0f);
      const bool keep = u >= p;
      mask[i] = keep ? 1 : 0;
      store(y, i, keep ? load(x, i) * scale : 0.0f);
    }
  }
}

template <typename T>
__global__ void dropout_bwd_k(const T* dy, const uint8_t* mask, T* dx, int64_t n, float scale) {
  for (int64_t i = global_index(); i < n; i += global_stride()) store(dx, i, mask[i] ? load(dy, i) * scale : 0.0f);
}

template <typename T>
__global__ void axpy_k(T* d, const T* s, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) store(d, i, load(d, i) + alpha * load(s, i));
}

template <typename T>
__global__ void scale_k(T* d, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) store(d, i, load(d, i) * alpha);
}

__global__ void add_row_bias_k(float* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] += b[i % cols];
}

template <typename T>
__global__ void bias_store_k(const float* acc, const float* b, T* y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) store(y, i, b ? acc[i] + b[i % cols] : acc[i]);
}

template <typename T>
__global__ void add_channel_bias_k(T* y, const float* b, int64_t outer, int64_t channels, int64_t inner) {
  const int64_t n = outer * channels * inner;
  for (int64_t i = global_index(); i < n; i += global_stride()) store(y, i, load(y, i) + b[(i / inner) % channels]);
}

template <typename T>
__global__ void widen_k(const T* s, float* d, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] = load(s, i);
}

// One thread per column; consecutive threads read consecutive columns of a row.
template <typename T>
__global__ void sum_rows_k(const T* a, float* out, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t c = global_index(); c < cols; c += global_stride()) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += load(a, r * cols + c);
    out[c] = accumulate ? out[c] + static_cast<float>(s) : static_cast<float>(s);
  }
}
}  // namespace

cudaError_t relu_forward(Elem e, const void* x, void* y, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0) relu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t relu_backward(Elem e, const void* dy, const void* y, void* dx, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      relu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(dy), static_cast<const T*>(y),
                                                    static_cast<T*>(dx), n);
    return cudaGetLastError();
  });
}

cudaError_t add_relu_forward(Elem e, const void* a, const void* b, void* y, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      add_relu_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                    static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t dropout_forward(Elem e, const void* x, void* y, uint8_t* mask, int64_t n, float p, PhiloxKey k,
                            cudaStream_t s) {
  const float scale = 1.0f / (1.0f - p);
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      dropout_fwd_k<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), mask,
                                                                 n, p, scale, k);
    return cudaGetLastError();
  });
}

cudaError_t dropout_backward(Elem e, const void* dy, const uint8_t* mask, void* dx, int64_t n, float scale,
                             cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      dropout_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(dy), mask, static_cast<T*>(dx), n,
                                                       scale);
    return cudaGetLastError();
  });
}

cudaError_t axpy(Elem e, void* dst, const void* src, float alpha, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      axpy_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), alpha, n);
    return cudaGetLastError();
  });
}

cudaError_t scale(Elem e, void* dst, float alpha, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0) scale_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(dst), alpha, n);
    return cudaGetLastError();
  });
}

cudaError_t add_row_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols > 0) add_row_bias_k<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  return cudaGetLastError();
}

cudaError_t bias_store(Elem e, const float* acc, const float* b, void* y, int64_t rows, int64_t cols,
                       cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (rows * cols > 0)
      bias_store_k<<<blocks_for(rows * cols), kThreads, 0, s>>>(acc, b, static_cast<T*>(y), rows, cols);
    return cudaGetLastError();
  });
}

cudaError_t add_channel_bias(Elem e, void* y, const float* b, int64_t outer, int64_t channels, int64_t inner,
                             cudaStream_t s) {
  const int64_t n = outer * channels * inner;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      add_channel_bias_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(y), b, outer, channels, inner);
    return cudaGetLastError();
  });
}

cudaError_t widen(Elem e, const void* src, float* dst, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0) widen_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(src), dst, n);
    return cudaGetLastError();
  });
}

cudaError_t sum_rows(Elem e, const void* a, float* out, int64_t rows, int64_t cols, bool accumulate, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (cols > 0)
      sum_rows_k<<<blocks_for(cols, 128), 128, 0, s>>>(static_cast<const T*>(a), out, rows, cols, accumulate);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
