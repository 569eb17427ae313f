// cuda backend: element-wise ops and dropout (own kernels, cuda_elementwise.cu).
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
  TD_CUDA(cuda_kernels::relu_forward(in_f32(x), out_f32(y), x.numel(), s.stream));
}

void CudaBackend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  CudaOpScope s("relu_backward", {&dy, &y}, {&dx});
  TD_CUDA(cuda_kernels::relu_backward(in_f32(dy), in_f32(y), out_f32(dx), y.numel(), s.stream));
}

void CudaBackend::add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  CudaOpScope s("add_relu_forward", {&a, &b}, {&y});
  TD_CUDA(cuda_kernels::add_relu_forward(in_f32(a), in_f32(b), out_f32(y), y.numel(), s.stream));
}

void CudaBackend::dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                                  const Tensor& mask) {
  CudaOpScope s("dropout_forward", {&x}, {&y, &mask});
  TD_CUDA(cuda_kernels::dropout_forward(in_f32(x), out_f32(y), data_ptr<uint8_t>(mask), x.numel(), p,
                                        philox_key(seed, counter), s.stream));
}

void CudaBackend::dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  CudaOpScope s("dropout_backward", {&dy, &mask}, {&dx});
  TD_CUDA(cuda_kernels::dropout_backward(in_f32(dy), data_ptr<const uint8_t>(mask), out_f32(dx), dy.numel(),
                                         1.0f / (1.0f - p), s.stream));
}

void CudaBackend::add_(const Tensor& dst, const Tensor& src, float alpha) {
  CudaOpScope s("add_", {&src}, {&dst});
  TD_CUDA(cuda_kernels::axpy(out_f32(dst), in_f32(src), alpha, dst.numel(), s.stream));
}

void CudaBackend::scale_(const Tensor& dst, float alpha) {
  CudaOpScope s("scale_", {}, {&dst});
  TD_CUDA(cuda_kernels::scale(out_f32(dst), alpha, dst.numel(), s.stream));
}

void CudaBackend::zero_(const Tensor& dst) {
  CudaOpScope s("zero_", {}, {&dst});
  TD_CUDA(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), s.stream));
}

}  // namespace tandem::ops
