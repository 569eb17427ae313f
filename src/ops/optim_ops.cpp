// The optimizer ops' front end (tandem/optim_ops.h): argument checks shared by every backend,
// then dispatch to the backend of the parameter's device.
#include "tandem/optim_ops.h"

#include "ops/op_checks.h"
#include "tandem/error.h"

namespace tandem::ops {
namespace {

// `t` (named `arg`) is a defined contiguous tensor of `dtype` with param's element count on
// param's device.
void expect_like(const char* op, const char* arg, const Tensor& t, const Tensor& param,
                 DType dtype = DType::f32) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined, expected an f32 tensor of {} elements", arg,
               param.numel());
  TD_CHECK_ARG(t.device() == param.device(), op, "{} is on {}, expected param's device {}", arg,
               t.device().str(), param.device().str());
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype),
               dtype_name(t.dtype()));
  TD_CHECK_ARG(t.numel() == param.numel(), op, "{} has {} elements, expected {} (param's)", arg,
               t.numel(), param.numel());
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

void expect_param(const char* op, const Tensor& param) {
  TD_CHECK_ARG(param.defined(), op, "param is undefined");
  TD_CHECK_ARG(param.dtype() == DType::f32, op, "param must be f32, found {}",
               dtype_name(param.dtype()));
  TD_CHECK_ARG(param.is_contiguous(), op, "param must be contiguous");
}

// The optional low-precision copy of the updated param.
void expect_out(const char* op, const Tensor& out, const Tensor& param) {
  if (!out.defined()) return;
  const DType d = out.dtype();
  TD_CHECK_ARG(d == DType::f32 || d == DType::bf16 || d == DType::f16, op,
               "output copy dtype must be f32, bf16 or f16, got {}", dtype_name(d));
  expect_like(op, "out", out, param, d);
}

}  // namespace

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const AdamParams& params, const Tensor& out) {
  constexpr const char* op = "adam_step";
  const AdamConstants c = adam_constants(params, op);
  expect_param(op, param);
  expect_like(op, "grad", grad, param);
  // The moments: both f32, or both bf16 (stored with stochastic rounding).
  const DType moments = exp_avg.defined() && exp_avg.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
  TD_CHECK_ARG(!exp_avg.defined() || !exp_avg_sq.defined() ||
                   (exp_avg.dtype() == exp_avg_sq.dtype() && (moments == DType::bf16 || exp_avg.dtype() == DType::f32)),
               op, "exp_avg and exp_avg_sq must both be f32 or both bf16, found {} and {}", dtype_name(exp_avg.dtype()),
               dtype_name(exp_avg_sq.dtype()));
  expect_like(op, "exp_avg", exp_avg, param, moments);
  expect_like(op, "exp_avg_sq", exp_avg_sq, param, moments);
  expect_out(op, out, param);
  if (param.numel() == 0) return;
  detail::dispatch(Op::adam_step, DType::f32, param.device()).adam_step(param, grad, exp_avg, exp_avg_sq, c, out);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdParams& params, const Tensor& out) {
  constexpr const char* op = "sgd_step";
  const SgdConstants c = sgd_constants(params, op);
  expect_param(op, param);
  expect_like(op, "grad", grad, param);
  if (params.momentum != 0) expect_like(op, "momentum_buffer", momentum_buffer, param);
  expect_out(op, out, param);
  if (param.numel() == 0) return;
  const Tensor buf = params.momentum != 0 ? momentum_buffer : Tensor();
  detail::dispatch(Op::sgd_step, DType::f32, param.device()).sgd_step(param, grad, buf, c, out);
}

}  // namespace tandem::ops
