// cpu backend: Adam and SGD updates on tensors, run by the SIMD kernels of
// cpu_optim_kernels.cpp (the level tandem/optim_ops.h's simd_level() names).
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_optim_args.h"

namespace tandem::ops {
namespace {

float* f32(const Tensor& t) {
  return static_cast<float*>(t.raw_data());
}
void* out_ptr(const Tensor& out) {
  return out.defined() ? out.raw_data() : nullptr;
}
DType out_dtype(const Tensor& out) {
  return out.defined() ? out.dtype() : DType::f32;
}

}  // namespace

void CpuBackend::adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const AdamConstants& c, const Tensor& out) {
  if (exp_avg.dtype() == DType::bf16) {  // bf16 moments, stored with stochastic rounding
    detail::AdamArgs a{f32(param), f32(grad), nullptr, nullptr, out_ptr(out), out_dtype(out), c};
    a.exp_avg16 = static_cast<uint16_t*>(exp_avg.raw_data());
    a.exp_avg_sq16 = static_cast<uint16_t*>(exp_avg_sq.raw_data());
    a.seed = c.noise_seed;
    detail::adam_run(a, param.numel());
    return;
  }
  detail::adam_run(
      {f32(param), f32(grad), f32(exp_avg), f32(exp_avg_sq), out_ptr(out), out_dtype(out), c},
      param.numel());
}

void CpuBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                          const SgdConstants& c, const Tensor& out) {
  float* buf = momentum_buffer.defined() ? f32(momentum_buffer) : nullptr;
  detail::sgd_run({f32(param), f32(grad), buf, out_ptr(out), out_dtype(out), c}, param.numel());
}

}  // namespace tandem::ops
