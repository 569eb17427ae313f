// Front end of the transformer ops (tandem/transformer_ops.h): shape and dtype checks, then
// dispatch to the backend of the tensors' device.
#include "tandem/transformer_ops.h"

#include "ops/op_checks.h"

namespace tandem::ops {

using detail::data_dtype;
using detail::dispatch;
using detail::expect;
using detail::expect_rank;

namespace {

// Checks a defined contiguous i32 or i64 index tensor (token ids, targets) of `shape`.
void expect_ids(const char* op, const char* arg, const Tensor& t, const Shape& shape) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined, expected i32 or i64 {}", arg, shape_str(shape));
  TD_CHECK_ARG(t.dtype() == DType::i32 || t.dtype() == DType::i64, op, "{} must be i32 or i64, found {}", arg,
               dtype_name(t.dtype()));
  TD_CHECK_ARG(t.shape() == shape, op, "{} must have shape {}, found {}", arg, shape_str(shape), shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

// Checks x [..., C] (at least one dimension, C >= 1): returns the number of rows N.
int64_t rows_of(const char* op, const char* arg, const Tensor& x, DType dt) {
  TD_CHECK_ARG(x.dim() >= 1 && x.size(-1) >= 1, op, "{} must be [..., C] with C >= 1, found {}", arg,
               shape_str(x.shape()));
  expect(op, arg, x, x.shape(), dt);
  return x.numel() / x.size(-1);
}

// Checks qkv [B, T, 3C] D and n_head dividing C; returns C.
int64_t attention_channels(const char* op, const Tensor& qkv, int64_t n_head, DType dt) {
  expect_rank(op, "qkv", qkv, 3, dt);
  TD_CHECK_ARG(qkv.size(2) % 3 == 0 && qkv.size(2) > 0, op, "qkv must be [B, T, 3C] with C >= 1, found {}",
               shape_str(qkv.shape()));
  const int64_t c = qkv.size(2) / 3;
  TD_CHECK_ARG(n_head >= 1 && c % n_head == 0, op, "n_head {} must be >= 1 and divide C = {}", n_head, c);
  return c;
}

}  // namespace

void embedding_forward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& y) {
  const Op kOp = Op::embedding_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "wte", wte);
  expect_rank(op, "wte", wte, 2, dt);
  TD_CHECK_ARG(tokens.defined() && tokens.dim() == 2, op, "tokens must be [B, T], found {}",
               tokens.defined() ? shape_str(tokens.shape()) : "undefined");
  expect_ids(op, "tokens", tokens, tokens.shape());
  const int64_t b = tokens.size(0), t = tokens.size(1), c = wte.size(1);
  if (wpe.defined()) {
    expect_rank(op, "wpe", wpe, 2, dt);
    TD_CHECK_ARG(wpe.size(1) == c && wpe.size(0) >= t, op, "wpe must be [P, {}] with P >= T = {}, found {}", c, t,
                 shape_str(wpe.shape()));
  }
  expect(op, "y", y, {b, t, c}, dt);
  dispatch(kOp, dt, {&tokens, &wte, &wpe, &y}).embedding_forward(tokens, wte, wpe, y);
}

void embedding_backward(const Tensor& dy, const Tensor& tokens, const Tensor& dwte, const Tensor& dwpe,
                        bool accumulate) {
  const Op kOp = Op::embedding_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "dy", dy);
  expect_rank(op, "dy", dy, 3, dt);
  const int64_t b = dy.size(0), t = dy.size(1), c = dy.size(2);
  expect_ids(op, "tokens", tokens, {b, t});
  if (dwte.defined()) {
    expect_rank(op, "dwte", dwte, 2);
    TD_CHECK_ARG(dwte.size(1) == c, op, "dwte must be [V, {}], found {}", c, shape_str(dwte.shape()));
  }
  if (dwpe.defined()) {
    expect_rank(op, "dwpe", dwpe, 2);
    TD_CHECK_ARG(dwpe.size(1) == c && dwpe.size(0) >= t, op, "dwpe must be [P, {}] with P >= T = {}, found {}", c, t,
                 shape_str(dwpe.shape()));
  }
  dispatch(kOp, dt, {&dy, &tokens, &dwte, &dwpe}).embedding_backward(dy, tokens, dwte, dwpe, accumulate);
}

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) {
  const Op kOp = Op::layer_norm_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const int64_t n = rows_of(op, "x", x, dt), c = x.size(-1);
  TD_CHECK_ARG(eps > 0.0f, op, "eps must be > 0, found {}", eps);
  expect(op, "gamma", gamma, {c});
  if (beta.defined()) expect(op, "beta", beta, {c});
  expect(op, "y", y, x.shape(), dt);
  expect(op, "mean", mean, {n});
  expect(op, "rstd", rstd, {n});
  dispatch(kOp, dt, {&x, &gamma, &beta, &y, &mean, &rstd}).layer_norm_forward(x, gamma, beta, eps, y, mean, rstd);
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, bool accumulate) {
  const Op kOp = Op::layer_norm_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  const int64_t n = rows_of(op, "x", x, dt), c = x.size(-1);
  expect(op, "dy", dy, x.shape(), dt);
  expect(op, "gamma", gamma, {c});
  expect(op, "mean", mean, {n});
  expect(op, "rstd", rstd, {n});
  if (dx.defined()) expect(op, "dx", dx, x.shape(), dt);
  if (dgamma.defined()) expect(op, "dgamma", dgamma, {c});
  if (dbeta.defined()) expect(op, "dbeta", dbeta, {c});
  dispatch(kOp, dt, {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta})
      .layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, accumulate);
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  const Op kOp = Op::gelu_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect(op, "x", x, x.shape(), dt);
  expect(op, "y", y, x.shape(), dt);
  dispatch(kOp, dt, {&x, &y}).gelu_forward(x, y);
}

void gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& dx) {
  const Op kOp = Op::gelu_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "x", x);
  expect(op, "x", x, x.shape(), dt);
  expect(op, "dy", dy, x.shape(), dt);
  expect(op, "dx", dx, x.shape(), dt);
  dispatch(kOp, dt, {&dy, &x, &dx}).gelu_backward(dy, x, dx);
}

void add_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  const Op kOp = Op::add_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "a", a);
  expect(op, "a", a, a.shape(), dt);
  expect(op, "b", b, a.shape(), dt);
  expect(op, "y", y, a.shape(), dt);
  dispatch(kOp, dt, {&a, &b, &y}).add_forward(a, b, y);
}

void attention_forward(const Tensor& qkv, int64_t n_head, const Tensor& y, const Tensor& lse) {
  const Op kOp = Op::attention_forward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "qkv", qkv);
  const int64_t c = attention_channels(op, qkv, n_head, dt), b = qkv.size(0), t = qkv.size(1);
  expect(op, "y", y, {b, t, c}, dt);
  expect(op, "lse", lse, {b, n_head, t});
  dispatch(kOp, dt, {&qkv, &y, &lse}).attention_forward(qkv, n_head, y, lse);
}

void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& y, const Tensor& lse, int64_t n_head,
                        const Tensor& dqkv) {
  const Op kOp = Op::attention_backward;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "qkv", qkv);
  const int64_t c = attention_channels(op, qkv, n_head, dt), b = qkv.size(0), t = qkv.size(1);
  expect(op, "dy", dy, {b, t, c}, dt);
  expect(op, "y", y, {b, t, c}, dt);
  expect(op, "lse", lse, {b, n_head, t});
  expect(op, "dqkv", dqkv, qkv.shape(), dt);
  dispatch(kOp, dt, {&dy, &qkv, &y, &lse, &dqkv}).attention_backward(dy, qkv, y, lse, n_head, dqkv);
}

void classifier_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index,
                              float grad_loss, const Tensor& dh, const Tensor& dw, bool accumulate,
                              const Tensor& metrics, const Tensor& grad_scale) {
  const Op kOp = Op::classifier_cross_entropy;
  const char* op = op_name(kOp);
  const DType dt = data_dtype(op, "h", h);
  expect_rank(op, "h", h, 2, dt);
  expect_rank(op, "w", w, 2, dt);
  TD_CHECK_ARG(h.size(1) == w.size(1), op, "h {} has {} features but w {} has {}", shape_str(h.shape()), h.size(1),
               shape_str(w.shape()), w.size(1));
  TD_CHECK_ARG(w.size(0) >= 1, op, "w must be [V, C] with V >= 1, found {}", shape_str(w.shape()));
  expect_ids(op, "targets", targets, {h.size(0)});
  if (dh.defined()) expect(op, "dh", dh, h.shape(), dt);
  if (dw.defined()) expect(op, "dw", dw, w.shape());
  if (metrics.defined()) expect(op, "metrics", metrics, {4});
  if (grad_scale.defined())
    TD_CHECK_ARG(grad_scale.dtype() == DType::f32 && grad_scale.numel() >= 1 && grad_scale.is_contiguous(), op,
                 "grad_scale must be a contiguous f32 tensor of at least 1 element, found {} {}",
                 dtype_name(grad_scale.dtype()), shape_str(grad_scale.shape()));
  dispatch(kOp, dt, {&h, &w, &targets, &dh, &dw, &metrics, &grad_scale})
      .classifier_cross_entropy(h, w, targets, ignore_index, grad_loss, dh, dw, accumulate, metrics, grad_scale);
}

}  // namespace tandem::ops
