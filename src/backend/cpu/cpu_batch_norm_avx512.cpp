// The batch-norm kernels of cpu_batch_norm_impl.h built for AVX-512 (F, BW, VL, DQ, BF16):
// 16 floats per vector and bf16 widening/rounding in registers. Called only when
// cpu::has_avx512() (cpu_isa.h). Headers with external-linkage inline functions come before
// the target pragma, so none of them is emitted here with AVX-512 code.
#include <omp.h>

#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_loops.h"
#include "tandem/ops.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")

#include "backend/cpu/cpu_batch_norm_impl.h"

namespace tandem::ops::detail {

void bn_forward_training_avx512(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                double momentum, const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                                const Tensor& running_mean, const Tensor& running_var, bool fuse_relu) {
  bn_forward_training_entry(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean, running_var,
                            fuse_relu);
}

void bn_forward_inference_avx512(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, double eps, const Tensor& y,
                                 bool fuse_relu) {
  bn_forward_inference_entry(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
}

void bn_backward_avx512(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  bn_backward_entry(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
}

}  // namespace tandem::ops::detail

#pragma GCC pop_options
