// GELU (tanh form) and the residual add on the cpu: flat OpenMP loops with a vectorised tanh
// (cpu_gelu_impl.h, built for AVX2 and AVX-512; cpu_transformer_kernels.h).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_transformer_kernels.h"

// The cpu backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CpuBackend::gelu_forward(const Tensor& x, const Tensor& y) {
  cpu::transformer_kernels().gelu_forward(x.dtype(), x.raw_data(), y.raw_data(), x.numel());
}

void CpuBackend::gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) {
  cpu::transformer_kernels().gelu_backward(x.dtype(), dy.raw_data(), x.raw_data(), dx.raw_data(), x.numel());
}

void CpuBackend::add_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  cpu::transformer_kernels().add(a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), a.numel());
}

}  // namespace tandem::ops
