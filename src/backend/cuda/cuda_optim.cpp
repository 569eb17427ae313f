// Device Adam / SGD updates (tandem/cuda.h): the argument checks and per-call constants of
// src/optim/kernels.cpp, then one kernel on the given stream.
#include <cmath>

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
  TD_CHECK_ARG(p.step >= 1, op, "step must be >= 1, got {}", p.step);
  TD_CHECK_ARG(p.beta1 >= 0 && p.beta1 < 1 && p.beta2 >= 0 && p.beta2 < 1, op,
               "betas must be in [0, 1), got ({}, {})", p.beta1, p.beta2);
  TD_CHECK_ARG(p.lr >= 0 && p.eps >= 0 && p.weight_decay >= 0, op,
               "lr, eps and weight_decay must be >= 0, got {}, {}, {}", p.lr, p.eps, p.weight_decay);
  const int kind = out_kind(op, out, out_dtype);
  cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, op);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad && exp_avg && exp_avg_sq, op, "null buffer for {} elements", n);
  const double step = static_cast<double>(p.step);
  const double bc1 = 1.0 - std::pow(p.beta1, step);
  const double bc2 = 1.0 - std::pow(p.beta2, step);
  cuda_kernels::AdamConsts k{};
  k.beta1 = static_cast<float>(p.beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - p.beta1);
  k.beta2 = static_cast<float>(p.beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - p.beta2);
  k.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  k.eps = static_cast<float>(p.eps);
  k.step_size = static_cast<float>(p.lr / bc1);
  k.l2 = p.decoupled ? 0.0f : static_cast<float>(p.weight_decay);
  k.lr_wd = p.decoupled ? static_cast<float>(p.lr * p.weight_decay) : 0.0f;
  cuda_detail::DeviceGuard guard(cs.index());
  cuda_detail::NvtxRange range(op);
  TD_CUDA(cuda_kernels::adam(param, grad, exp_avg, exp_avg_sq, out, kind, n, k, cs.get()));
}

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, const optim::SgdParams& p,
              const Stream& stream, void* out, DType out_dtype) {
  constexpr const char* op = "cuda.sgd_step";
  TD_CHECK_ARG(n >= 0, op, "element count must be >= 0, got {}", n);
  TD_CHECK_ARG(p.lr >= 0, op, "lr must be >= 0, got {}", p.lr);
  TD_CHECK_ARG(p.momentum >= 0, op, "momentum must be >= 0, got {}", p.momentum);
  TD_CHECK_ARG(p.weight_decay >= 0, op, "weight_decay must be >= 0, got {}", p.weight_decay);
  TD_CHECK_ARG(!p.nesterov || p.momentum > 0, op, "nesterov requires momentum > 0, got {}", p.momentum);
  const int kind = out_kind(op, out, out_dtype);
  cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, op);
  if (n == 0) return;
  TD_CHECK_ARG(param && grad, op, "null buffer for {} elements", n);
  TD_CHECK_ARG(p.momentum == 0 || momentum_buffer, op, "momentum {} needs a momentum buffer, got null",
               p.momentum);
  cuda_kernels::SgdConsts k{};
  k.lr = static_cast<float>(p.lr);
  k.momentum = static_cast<float>(p.momentum);
  k.weight_decay = static_cast<float>(p.weight_decay);
  k.nesterov = p.nesterov;
  k.init_buffer = p.init_buffer;
  cuda_detail::DeviceGuard guard(cs.index());
  cuda_detail::NvtxRange range(op);
  TD_CUDA(cuda_kernels::sgd(param, grad, p.momentum != 0 ? momentum_buffer : nullptr, out, kind, n, k, cs.get()));
}

}  // namespace tandem::cuda
