// Front end of the batch-norm ops: shape and dtype checks (x, y, dy, dx carry the data
// dtype; gamma, beta and the statistics are f32), then dispatch.
#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_image;

void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                 double momentum, const Tensor& y, const Tensor& save_mean,
                                 const Tensor& save_var, const Tensor& running_mean,
                                 const Tensor& running_var, bool fuse_relu) {
  const Op kOp = Op::batch_norm_forward_training;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const MemoryFormat f = expect_image(op, "x", x, dt);
  const Shape c{x.size(1)};
  expect(op, "gamma", gamma, c);
  expect(op, "beta", beta, c);
  expect(op, "y", y, x.shape(), dt, f);
  expect(op, "save_mean", save_mean, c);
  expect(op, "save_var", save_var, c);
  TD_CHECK_ARG(running_mean.defined() == running_var.defined(), op,
               "running_mean and running_var must both be given or both omitted");
  if (running_mean.defined()) {
    expect(op, "running_mean", running_mean, c);
    expect(op, "running_var", running_var, c);
  }
  TD_CHECK_ARG(eps > 0, op, "eps must be > 0, found {}", eps);
  TD_CHECK_ARG(momentum >= 0 && momentum <= 1, op, "momentum must be in [0, 1], found {}", momentum);
  // N*H*W from the dimensions: x.numel() / C divided by zero for C = 0.
  TD_CHECK_ARG(x.size(0) * x.size(2) * x.size(3) > 1 || !running_var.defined(), op,
               "expected more than 1 value per channel when training, found input {}",
               shape_str(x.shape()));
  dispatch(kOp, dt, {&x, &gamma, &beta, &y, &save_mean, &save_var, &running_mean, &running_var})
      .batch_norm_forward_training(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                   running_var, fuse_relu);
}

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, double eps,
                                  const Tensor& y, bool fuse_relu) {
  const Op kOp = Op::batch_norm_forward_inference;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const MemoryFormat f = expect_image(op, "x", x, dt);
  const Shape c{x.size(1)};
  expect(op, "gamma", gamma, c);
  expect(op, "beta", beta, c);
  expect(op, "running_mean", running_mean, c);
  expect(op, "running_var", running_var, c);
  expect(op, "y", y, x.shape(), dt, f);
  TD_CHECK_ARG(eps > 0, op, "eps must be > 0, found {}", eps);
  dispatch(kOp, dt, {&x, &gamma, &beta, &running_mean, &running_var, &y})
      .batch_norm_forward_inference(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
}

void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                         const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                         const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  const Op kOp = Op::batch_norm_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const MemoryFormat f = expect_image(op, "x", x, dt);
  const Shape c{x.size(1)};
  expect(op, "dy", dy, x.shape(), dt, f);
  expect(op, "gamma", gamma, c);
  expect(op, "save_mean", save_mean, c);
  expect(op, "save_var", save_var, c);
  expect(op, "dx", dx, x.shape(), dt, f);
  expect(op, "dgamma", dgamma, c);
  expect(op, "dbeta", dbeta, c);
  if (fuse_relu) expect(op, "y", y, x.shape(), dt, f);
  dispatch(kOp, dt, {&dy, &x, &gamma, &save_mean, &save_var, &dx, &dgamma, &dbeta, &y})
      .batch_norm_backward(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
}

}  // namespace tandem::ops
