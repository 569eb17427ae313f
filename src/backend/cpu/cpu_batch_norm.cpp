// Batch normalization with OpenMP loops. On NCHW x, parallel over channels: each channel's
// N*H*W values are strided planes, so a thread streams its own planes and the repeated
// passes of one channel mostly hit cache (oneDNN's plain-layout batch norm is a
// reference-grade kernel, several times slower than this on these shapes). Statistics are
// accumulated per plane in float and across planes in double, around a shift (the
// channel's first value) so that the one-pass variance does not cancel.
// On channels_last x (NHWC) the kernels run on the rows of C contiguous channels: parallel
// over blocks of rows, vectorised across channels, with per-thread partial sums and the
// same shift and formulas (cpu_batch_norm_nhwc_impl.h); nothing is reordered to NCHW.
// x, y, dy and dx are f32 or bf16 (T); arithmetic and statistics are f32/double for both,
// bf16 values are rounded once on store.
// The kernels (cpu_batch_norm_impl.h, cpu_batch_norm_nhwc_impl.h) are built three times: for
// baseline x86-64 here, for AVX2 + FMA in cpu_batch_norm_avx2.cpp and for AVX-512 in
// cpu_batch_norm_avx512.cpp; the highest the level in use allows runs (ops::cpu_isa(), so
// TANDEM_MAX_CPU_ISA=avx2 picks the AVX2 build on any CPU), and TANDEM_CPU_KERNELS=baseline
// forces the baseline one (cpu_isa.h).
#include <cstdlib>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_batch_norm_avx2.h"
#include "backend/cpu/cpu_batch_norm_impl.h"
#include "backend/cpu/cpu_isa.h"
#include "tandem/cpu_isa.h"

namespace tandem::ops {
namespace {

enum class BnBuild { baseline, avx2, avx512 };

BnBuild bn_build() {
  static const BnBuild b = [] {
    if (cpu::has_avx512()) return BnBuild::avx512;
    const char* force = std::getenv("TANDEM_CPU_KERNELS");
    if (force && std::strcmp(force, "baseline") == 0) return BnBuild::baseline;
    return cpu_isa() >= CpuIsa::avx2 ? BnBuild::avx2 : BnBuild::baseline;
  }();
  return b;
}

}  // namespace

void CpuBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                             double momentum, const Tensor& y, const Tensor& save_mean,
                                             const Tensor& save_var, const Tensor& running_mean,
                                             const Tensor& running_var, bool fuse_relu) {
  if (bn_build() == BnBuild::avx512)
    return detail::bn_forward_training_avx512(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                              running_var, fuse_relu);
  if (bn_build() == BnBuild::avx2)
    return detail::bn_forward_training_avx2(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                            running_var, fuse_relu);
  bn_forward_training_entry(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean, running_var,
                            fuse_relu);
}

void CpuBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              const Tensor& running_mean, const Tensor& running_var, double eps,
                                              const Tensor& y, bool fuse_relu) {
  if (bn_build() == BnBuild::avx512)
    return detail::bn_forward_inference_avx512(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
  if (bn_build() == BnBuild::avx2)
    return detail::bn_forward_inference_avx2(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
  bn_forward_inference_entry(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
}

void CpuBackend::batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                                     const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  if (bn_build() == BnBuild::avx512)
    return detail::bn_backward_avx512(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu,
                                      y);
  if (bn_build() == BnBuild::avx2)
    return detail::bn_backward_avx2(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
  bn_backward_entry(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
}

}  // namespace tandem::ops
