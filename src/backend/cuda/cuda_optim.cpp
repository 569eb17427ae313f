// cuda backend: Adam and SGD updates on tensors (own kernels, cuda_optim.cu), with the
// constants the front end computed (the cpu backend's kernels get the same ones).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace tandem::ops {
namespace {

// The kernels' code for the optional copy of the updated param (the front end checked it).
int out_kind(const Tensor& out) {
  if (!out.defined()) return 0;
  return out.dtype() == DType::f32 ? 1 : out.dtype() == DType::bf16 ? 2 : 3;
}

void* out_ptr(const Tensor& out) {
  return out.defined() ? out.raw_data() : nullptr;
}

}  // namespace

void CudaBackend::adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                            const Tensor& exp_avg_sq, const AdamConstants& c, const Tensor& out) {
  TD_CHECK(exp_avg.dtype() == DType::f32, ErrorCode::not_available, "adam_step",
           "bf16 moments on cuda: not available (the host optimizer has them: --param-device cpu)");
  CudaOpScope s("adam_step", {&grad}, {&param, &exp_avg, &exp_avg_sq, &out});
  TD_CUDA(cuda_kernels::adam(out_f32(param), in_f32(grad), out_f32(exp_avg), out_f32(exp_avg_sq),
                             out_ptr(out), out_kind(out), param.numel(), c, s.stream));
}

void CudaBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                           const SgdConstants& c, const Tensor& out) {
  CudaOpScope s("sgd_step", {&grad}, {&param, &momentum_buffer, &out});
  TD_CUDA(cuda_kernels::sgd(out_f32(param), in_f32(grad), opt_f32(momentum_buffer), out_ptr(out),
                            out_kind(out), param.numel(), c, s.stream));
}

}  // namespace tandem::ops
