// Own kernels: GELU (tanh form, as GPT-2; formulas in src/backend/cpu/cpu_gelu_impl.h) and the
// residual add, element-wise grid-stride loops templated on the element type.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_launch.cuh"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::cuda_kernels {
namespace {

constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

template <typename T>
__global__ void gelu_fwd_k(const T* x, T* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = load(x, i);
    const float t = tanhf(kGeluK * (v + kGeluA * v * v * v));
    store(y, i, 0.5f * v * (1.0f + t));
  }
}

template <typename T>
__global__ void gelu_bwd_k(const T* dy, const T* x, T* dx, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const float v = load(x, i);
    const float t = tanhf(kGeluK * (v + kGeluA * v * v * v));
    const float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluA * v * v);
    store(dx, i, load(dy, i) * d);
  }
}

template <typename T>
__global__ void add_k(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += global_stride()) store(y, i, load(a, i) + load(b, i));
}

}  // namespace

cudaError_t gelu_forward(Elem e, const void* x, void* y, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0) gelu_fwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t gelu_backward(Elem e, const void* dy, const void* x, void* dx, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      gelu_bwd_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(dy), static_cast<const T*>(x),
                                                    static_cast<T*>(dx), n);
    return cudaGetLastError();
  });
}

cudaError_t add_forward(Elem e, const void* a, const void* b, void* y, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      add_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y),
                                               n);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
