// The entry points of one instruction-set build of the batch-norm kernels, with the arguments
// of the CpuBackend methods of the same name. Included by cpu_batch_norm_avx2.cpp and
// cpu_batch_norm_avx512.cpp after their target pragma, with TANDEM_BN_BUILD(name) defined to
// append the build's suffix (bn_backward -> bn_backward_avx2).
#include "backend/cpu/cpu_batch_norm_impl.h"

namespace tandem::ops::detail {

void TANDEM_BN_BUILD(bn_forward_training)(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                          double momentum, const Tensor& y, const Tensor& save_mean,
                                          const Tensor& save_var, const Tensor& running_mean,
                                          const Tensor& running_var, bool fuse_relu) {
  bn_forward_training_entry(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean, running_var,
                            fuse_relu);
}

void TANDEM_BN_BUILD(bn_forward_inference)(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const Tensor& running_mean, const Tensor& running_var, double eps,
                                           const Tensor& y, bool fuse_relu) {
  bn_forward_inference_entry(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
}

void TANDEM_BN_BUILD(bn_backward)(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                  const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                                  const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  bn_backward_entry(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
}

}  // namespace tandem::ops::detail
