// The ops front end: argument checks shared by every backend, then dispatch by device kind.
#include <initializer_list>

#include "tandem/backend.h"

namespace tandem::ops {
namespace {

// Checks that `t` is a defined, contiguous tensor of `dtype` with exactly `shape`.
void expect(const char* op, const char* arg, const Tensor& t, const Shape& shape, DType dtype = DType::f32) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined, expected {} {}", arg, dtype_name(dtype), shape_str(shape));
  TD_CHECK_ARG(t.dtype() == dtype, op, "{} must be {}, found {}", arg, dtype_name(dtype), dtype_name(t.dtype()));
  TD_CHECK_ARG(t.shape() == shape, op, "{} must have shape {}, found {}", arg, shape_str(shape),
               shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

// Checks a defined contiguous f32 tensor of rank `rank`.
void expect_rank(const char* op, const char* arg, const Tensor& t, int64_t rank) {
  TD_CHECK_ARG(t.defined(), op, "{} is undefined", arg);
  TD_CHECK_ARG(t.dtype() == DType::f32, op, "{} must be f32, found {}", arg, dtype_name(t.dtype()));
  TD_CHECK_ARG(t.dim() == rank, op, "{} must have {} dimensions, found shape {}", arg, rank,
               shape_str(t.shape()));
  TD_CHECK_ARG(t.is_contiguous(), op, "{} must be contiguous", arg);
}

// All defined tensors on one device; returns its backend.
Backend& dispatch(const char* op, std::initializer_list<const Tensor*> ts) {
  Device dev{};
  bool first = true;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (first) {
      dev = t->device();
      first = false;
    } else {
      TD_CHECK_ARG(t->device() == dev, op, "tensors on different devices: {} and {}", dev.str(),
                   t->device().str());
    }
  }
  return backend_for(dev, op);
}

}  // namespace

// ---- convolution ------------------------------------------------------------------------

Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const char* op = "conv2d";
  TD_CHECK_ARG(x.size() == 4, op, "input must be [N, C, H, W], found {}", shape_str(x));
  TD_CHECK_ARG(w.size() == 4, op, "weight must be [K, C, R, S], found {}", shape_str(w));
  TD_CHECK_ARG(x[1] == w[1], op, "input has {} channels but weight {} expects {}", x[1], shape_str(w), w[1]);
  TD_CHECK_ARG(p.stride_h >= 1 && p.stride_w >= 1, op, "stride must be >= 1, found ({}, {})", p.stride_h,
               p.stride_w);
  TD_CHECK_ARG(p.pad_h >= 0 && p.pad_w >= 0, op, "padding must be >= 0, found ({}, {})", p.pad_h, p.pad_w);
  const int64_t hp = x[2] + 2 * p.pad_h, wp = x[3] + 2 * p.pad_w;
  TD_CHECK_ARG(hp >= w[2] && wp >= w[3], op, "padded input {}x{} is smaller than the kernel {}x{}", hp, wp,
               w[2], w[3]);
  return {x[0], w[0], (hp - w[2]) / p.stride_h + 1, (wp - w[3]) / p.stride_w + 1};
}

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p, const Tensor& y) {
  const char* op = "conv2d_forward";
  expect_rank(op, "x", x, 4);
  expect_rank(op, "w", w, 4);
  const Shape ys = conv2d_output_shape(x.shape(), w.shape(), p);
  if (b.defined()) expect(op, "b", b, {w.size(0)});
  expect(op, "y", y, ys);
  dispatch(op, {&x, &w, &b, &y}).conv2d_forward(x, w, b, p, y);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) {
  const char* op = "conv2d_backward_data";
  expect_rank(op, "dx", dx, 4);
  expect_rank(op, "w", w, 4);
  expect(op, "dy", dy, conv2d_output_shape(dx.shape(), w.shape(), p));
  dispatch(op, {&dy, &w, &dx}).conv2d_backward_data(dy, w, p, dx);
}

