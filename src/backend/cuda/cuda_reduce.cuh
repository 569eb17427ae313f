// Internal, device side: warp and block reductions the transformer kernels share, each in a
// fixed order (butterfly shuffles, then warps in index order), so a result does not depend
// on scheduling. Every lane or thread receives the result.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda_kernels {

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename V, typename Op>
__device__ inline V warp_all(V v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ inline float warp_allsum(float v) { return warp_all(v, SumOp{}); }

/// Block-wide reduction with `op` (blockDim.x a multiple of 32, at most 1024); `identity` fills
/// the missing warps; `scratch` holds 32 values of shared memory.
template <typename V, typename Op>
__device__ inline V block_all(V v, V identity, V* scratch, Op op) {
  v = warp_all(v, op);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_all(lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : identity, op);
}

/// An id array of i32 or i64 elements read as int64.
__device__ inline int64_t load_id(const void* ids, bool i64, int64_t i) {
  return i64 ? static_cast<const int64_t*>(ids)[i] : static_cast<int64_t>(static_cast<const int32_t*>(ids)[i]);
}

}  // namespace tandem::cuda_kernels
