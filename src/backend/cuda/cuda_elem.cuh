// Internal, device side: the element types of the kernels (f32, bf16, f16), their loads as f32
// and their stores from f32 (rounded to nearest even), and the dispatch from Elem to a type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "backend/cuda/cuda_kernels.h"

namespace tandem::cuda_kernels {

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }

__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }

template <typename T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<T>{}) with T the element type of `e` and returns what f returns.
template <typename F>
cudaError_t dispatch(Elem e, F&& f) {
  switch (e) {
    case Elem::bf16:
      return f(TypeTag<__nv_bfloat16>{});
    case Elem::f16:
      return f(TypeTag<__half>{});
    default:
      return f(TypeTag<float>{});
  }
}

}  // namespace tandem::cuda_kernels
