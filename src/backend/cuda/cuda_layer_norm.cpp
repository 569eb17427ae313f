// cuda backend: layer norm (own kernels, cuda_layer_norm.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_transformer_kernels.h"

// The cuda backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CudaBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                     const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  CudaOpScope s("layer_norm_forward", {&x, &gamma, &beta}, {&y, &mean, &rstd});
  const int64_t cols = x.size(-1), rows = cols > 0 ? x.numel() / cols : 0;
  TD_CUDA(cuda_kernels::layer_norm_forward(elem(x), x.raw_data(), in_f32(gamma),
                                           beta.defined() ? in_f32(beta) : nullptr, y.raw_data(), out_f32(mean),
                                           out_f32(rstd), rows, cols, eps, s.stream));
}

void CudaBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                                      bool accumulate) {
  CudaOpScope s("layer_norm_backward", {&dy, &x, &gamma, &mean, &rstd}, {&dx, &dgamma, &dbeta});
  const int64_t cols = x.size(-1), rows = cols > 0 ? x.numel() / cols : 0;
  CudaScratch part(s.device, cuda_kernels::layer_norm_backward_scratch(rows, cols));
  TD_CUDA(cuda_kernels::layer_norm_backward(elem(x), dy.raw_data(), x.raw_data(), in_f32(gamma), in_f32(mean),
                                            in_f32(rstd), dx.defined() ? dx.raw_data() : nullptr, opt_f32(dgamma),
                                            opt_f32(dbeta), accumulate, rows, cols, part.get(), s.stream));
}

}  // namespace tandem::ops
