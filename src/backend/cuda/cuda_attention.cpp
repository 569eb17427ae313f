// cuda backend: fused causal self-attention (own flash-style kernels, cuda_attention.cu).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_transformer_kernels.h"

namespace tandem::ops {

namespace {

void check_head_dim(const char* op, int64_t c, int64_t n_head) {
  TD_CHECK(c / n_head <= cuda_kernels::kMaxHeadDim, ErrorCode::not_available, op,
           "head dimension {} (C {} / n_head {}) is above the cuda kernels' {}", c / n_head, c, n_head,
           cuda_kernels::kMaxHeadDim);
}

}  // namespace

// The cuda backend's ops (tandem/transformer_ops.h; arguments checked by the front end).
void CudaBackend::attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse) {
  const int64_t c = qkv.size(2) / 3;
  check_head_dim("attention_forward", c, n_head);
  CudaOpScope s("attention_forward", {&qkv}, {&y, &lse});
  TD_CUDA(cuda_kernels::attention_forward(elem(qkv), qkv.raw_data(), y.raw_data(), out_f32(lse), qkv.size(0),
                                          qkv.size(1), c, n_head, s.stream));
}

void CudaBackend::attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse,
                                     int64_t n_head, const Tensor& dqkv) {
  const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3;
  check_head_dim("attention_backward", c, n_head);
  CudaOpScope s("attention_backward", {&dy, &qkv, &y, &lse}, {&dqkv});
  CudaScratch di(s.device, cuda_kernels::attention_backward_scratch(b, t, n_head));
  TD_CUDA(cuda_kernels::attention_backward(elem(qkv), dy.raw_data(), qkv.raw_data(), y.raw_data(), in_f32(lse),
                                           dqkv.raw_data(), b, t, c, n_head, di.get(), s.stream));
}

}  // namespace tandem::ops
