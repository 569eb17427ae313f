// cuda backend: max pooling with indices and global average pooling in f32, bf16 and f16 (own
// kernels, cuda_pool.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {
namespace {

cuda_kernels::PoolShape pool_shape(const Tensor& x, const Tensor& y, const Pool2dParams& p) {
  return {x.size(0) * x.size(1), x.size(2), x.size(3), y.size(2), y.size(3), p.kernel_h, p.kernel_w,
          p.stride_h, p.stride_w, p.pad_h, p.pad_w};
}

}  // namespace

void CudaBackend::max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y,
                                     const Tensor& indices) {
  CudaOpScope s("max_pool2d_forward", {&x}, {&y, &indices});
  int32_t* idx = indices.defined() ? data_ptr<int32_t>(indices) : nullptr;
  TD_CUDA(cuda_kernels::max_pool_forward(elem(x), x.raw_data(), y.raw_data(), idx, pool_shape(x, y, p), s.stream));
}

void CudaBackend::max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                                      const Tensor& dx) {
  CudaOpScope s("max_pool2d_backward", {&dy, &indices}, {&dx});
  TD_CUDA(cuda_kernels::max_pool_backward(elem(dy), dy.raw_data(), data_ptr<const int32_t>(indices), dx.raw_data(),
                                          pool_shape(dx, dy, p), s.stream));
}

void CudaBackend::global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  CudaOpScope s("global_avg_pool2d_forward", {&x}, {&y});
  TD_CUDA(cuda_kernels::global_avg_pool_forward(elem(x), x.raw_data(), y.raw_data(), x.size(0) * x.size(1),
                                                x.size(2) * x.size(3), s.stream));
}

void CudaBackend::global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) {
  CudaOpScope s("global_avg_pool2d_backward", {&dy}, {&dx});
  TD_CUDA(cuda_kernels::global_avg_pool_backward(elem(dy), dy.raw_data(), dx.raw_data(), dx.size(0) * dx.size(1),
                                                 dx.size(2) * dx.size(3), s.stream));
}

}  // namespace tandem::ops
