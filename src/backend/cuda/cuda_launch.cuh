// Internal, device side: launch geometry and reductions shared by the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda_kernels {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

/// Grid-stride loop index helpers (64-bit).
__device__ inline int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ inline double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

/// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
/// `scratch` holds 32 doubles of shared memory.
__device__ inline double block_sum(double v, double* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double t = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : 0.0;
    t = warp_sum(t);
    if (lane == 0) scratch[0] = t;
  }
  __syncthreads();
  return scratch[0];
}

}  // namespace tandem::cuda_kernels