void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                             const Tensor& db, bool accumulate) {
  const char* op = "conv2d_backward_weights";
  expect_rank(op, "x", x, 4);
  expect_rank(op, "dw", dw, 4);
  expect(op, "dy", dy, conv2d_output_shape(x.shape(), dw.shape(), p));
  if (db.defined()) expect(op, "db", db, {dw.size(0)});
  dispatch(op, {&x, &dy, &dw, &db}).conv2d_backward_weights(x, dy, p, dw, db, accumulate);
}

// ---- linear -----------------------------------------------------------------------------

void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  const char* op = "linear_forward";
  expect_rank(op, "x", x, 2);
  expect_rank(op, "w", w, 2);
  TD_CHECK_ARG(x.size(1) == w.size(1), op, "x {} has {} features but w {} expects {}", shape_str(x.shape()),
               x.size(1), shape_str(w.shape()), w.size(1));
  if (b.defined()) expect(op, "b", b, {w.size(0)});
  expect(op, "y", y, {x.size(0), w.size(0)});
  dispatch(op, {&x, &w, &b, &y}).linear_forward(x, w, b, y);
}

void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) {
  const char* op = "linear_backward_data";
  expect_rank(op, "dy", dy, 2);
  expect_rank(op, "w", w, 2);
  TD_CHECK_ARG(dy.size(1) == w.size(0), op, "dy {} does not match w {}", shape_str(dy.shape()),
               shape_str(w.shape()));
  expect(op, "dx", dx, {dy.size(0), w.size(1)});
  dispatch(op, {&dy, &w, &dx}).linear_backward_data(dy, w, dx);
}

void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                             bool accumulate) {
  const char* op = "linear_backward_weights";
  expect_rank(op, "x", x, 2);
  expect_rank(op, "dy", dy, 2);
  TD_CHECK_ARG(x.size(0) == dy.size(0), op, "x {} and dy {} differ in batch size", shape_str(x.shape()),
               shape_str(dy.shape()));
  expect(op, "dw", dw, {dy.size(1), x.size(1)});
  if (db.defined()) expect(op, "db", db, {dy.size(1)});
  dispatch(op, {&x, &dy, &dw, &db}).linear_backward_weights(x, dy, dw, db, accumulate);
}

// ---- batch norm -------------------------------------------------------------------------

void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                 double momentum, const Tensor& y, const Tensor& save_mean,
                                 const Tensor& save_var, const Tensor& running_mean,
                                 const Tensor& running_var, bool fuse_relu) {
  const char* op = "batch_norm_forward_training";
  expect_rank(op, "x", x, 4);
  const Shape c{x.size(1)};
  expect(op, "gamma", gamma, c);
  expect(op, "beta", beta, c);
  expect(op, "y", y, x.shape());
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
  TD_CHECK_ARG(x.numel() / x.size(1) > 1 || !running_var.defined(), op,
               "expected more than 1 value per channel when training, found input {}", shape_str(x.shape()));
  dispatch(op, {&x, &gamma, &beta, &y, &save_mean, &save_var, &running_mean, &running_var})
      .batch_norm_forward_training(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                   running_var, fuse_relu);
}

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, double eps,
                                  const Tensor& y, bool fuse_relu) {
  const char* op = "batch_norm_forward_inference";
  expect_rank(op, "x", x, 4);
  const Shape c{x.size(1)};
  expect(op, "gamma", gamma, c);
  expect(op, "beta", beta, c);
  expect(op, "running_mean", running_mean, c);
  expect(op, "running_var", running_var, c);
  expect(op, "y", y, x.shape());
  TD_CHECK_ARG(eps > 0, op, "eps must be > 0, found {}", eps);
  dispatch(op, {&x, &gamma, &beta, &running_mean, &running_var, &y})
      .batch_norm_forward_inference(x, gamma, beta, running_mean, running_var, eps, y, fuse_relu);
}

