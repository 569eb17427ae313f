// The AVX2 + FMA build of the batch-norm kernels (cpu_batch_norm_avx2.cpp), with the arguments
// of the CpuBackend methods of the same name; the AVX-512 build is declared in cpu_isa.h with
// the other AVX-512 kernels. cpu_batch_norm.cpp picks the build (bn_build()).
#pragma once

#include "tandem/tensor.h"

namespace tandem::ops::detail {

void bn_forward_training_avx2(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, double momentum,
                              const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                              const Tensor& running_mean, const Tensor& running_var, bool fuse_relu);
void bn_forward_inference_avx2(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                               const Tensor& running_var, double eps, const Tensor& y, bool fuse_relu);
void bn_backward_avx2(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                      const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta,
                      bool accumulate, bool fuse_relu, const Tensor& y);

}  // namespace tandem::ops::detail
