// cuda backend: batch normalization, training, inference and backward, with an optional
// fused ReLU; x, y, dy and dx in f32, bf16 or f16, the statistics in f32 (own kernels,
// cuda_batch_norm.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {
namespace {

cuda_kernels::BnShape bn_shape(const Tensor& x) { return {x.size(0), x.size(1), x.size(2) * x.size(3)}; }

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                              double momentum, const Tensor& y, const Tensor& save_mean,
                                              const Tensor& save_var, const Tensor& running_mean,
                                              const Tensor& running_var, bool fuse_relu) {
  CudaOpScope s("batch_norm_forward_training", {&x, &gamma, &beta},
                {&y, &save_mean, &save_var, &running_mean, &running_var});
  TD_CUDA(cuda_kernels::batch_norm_forward_training(elem(x), x.raw_data(), in_f32(gamma), in_f32(beta), y.raw_data(), out_f32(save_mean),
                                                    out_f32(save_var), opt_f32(running_mean), opt_f32(running_var),
                                                    bn_shape(x), eps, momentum, fuse_relu, s.stream));
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                               const Tensor& running_mean, const Tensor& running_var, double eps,
                                               const Tensor& y, bool fuse_relu) {
  CudaOpScope s("batch_norm_forward_inference", {&x, &gamma, &beta, &running_mean, &running_var},
                {&y});
  TD_CUDA(cuda_kernels::batch_norm_forward_inference(elem(x), x.raw_data(), in_f32(gamma), in_f32(beta), in_f32(running_mean),
                                                     in_f32(running_var), y.raw_data(), bn_shape(x), eps, fuse_relu,
                                                     s.stream));
}

void CudaBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                      const Tensor& save_mean, const Tensor& save_var, double eps, const Tensor& dx,
                                      const Tensor& dgamma, const Tensor& dbeta, bool accumulate, bool fuse_relu,
                                      const Tensor& y) {
  CudaOpScope s("batch_norm_backward", {&dy, &x, &gamma, &save_mean, &save_var, &y},
                {&dx, &dgamma, &dbeta});
  TD_CUDA(cuda_kernels::batch_norm_backward(elem(x), dy.raw_data(), x.raw_data(), in_f32(gamma), in_f32(save_mean), in_f32(save_var),
                                            fuse_relu ? y.raw_data() : nullptr, dx.raw_data(), out_f32(dgamma), out_f32(dbeta),
                                            bn_shape(x), eps, accumulate, fuse_relu, s.stream));
}

}  // namespace tandem::ops
