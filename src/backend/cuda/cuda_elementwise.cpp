// cuda backend: element-wise ops and dropout in f32, bf16 and f16 (own kernels, cuda_elementwise.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"
#include "tandem/rng.h"

namespace tandem::ops {
namespace {

// The key and counter words tandem::Philox(seed, counter) starts from (see src/core/rng.cpp):
// key = seed; counter = {block, lo(m), hi(m), lo(m)} with m = mix64(counter).
cuda_kernels::PhiloxKey philox_key(uint64_t seed, uint64_t counter) {
  const uint64_t m = mix64(counter);
  return {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)},
          {static_cast<uint32_t>(m), static_cast<uint32_t>(m >> 32), static_cast<uint32_t>(m)}};
}

}  // namespace

void CudaBackend::relu_forward(const Tensor& x, const Tensor& y) {
  CudaOpScope s("relu_forward", {&x}, {&y});
  TD_CUDA(cuda_kernels::relu_forward(elem(x), x.raw_data(), y.raw_data(), x.numel(), s.stream));
}

void CudaBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  CudaOpScope s("relu_backward", {&dy, &y}, {&dx});
  TD_CUDA(cuda_kernels::relu_backward(elem(dy), dy.raw_data(), y.raw_data(), dx.raw_data(), y.numel(), s.stream));
}

void CudaBackend::add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  CudaOpScope s("add_relu_forward", {&a, &b}, {&y});
  TD_CUDA(cuda_kernels::add_relu_forward(elem(a), a.raw_data(), b.raw_data(), y.raw_data(), y.numel(), s.stream));
}

void CudaBackend::dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                                  const Tensor& mask) {
  CudaOpScope s("dropout_forward", {&x}, {&y, &mask});
  TD_CUDA(cuda_kernels::dropout_forward(elem(x), x.raw_data(), y.raw_data(), data_ptr<uint8_t>(mask), x.numel(), p,
                                        philox_key(seed, counter), s.stream));
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  CudaOpScope s("dropout_backward", {&dy, &mask}, {&dx});
  TD_CUDA(cuda_kernels::dropout_backward(elem(dy), dy.raw_data(), data_ptr<const uint8_t>(mask), dx.raw_data(), dy.numel(),
                                         1.0f / (1.0f - p), s.stream));
}

void CudaBackend::add_(const Tensor& dst, const Tensor& src, float alpha) {
  CudaOpScope s("add_", {&src}, {&dst});
  TD_CUDA(cuda_kernels::axpy(elem(dst), dst.raw_data(), src.raw_data(), alpha, dst.numel(), s.stream));
}

void CudaBackend::scale_(const Tensor& dst, float alpha) {
  CudaOpScope s("scale_", {}, {&dst});
  TD_CUDA(cuda_kernels::scale(elem(dst), dst.raw_data(), alpha, dst.numel(), s.stream));
}

void CudaBackend::zero_(const Tensor& dst) {
  CudaOpScope s("zero_", {}, {&dst});
  TD_CUDA(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), s.stream));
}

}  // namespace tandem::ops
