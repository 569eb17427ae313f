// cuda backend: GELU and the residual add (own kernels, cuda_gelu.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_transformer_kernels.h"

// The cuda backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
namespace tandem::ops {

void CudaBackend::gelu_forward(const Tensor& x, const Tensor& y) {
  CudaOpScope s("gelu_forward", {&x}, {&y});
  TD_CUDA(cuda_kernels::gelu_forward(elem(x), x.raw_data(), y.raw_data(), x.numel(), s.stream));
}

void CudaBackend::gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) {
  CudaOpScope s("gelu_backward", {&dy, &x}, {&dx});
  TD_CUDA(cuda_kernels::gelu_backward(elem(x), dy.raw_data(), x.raw_data(), dx.raw_data(), x.numel(), s.stream));
}

void CudaBackend::add_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  CudaOpScope s("add_forward", {&a, &b}, {&y});
  TD_CUDA(cuda_kernels::add_forward(elem(a), a.raw_data(), b.raw_data(), y.raw_data(), a.numel(), s.stream));
}

}  // namespace tandem::ops
