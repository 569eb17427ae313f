// Own kernels: batch normalization over (N, H, W) per channel (training, inference,
// backward; statistics in double, one block per channel), templated on the element type of x,
// y, dy and dx (gamma, beta and the statistics are f32). Launchers return the launch status.
#include "backend/cuda/cuda_elem.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_launch.cuh"

namespace tandem::cuda_kernels {
namespace {

// Offset of the idx-th element (over N and HW) of channel c in [N, C, HW].
__device__ inline int64_t bn_offset(int64_t idx, int64_t c, const BnShape& sh) {
  const int64_t n = idx / sh.hw;
  return (n * sh.c + c) * sh.hw + (idx - n * sh.hw);
}

// Ioffe & Szegedy 2015; running statistics as torch.nn.BatchNorm2d (unbiased running_var).
template <typename T>
__global__ void bn_train_k(const T* x, const float* gamma, const float* beta, T* y, float* save_mean,
                           float* save_var, float* running_mean, float* running_var, BnShape sh, double eps,
                           float momentum, bool relu) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x, m = sh.n * sh.hw;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += load(x, bn_offset(i, c, sh));
  const double mean = block_sum(s, scratch) / static_cast<double>(m);
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const double d = load(x, bn_offset(i, c, sh)) - mean;
    ss += d * d;
  }
  const double var = block_sum(ss, scratch) / static_cast<double>(m);
  if (threadIdx.x == 0) {
    save_mean[c] = static_cast<float>(mean);
    save_var[c] = static_cast<float>(var);
    if (running_mean) {
      const float unbias = static_cast<float>(static_cast<double>(m) / (static_cast<double>(m) - 1.0));
      running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * static_cast<float>(mean);
      running_var[c] = (1.0f - momentum) * running_var[c] + momentum * static_cast<float>(var) * unbias;
    }
  }
  const float meanf = static_cast<float>(mean);
  const float scale = static_cast<float>(1.0 / sqrt(var + eps)) * gamma[c];
  const float shift = beta[c];
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const int64_t o = bn_offset(i, c, sh);
    const float v = fmaf(load(x, o) - meanf, scale, shift);
    store(y, o, relu && v <= 0.0f ? 0.0f : v);
  }
}

template <typename T>
__global__ void bn_infer_k(const T* x, const float* gamma, const float* beta, const float* mean,
                           const float* var, T* y, BnShape sh, double eps, bool relu) {
  const int64_t n = sh.n * sh.c * sh.hw;
  for (int64_t i = global_index(); i < n; i += global_stride()) {
    const int64_t c = (i / sh.hw) % sh.c;
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(var[c]) + eps)) * gamma[c];
    const float v = fmaf(load(x, i) - mean[c], scale, beta[c]);
    store(y, i, relu && v <= 0.0f ? 0.0f : v);
  }
}

// dx = gamma * invstd / M * (M * g - sum(g) - xhat * sum(g * xhat)), g = dy (masked by y > 0
// with a fused ReLU); dgamma = sum(g * xhat), dbeta = sum(g).
template <typename T>
__global__ void bn_bwd_k(const T* dy, const T* x, const float* gamma, const float* save_mean,
                         const float* save_var, const T* y, T* dx, float* dgamma, float* dbeta,
                         BnShape sh, double eps, bool accumulate, bool relu) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x, m = sh.n * sh.hw;
  const double mean = save_mean[c];
  const double invstd = 1.0 / sqrt(static_cast<double>(save_var[c]) + eps);
  double sg = 0.0, sgx = 0.0;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const int64_t o = bn_offset(i, c, sh);
    const double g = relu && load(y, o) <= 0.0f ? 0.0 : static_cast<double>(load(dy, o));
    sg += g;
    sgx += g * (load(x, o) - mean) * invstd;
  }
  sg = block_sum(sg, scratch);
  sgx = block_sum(sgx, scratch);
  if (threadIdx.x == 0) {
    dgamma[c] = accumulate ? dgamma[c] + static_cast<float>(sgx) : static_cast<float>(sgx);
    dbeta[c] = accumulate ? dbeta[c] + static_cast<float>(sg) : static_cast<float>(sg);
  }
  const double k = gamma[c] * invstd / static_cast<double>(m);
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const int64_t o = bn_offset(i, c, sh);
    const double g = relu && load(y, o) <= 0.0f ? 0.0 : static_cast<double>(load(dy, o));
    const double xhat = (load(x, o) - mean) * invstd;
    store(dx, o, static_cast<float>(k * (static_cast<double>(m) * g - sg - xhat * sgx)));
  }
}

}  // namespace

cudaError_t batch_norm_forward_training(Elem e, const void* x, const float* gamma, const float* beta, void* y,
                                        float* save_mean, float* save_var, float* running_mean, float* running_var,
                                        const BnShape& sh, double eps, double momentum, bool fuse_relu,
                                        cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (sh.c > 0)
      bn_train_k<<<static_cast<unsigned>(sh.c), kThreads, 0, s>>>(
          static_cast<const T*>(x), gamma, beta, static_cast<T*>(y), save_mean, save_var, running_mean, running_var,
          sh, eps, static_cast<float>(momentum), fuse_relu);
    return cudaGetLastError();
  });
}

cudaError_t batch_norm_forward_inference(Elem e, const void* x, const float* gamma, const float* beta,
                                         const float* mean, const float* var, void* y, const BnShape& sh, double eps,
                                         bool fuse_relu, cudaStream_t s) {
  const int64_t n = sh.n * sh.c * sh.hw;
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (n > 0)
      bn_infer_k<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), gamma, beta, mean, var,
                                                    static_cast<T*>(y), sh, eps, fuse_relu);
    return cudaGetLastError();
  });
}

cudaError_t batch_norm_backward(Elem e, const void* dy, const void* x, const float* gamma, const float* save_mean,
                                const float* save_var, const void* y, void* dx, float* dgamma, float* dbeta,
                                const BnShape& sh, double eps, bool accumulate, bool fuse_relu, cudaStream_t s) {
  return dispatch(e, [&](auto t) {
    using T = typename decltype(t)::type;
    if (sh.c > 0)
      bn_bwd_k<<<static_cast<unsigned>(sh.c), kThreads, 0, s>>>(
          static_cast<const T*>(dy), static_cast<const T*>(x), gamma, save_mean, save_var, static_cast<const T*>(y),
          static_cast<T*>(dx), dgamma, dbeta, sh, eps, accumulate, fuse_relu);
    return cudaGetLastError();
  });
}

}  // namespace tandem::cuda_kernels
