// cuda backend: element-wise ops, dropout, max pooling, batch norm (own kernels).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "tandem/rng.h"

namespace tandem::ops {
namespace {

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}
const float* in(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
float* out(const Tensor& t) { return static_cast<float*>(t.raw_data()); }
float* opt(const Tensor& t) { return t.defined() ? out(t) : nullptr; }

// The key and counter words tandem::Philox(seed, counter) starts from (see src/core/rng.cpp):
// key = seed; counter = {block, lo(m), hi(m), lo(m)} with m = mix64(counter).
cuda_kernels::PhiloxKey philox_key(uint64_t seed, uint64_t counter) {
  const uint64_t m = mix64(counter);
  return {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)},
          {static_cast<uint32_t>(m), static_cast<uint32_t>(m >> 32), static_cast<uint32_t>(m)}};
}

cuda_kernels::PoolShape pool_shape(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  return {x.size(0) * x.size(1), x.size(2), x.size(3), y.size(2), y.size(3), p.kernel_h, p.kernel_w,
          p.stride_h, p.stride_w, p.pad_h, p.pad_w};
}

cuda_kernels::BnShape bn_shape(const Tensor& x) { return {x.size(0), x.size(1), x.size(2) * x.size(3)}; }

}  // namespace

void CudaBackend::relu_forward(const Tensor& x, const Tensor& y) {
  CudaOpScope s("relu_forward", y);
  TD_CUDA(cuda_kernels::relu_forward(in(x), out(y), x.numel(), s.stream));
}

void CudaBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  CudaOpScope s("relu_backward", dx);
  TD_CUDA(cuda_kernels::relu_backward(in(dy), in(y), out(dx), y.numel(), s.stream));
}

void CudaBackend::dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                                  const Tensor& mask) {
  CudaOpScope s("dropout_forward", y);
  TD_CUDA(cuda_kernels::dropout_forward(in(x), out(y), ptr<uint8_t>(mask), x.numel(), p,
                                        philox_key(seed, counter), s.stream));
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  CudaOpScope s("dropout_backward", dx);
  TD_CUDA(cuda_kernels::dropout_backward(in(dy), ptr<const uint8_t>(mask), out(dx), dy.numel(),
                                         1.0f / (1.0f - p), s.stream));
}

void CudaBackend::add_(const Tensor& dst, const Tensor& src, float alpha) {
  CudaOpScope s("add_", dst);
  TD_CUDA(cuda_kernels::axpy(out(dst), in(src), alpha, dst.numel(), s.stream));
}

void CudaBackend::scale_(const Tensor& dst, float alpha) {
  CudaOpScope s("scale_", dst);
  TD_CUDA(cuda_kernels::scale(out(dst), alpha, dst.numel(), s.stream));
}

void CudaBackend::zero_(const Tensor& dst) {
  CudaOpScope s("zero_", dst);
  TD_CUDA(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), s.stream));
}

void CudaBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                     const Tensor& indices) {
  CudaOpScope s("max_pool2d_forward", y);
  int32_t* idx = indices.defined() ? ptr<int32_t>(indices) : nullptr;
  TD_CUDA(cuda_kernels::max_pool_forward(in(x), out(y), idx, pool_shape(x, y, p), s.stream));
}

void CudaBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                      const Tensor& dx) {
  CudaOpScope s("max_pool2d_backward", dx);
  TD_CUDA(cuda_kernels::max_pool_backward(in(dy), ptr<const int32_t>(indices), out(dx), pool_shape(dx, dy, p),
                                          s.stream));
}

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                              double momentum, const Tensor& y, const Tensor& save_mean,
                                              const Tensor& save_var, const Tensor& running_mean,
                                              const Tensor& running_var, bool fuse_relu) {
  CudaOpScope s("batch_norm_forward_training", y);
  TD_CUDA(cuda_kernels::batch_norm_forward_training(in(x), in(gamma), in(beta), out(y), out(save_mean),
                                                    out(save_var), opt(running_mean), opt(running_var),
                                                    bn_shape(x), eps, momentum, fuse_relu, s.stream));
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                               const Tensor& running_mean, const Tensor& running_var, double eps,
                                               const Tensor& y, bool fuse_relu) {
  CudaOpScope s("batch_norm_forward_inference", y);
  TD_CUDA(cuda_kernels::batch_norm_forward_inference(in(x), in(gamma), in(beta), in(running_mean),
                                                     in(running_var), out(y), bn_shape(x), eps, fuse_relu,
                                                     s.stream));
}

void CudaBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_var, double eps, const Tensor& dx,
                                      const Tensor& dgamma, const Tensor& dbeta, bool accumulate, bool fuse_relu,
                                      const Tensor& y) {
  CudaOpScope s("batch_norm_backward", dx);
  TD_CUDA(cuda_kernels::batch_norm_backward(in(dy), in(x), in(gamma), in(save_mean), in(save_var),
                                            fuse_relu ? in(y) : nullptr, out(dx), out(dgamma), out(dbeta),
                                            bn_shape(x), eps, accumulate, fuse_relu, s.stream));
}

}  // namespace tandem::ops
