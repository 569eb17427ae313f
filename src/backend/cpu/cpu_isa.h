// Which instruction-set build of the cpu backend's loop kernels runs: the baseline x86-64
// one, or the AVX-512 one (batch norm, max pooling, element-wise) when ops::cpu_isa()
// (tandem/cpu_isa.h: the CPU's AVX-512 F, BW, VL and DQ, capped by TANDEM_MAX_CPU_ISA) is
// avx512 or above. TANDEM_CPU_KERNELS=baseline forces the baseline build (for comparisons).
// The two builds compute the same formulas; sums may differ in the last bits (vector width
// changes the order of the partial sums). Thread-safety: has_avx512() is thread-safe.
#pragma once

#include "tandem/ops.h"
#include "tandem/tensor.h"

namespace tandem::ops::cpu {

/// True when the AVX-512 build of the loop kernels runs here (probed once).
bool has_avx512();

/// True when oneDNN runs the bf16 convolutions and matrix products the cpu backend uses at the
/// level in use (ops::cpu_isa() >= avx512 and a probe of the primitives, once). Where false,
/// bf16 ops are stored in bf16 and computed in f32 (cpu_f16.h). Defined in cpu_support.cpp.
bool native_bf16();

}  // namespace tandem::ops::cpu

namespace tandem::ops::detail {

// The AVX-512 builds, with the arguments of the CpuBackend methods of the same name.
void bn_forward_training_avx512(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                double momentum, const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                                const Tensor& running_mean, const Tensor& running_var, bool fuse_relu);
void bn_forward_inference_avx512(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, double eps, const Tensor& y,
                                 bool fuse_relu);
void bn_backward_avx512(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                        const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                        const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y);

void pool_forward_avx512(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices);
void pool_backward_avx512(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx);
// The channels_last (NHWC) pooling kernels: max pooling, its backward, the global average
// pool (x -> y) and its backward (dy -> dx).
void pool_nhwc_forward_avx512(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices);
void pool_nhwc_backward_avx512(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx);
void mean_nhwc_avx512(const Tensor& x, const Tensor& y);
void spread_nhwc_avx512(const Tensor& dy, const Tensor& dx);

}  // namespace tandem::ops::detail
