// Own kernels: the flat Adam / SGD updates. Each element runs the arithmetic of
// src/backend/optim_element.h, the functions the cpu backend's kernels call, so results
// match the CPU kernels bit for bit. Launchers return the launch status.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/optim_element.h"

namespace tandem::cuda_kernels {
namespace {

// The low-precision copy of the updated parameter, rounded to nearest even.
__device__ inline void store_out(void* out, int kind, int64_t i, float v) {
  if (kind == 1) static_cast<float*>(out)[i] = v;
  if (kind == 2) static_cast<uint16_t*>(out)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  if (kind == 3) static_cast<uint16_t*>(out)[i] = __half_as_ushort(__float2half_rn(v));
}

__global__ void adam_k(float* param, const float* grad, float* m1, float* m2, void* out,
                       int out_kind, int64_t n, ops::AdamConstants c) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    float m = m1[i], v = m2[i];
    const float np = ops::detail::adam_element_update(c, param[i], grad[i], m, v);
    m1[i] = m;
    m2[i] = v;
    param[i] = np;
    if (out_kind) store_out(out, out_kind, i, np);
  }
}

__global__ void sgd_k(float* param, const float* grad, float* buf, void* out, int out_kind,
                      int64_t n, ops::SgdConstants c) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float np = ops::detail::sgd_element_update(c, param[i], grad[i], buf ? buf + i : nullptr);
    param[i] = np;
    if (out_kind) store_out(out, out_kind, i, np);
  }
}

}  // namespace

cudaError_t adam(float* param, const float* grad, float* m, float* v, void* out, int out_kind,
                 int64_t n, const ops::AdamConstants& c, cudaStream_t s) {
  if (n > 0) adam_k<<<blocks_for(n), kThreads, 0, s>>>(param, grad, m, v, out, out_kind, n, c);
  return cudaGetLastError();
}

cudaError_t sgd(float* param, const float* grad, float* buf, void* out, int out_kind, int64_t n,
                const ops::SgdConstants& c, cudaStream_t s) {
  if (n > 0) sgd_k<<<blocks_for(n), kThreads, 0, s>>>(param, grad, buf, out, out_kind, n, c);
  return cudaGetLastError();
}

}  // namespace tandem::cuda_kernels