void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                         const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                         const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) {
  const char* op = "batch_norm_backward";
  expect_rank(op, "x", x, 4);
  const Shape c{x.size(1)};
  expect(op, "dy", dy, x.shape());
  expect(op, "gamma", gamma, c);
  expect(op, "save_mean", save_mean, c);
  expect(op, "save_var", save_var, c);
  expect(op, "dx", dx, x.shape());
  expect(op, "dgamma", dgamma, c);
  expect(op, "dbeta", dbeta, c);
  if (fuse_relu) expect(op, "y", y, x.shape());
  dispatch(op, {&dy, &x, &gamma, &save_mean, &save_var, &dx, &dgamma, &dbeta, &y})
      .batch_norm_backward(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, accumulate, fuse_relu, y);
}

// ---- pooling ----------------------------------------------------------------------------

Shape max_pool2d_output_shape(const Shape& x, const Pool2dParams& p) {
  const char* op = "max_pool2d";
  TD_CHECK_ARG(x.size() == 4, op, "input must be [N, C, H, W], found {}", shape_str(x));
  TD_CHECK_ARG(p.kernel_h >= 1 && p.kernel_w >= 1, op, "kernel must be >= 1, found ({}, {})", p.kernel_h,
               p.kernel_w);
  TD_CHECK_ARG(p.stride_h >= 1 && p.stride_w >= 1, op, "stride must be >= 1, found ({}, {})", p.stride_h,
               p.stride_w);
  TD_CHECK_ARG(p.pad_h >= 0 && p.pad_w >= 0 && 2 * p.pad_h <= p.kernel_h && 2 * p.pad_w <= p.kernel_w, op,
               "padding must be in [0, kernel/2], found ({}, {}) for kernel ({}, {})", p.pad_h, p.pad_w,
               p.kernel_h, p.kernel_w);
  const int64_t hp = x[2] + 2 * p.pad_h, wp = x[3] + 2 * p.pad_w;
  TD_CHECK_ARG(hp >= p.kernel_h && wp >= p.kernel_w, op, "padded input {}x{} is smaller than the kernel {}x{}",
               hp, wp, p.kernel_h, p.kernel_w);
  return {x[0], x[1], (hp - p.kernel_h) / p.stride_h + 1, (wp - p.kernel_w) / p.stride_w + 1};
}

void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const char* op = "max_pool2d_forward";
  expect_rank(op, "x", x, 4);
  const Shape ys = max_pool2d_output_shape(x.shape(), p);
  expect(op, "y", y, ys);
  if (indices.defined()) expect(op, "indices", indices, ys, DType::i32);
  dispatch(op, {&x, &y, &indices}).max_pool2d_forward(x, p, y, indices);
}

void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p, const Tensor& dx) {
  const char* op = "max_pool2d_backward";
  expect_rank(op, "dx", dx, 4);
  const Shape ys = max_pool2d_output_shape(dx.shape(), p);
  expect(op, "dy", dy, ys);
  expect(op, "indices", indices, ys, DType::i32);
  dispatch(op, {&dy, &indices, &dx}).max_pool2d_backward(dy, indices, p, dx);
}

// ---- element-wise -----------------------------------------------------------------------

void relu_forward(const Tensor& x, const Tensor& y) {
  const char* op = "relu_forward";
  expect(op, "x", x, x.shape());
  expect(op, "y", y, x.shape());
  dispatch(op, {&x, &y}).relu_forward(x, y);
}

void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) {
  const char* op = "relu_backward";
  expect(op, "y", y, y.shape());
  expect(op, "dy", dy, y.shape());
  expect(op, "dx", dx, y.shape());
  dispatch(op, {&dy, &y, &dx}).relu_backward(dy, y, dx);
}

