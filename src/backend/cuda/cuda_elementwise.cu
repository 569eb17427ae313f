// Own kernels: element-wise ops, dropout (Philox, same mask as the CPU backend), row bias and
// column sums for linear layers. Launchers return the launch status.
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

__global__ void relu_fwd_k(const float* x, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] = x[i] <= 0.0f ? 0.0f : x[i];  // NaN propagates
}

__global__ void relu_bwd_k(const float* dy, const float* y, float* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

__global__ void add_relu_k(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = a[i] + b[i];
    y[i] = v <= 0.0f ? 0.0f : v;
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
__global__ void dropout_fwd_k(const float* x, float* y, uint8_t* mask, int64_t n, float p, float scale,
                              PhiloxKey key) {
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
      y[i] = keep ? x[i] * scale : 0.0f;
    }
  }
}

__global__ void dropout_bwd_k(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale) {
  for (int64_t i = global_index(); i < n; i += global_stride()) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

__global__ void axpy_k(float* d, const float* s, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] += alpha * s[i];
}

__global__ void scale_k(float* d, float alpha, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) d[i] *= alpha;
}

__global__ void add_row_bias_k(float* y, const float* b, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_index(); i < n; i += global_stride()) y[i] += b[i % cols];
}

// One thread per column; consecutive threads read consecutive columns of a row.
__global__ void sum_rows_k(const float* a, float* out, int64_t rows, int64_t cols, bool accumulate) {
  for (int64_t c = global_index(); c < cols; c += global_stride()) {
    double s = 0.0;
    for (int64_t r = 0; r < rows; ++r) s += a[r * cols + c];
    out[c] = accumulate ? out[c] + static_cast<float>(s) : static_cast<float>(s);
  }
}
}  // namespace

cudaError_t relu_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) relu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t relu_backward(const float* dy, const float* y, float* dx, int64_t n, cudaStream_t s) {
  if (n > 0) relu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(dy, y, dx, n);
  return cudaGetLastError();
}

cudaError_t add_relu_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
  if (n > 0) add_relu_k<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, float p, PhiloxKey k,
                            cudaStream_t s) {
  const float scale = 1.0f / (1.0f - p);
  if (n > 0) dropout_fwd_k<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(x, y, mask, n, p, scale, k);
  return cudaGetLastError();
}

cudaError_t dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale,
                             cudaStream_t s) {
  if (n > 0) dropout_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(dy, mask, dx, n, scale);
  return cudaGetLastError();
}

cudaError_t axpy(float* dst, const float* src, float alpha, int64_t n, cudaStream_t s) {
  if (n > 0) axpy_k<<<blocks_for(n), kThreads, 0, s>>>(dst, src, alpha, n);
  return cudaGetLastError();
}

cudaError_t scale(float* dst, float alpha, int64_t n, cudaStream_t s) {
  if (n > 0) scale_k<<<blocks_for(n), kThreads, 0, s>>>(dst, alpha, n);
  return cudaGetLastError();
}

cudaError_t add_row_bias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols > 0) add_row_bias_k<<<blocks_for(rows * cols), kThreads, 0, s>>>(y, b, rows, cols);
  return cudaGetLastError();
}

cudaError_t sum_rows(const float* a, float* out, int64_t rows, int64_t cols, bool accumulate, cudaStream_t s) {
  if (cols > 0) sum_rows_k<<<blocks_for(cols, 128), 128, 0, s>>>(a, out, rows, cols, accumulate);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
