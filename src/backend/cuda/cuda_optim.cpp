// Device Adam / SGD updates (tandem/cuda.h): the argument checks and per-call constants of
// src/optim/kernels.cpp, then one kernel on the given stream.

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_stream.h"
#include "tandem/cuda.h"
#include "tandem/error.h"

namespace tandem::cuda {
namespace {

int out_kind(const char* op, const void* out, DType dtype) {
  if (!out) return 0;
  switch (dtype) {
    case DType::f32: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 3;
    default:
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("out_dtype must be f32, bf16 or f16, got {}", dtype_name(dtype)));
  }
}

}  // namespace

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const optim::AdamParams& p, const Stream& stream, void* out, DType out_dtype) {
  constexpr const char* op = "cuda.adam_step";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  const optim::AdamConstants c = optim::adam_constants(p, op);  // same checks and constants as the CPU
  const int kind = out_kind(op, out, out_dtype);
  cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, op);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad && exp_avg && exp_avg_sq, op, "null buffer for {} elements", n);
  const cuda_kernels::AdamConsts k{c.beta1, c.one_minus_beta1, c.beta2, c.one_minus_beta2, c.sqrt_bc2,
                                   c.eps,   c.step_size,       c.l2,    c.lr_wd};
  cuda_detail::DeviceGuard guard(cs.index());
  cuda_detail::NvtxRange range(op);
  TD_CUDA(cuda_kernels::adam(param, grad, exp_avg, exp_avg_sq, out, kind, n, k, cs.get()));
}

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, const optim::SgdParams& p,
              const Stream& stream, void* out, DType out_dtype) {
  constexpr const char* op = "cuda.sgd_step";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  const optim::SgdConstants c = optim::sgd_constants(p, op);
  const int kind = out_kind(op, out, out_dtype);
  cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, op);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad, op, "null buffer for {} elements", n);
  TD_CHECK_ARG(p.momentum == 0 || momentum_buffer, op, "momentum {} needs a momentum buffer, got null",
               p.momentum);
  const cuda_kernels::SgdConsts k{c.lr, c.momentum, c.weight_decay, c.nesterov, c.init_buffer};
  cuda_detail::DeviceGuard guard(cs.index());
  cuda_detail::NvtxRange range(op);
  TD_CUDA(cuda_kernels::sgd(param, grad, p.momentum != 0 ? momentum_buffer : nullptr, out, kind, n, k, cs.get()));
}

}  // namespace tandem::cuda