void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                     const Tensor& mask) {
  const char* op = "dropout_forward";
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), found {}", p);
  expect(op, "x", x, x.shape());
  expect(op, "y", y, x.shape());
  expect(op, "mask", mask, x.shape(), DType::u8);
  dispatch(op, {&x, &y, &mask}).dropout_forward(x, p, seed, counter, y, mask);
}

void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) {
  const char* op = "dropout_backward";
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), found {}", p);
  expect(op, "dy", dy, dy.shape());
  expect(op, "mask", mask, dy.shape(), DType::u8);
  expect(op, "dx", dx, dy.shape());
  dispatch(op, {&dy, &mask, &dx}).dropout_backward(dy, mask, p, dx);
}

void add_(const Tensor& dst, const Tensor& src, float alpha) {
  const char* op = "add_";
  expect(op, "dst", dst, dst.shape());
  TD_CHECK_ARG(src.defined() && src.numel() == dst.numel(), op, "src {} must have the {} elements of dst {}",
               src.defined() ? shape_str(src.shape()) : "undefined", dst.numel(), shape_str(dst.shape()));
  expect(op, "src", src, src.shape());
  dispatch(op, {&dst, &src}).add_(dst, src, alpha);
}

void zero_(const Tensor& dst) {
  const char* op = "zero_";
  TD_CHECK_ARG(dst.defined(), op, "dst is undefined");
  TD_CHECK_ARG(dst.is_contiguous(), op, "dst must be contiguous");
  if (dst.numel() == 0) return;
  dispatch(op, {&dst}).zero_(dst);
}

void scale_(const Tensor& dst, float alpha) {
  const char* op = "scale_";
  expect(op, "dst", dst, dst.shape());
  dispatch(op, {&dst}).scale_(dst, alpha);
}

// ---- loss -------------------------------------------------------------------------------

static void check_loss_args(const char* op, const Tensor& logits, const Tensor& labels) {
  expect_rank(op, "logits", logits, 2);
  TD_CHECK_ARG(logits.size(1) >= 1, op, "logits must have at least one class, found {}",
               shape_str(logits.shape()));
  expect(op, "labels", labels, {logits.size(0)}, DType::i64);
}

float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                    const Tensor& probs) {
  const char* op = "softmax_cross_entropy_forward";
  check_loss_args(op, logits, labels);
  TD_CHECK_ARG(logits.size(0) >= 1, op, "empty batch: logits {}", shape_str(logits.shape()));
  TD_CHECK_ARG(label_smoothing >= 0.0f && label_smoothing <= 1.0f, op,
               "label_smoothing must be in [0, 1], found {}", label_smoothing);
  expect(op, "probs", probs, logits.shape());
  return dispatch(op, {&logits, &labels, &probs}).softmax_cross_entropy_forward(logits, labels, label_smoothing, probs);
}

void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                    float grad_loss, const Tensor& dlogits) {
  const char* op = "softmax_cross_entropy_backward";
  check_loss_args(op, probs, labels);
  expect(op, "dlogits", dlogits, probs.shape());
  dispatch(op, {&probs, &labels, &dlogits})
      .softmax_cross_entropy_backward(probs, labels, label_smoothing, grad_loss, dlogits);
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  const char* op = "count_correct";
  check_loss_args(op, logits, labels);
  return dispatch(op, {&logits, &labels}).count_correct(logits, labels);
}

void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      const Tensor& probs, const Tensor& metrics) {
  const char* op = "softmax_cross_entropy_accumulate";
  check_loss_args(op, logits, labels);
  TD_CHECK_ARG(label_smoothing >= 0.0f && label_smoothing <= 1.0f, op,
               "label_smoothing must be in [0, 1], found {}", label_smoothing);
  expect(op, "probs", probs, logits.shape());
  expect(op, "metrics", metrics, {4});
  if (logits.size(0) == 0) return;
  dispatch(op, {&logits, &labels, &probs, &metrics})
      .softmax_cross_entropy_accumulate(logits, labels, label_smoothing, probs, metrics);
}

}  // namespace tandem::ops
