// Own kernels: layer norm over the last dimension, forward and backward (formulas in
// src/backend/cpu/cpu_layer_norm_impl.h), templated on the element type. One warp per row for
// y and dx; dgamma and dbeta from column partial sums per fixed chunk of kLayerNormChunkRows
// rows, added over the chunks in order (deterministic). Launchers return the launch status.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_reduce.cuh"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::cuda_kernels {
namespace {

template <typename T>
__global__ void ln_fwd_k(const T* x, const float* g, const float* b, T* y, float* mean, float* rstd, int64_t rows,
                         int64_t cols, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const float inv_c = 1.0f / static_cast<float>(cols);
  for (int64_t i = global_index() >> 5; i < rows; i += warps) {
    const T* xi = x + i * cols;
    float s = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) s += load(xi, j);
    const float m = warp_allsum(s) * inv_c;
    float v = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
      const float d = load(xi, j) - m;
      v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_allsum(v) * inv_c + eps);
    T* yi = y + i * cols;
    for (int64_t j = lane; j < cols; j += 32) store(yi, j, (load(xi, j) - m) * r * g[j] + (b ? b[j] : 0.0f));
    if (lane == 0) {
      mean[i] = m;
      rstd[i] = r;
    }
  }
}

template <typename T>
__global__ void ln_bwd_dx_k(const T* dy, const T* x, const float* g, const float* mean, const float* rstd, T* dx,
                            int64_t rows, int64_t cols) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  const float inv_c = 1.0f / static_cast<float>(cols);
  for (int64_t i = global_index() >> 5; i < rows; i += warps) {
    const T* xi = x + i * cols;
    const T* dyi = dy + i * cols;
    const float m = mean[i], r = rstd[i];
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t j = lane; j < cols; j += 32) {
      const float gj = load(dyi, j) * g[j];
      s1 += gj;
      s2 += gj * (load(xi, j) - m) * r;
    }
    const float m1 = warp_allsum(s1) * inv_c, m2 = warp_allsum(s2) * inv_c;
    T* dxi = dx + i * cols;
    for (int64_t j = lane; j < cols; j += 32) {
      const float xh = (load(xi, j) - m) * r;
      store(dxi, j, r * (load(dyi, j) * g[j] - m1 - xh * m2));
    }
  }
}

// part[chunk][0][j] = sum of dy * xhat, part[chunk][1][j] = sum of dy over the chunk's rows.
template <typename T>
__global__ void ln_bwd_partial_k(const T* dy, const T* x, const float* mean, const float* rstd, float* part,
                                 int64_t rows, int64_t cols, int64_t chunks) {
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t r0 = chunk * kLayerNormChunkRows;
    const int64_t r1 = r0 + kLayerNormChunkRows < rows ? r0 + kLayerNormChunkRows : rows;
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      float pg = 0.0f, pb = 0.0f;
      for (int64_t i = r0; i < r1; ++i) {
        const float d = load(dy, i * cols + j);
        pg += d * (load(x, i * cols + j) - mean[i]) * rstd[i];
        pb += d;
      }
      part[chunk * 2 * cols + j] = pg;
      part[chunk * 2 * cols + cols + j] = pb;
    }
  }
}

__global__ void ln_bwd_final_k(const float* part, int64_t chunks, int64_t cols, float* dg, float* db, bool acc) {
  for (int64_t j = global_index(); j < cols; j += global_stride()) {
    float sg = 0.0f, sb = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      sg += part[c * 2 * cols + j];
      sb += part[c * 2 * cols + cols + j];
    }
    if (dg) dg[j] = acc ? dg[j] + sg : sg;
    if (db) db[j] = acc ? db[j] + sb : sb;
  }
}

int64_t chunks_of(int64_t rows) { return (rows + kLayerNormChunkRows - 1) / kLayerNormChunkRows; }

}  // namespace

cudaError_t layer_norm_forward(Elem e, const void* x, const float* gamma, const float* beta, void* y, float* mean,
                               float* rstd, int64_t rows, int64_t cols, float eps, cudaStream_t s) {
  if (rows <= 0) return cudaGetLastError();
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    ln_fwd_k<<<blocks_for(rows * 32), kThreads, 0, s>>>(static_cast<const T*>(x), gamma, beta, static_cast<T*>(y),
                                                        mean, rstd, rows, cols, eps);
    return cudaGetLastError();
  });
}

size_t layer_norm_backward_scratch(int64_t rows, int64_t cols) {
  return static_cast<size_t>(chunks_of(rows) * 2 * cols) * sizeof(float) + sizeof(float);
}

cudaError_t layer_norm_backward(Elem e, const void* dy, const void* x, const float* gamma, const float* mean,
                                const float* rstd, void* dx, float* dgamma, float* dbeta, bool accumulate,
                                int64_t rows, int64_t cols, void* scratch, cudaStream_t s) {
  if (rows <= 0) {
    for (float* p : {dgamma, dbeta})
      if (p && !accumulate) {
        const cudaError_t err = cudaMemsetAsync(p, 0, static_cast<size_t>(cols) * sizeof(float), s);
        if (err != cudaSuccess) return err;
      }
    return cudaGetLastError();
  }
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    const T* dyp = static_cast<const T*>(dy);
    const T* xp = static_cast<const T*>(x);
    if (dx)
      ln_bwd_dx_k<<<blocks_for(rows * 32), kThreads, 0, s>>>(dyp, xp, gamma, mean, rstd, static_cast<T*>(dx), rows,
                                                             cols);
    if (dgamma || dbeta) {
      const int64_t chunks = chunks_of(rows);
      float* part = static_cast<float*>(scratch);
      const dim3 grid(blocks_for(cols), static_cast<unsigned>(chunks < 65535 ? chunks : 65535));
      ln_bwd_partial_k<<<grid, kThreads, 0, s>>>(dyp, xp, mean, rstd, part, rows, cols, chunks);
      ln_bwd_final_k<<<blocks_for(cols), kThreads, 0, s>>>(part, chunks, cols, dgamma, dbeta, accumulate);
    }
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
