// StorageOnly (cpu_f16.h): each f16 op, and each bf16 op where oneDNN has no bf16 kernels
// here, through its f32 kernel.
#include "backend/cpu/cpu_f16.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <vector>

#include "backend/cpu/cpu_isa.h"
#include "tandem/cpu_isa.h"
#include "tandem/optim_ops.h"

namespace tandem::ops::cpu {
namespace {

// True when t's dtype is stored here but computed in f32: f16 always, bf16 without oneDNN's
// bf16 kernels at the level in use.
bool wide(const Tensor& t) {
  if (!t.defined()) return false;
  return t.dtype() == DType::f16 || (t.dtype() == DType::bf16 && !native_bf16());
}

// Widened copies of an op's 16-bit tensors, and the write-back of its 16-bit outputs on scope exit.
class Widen {
 public:
  /// t as f32: a copy for a widened dtype, t itself otherwise (undefined stays undefined).
  Tensor in(const Tensor& t) {
    if (!wide(t)) return t;
    Tensor w = Tensor::empty(t.shape(), DType::f32, t.device(), t.memory_format());
    widen_to_f32(t.raw_data(), t.dtype(), w.data<float>(), t.numel());  // SIMD, OpenMP tiles
    return w;
  }
  /// An f32 stand-in for output t (widened dtype); `read`: filled from t (in-place and
  /// accumulating ops).
  Tensor out(const Tensor& t, bool read = false) {
    if (!wide(t)) return t;
    Tensor w = read ? in(t) : Tensor::empty(t.shape(), DType::f32, t.device(), t.memory_format());
    back_.push_back({t, w});
    return w;
  }
  ~Widen() {  // rounded as float_to_bf16 / float_to_f16, at the SIMD level in use
    for (auto& [dst, src] : back_) narrow_from_f32(src.data<float>(), dst.dtype(), dst.raw_data(), src.numel());
  }

 private:
  std::vector<std::pair<Tensor, Tensor>> back_;
};

std::string onednn_version() {
  const dnnl_version_t* v = ::dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}


bool wide_dtype(DType dtype) { return dtype == DType::f16 || (dtype == DType::bf16 && !native_bf16()); }

class StorageOnly final : public Backend {
 public:
  explicit StorageOnly(Backend& inner) : b_(inner) {}
  const char* name() const override { return b_.name(); }
  std::string compute_note(DType dtype) const override {
    if (dtype == DType::f16)
      return "f16 stored, computed in f32: oneDNN " + onednn_version() +
             " has no f16 convolution or matmul on this CPU, so f16 runs save memory and bytes moved, not time";
    if (dtype == DType::bf16 && !native_bf16())
      return std::string("bf16 stored, computed in f32: this CPU (") + cpu_isa_name(cpu_isa()) + ") has no bf16 " +
             "instructions oneDNN " + onednn_version() + " uses (it needs avx512), so bf16 runs save memory and " +
             "bytes moved, not time";
    return b_.compute_note(dtype);
  }
  bool supports(Op op, DType dtype) const override {
    if (wide_dtype(dtype)) return op != Op::adam_step && op != Op::sgd_step;
    return b_.supports(op, dtype);
  }
  bool supports_channels_last() const override { return b_.supports_channels_last(); }
  MemoryFormat preferred_memory_format(DType dtype) const override { return b_.preferred_memory_format(dtype); }
  void convert_memory_format(const Tensor& src, const Tensor& dst) override { b_.convert_memory_format(src, dst); }

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                      const Tensor& y) override {
    if (!wide(x)) return b_.conv2d_forward(x, w, b, p, y);
    Widen s;
    b_.conv2d_forward(s.in(x), s.in(w), b, p, s.out(y));
  }
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) override {
    if (!wide(dy)) return b_.conv2d_backward_data(dy, w, p, dx);
    Widen s;
    b_.conv2d_backward_data(s.in(dy), s.in(w), p, s.out(dx));
  }
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                               const Tensor& db, bool acc) override {
    if (!wide(x)) return b_.conv2d_backward_weights(x, dy, p, dw, db, acc);
    Widen s;
    b_.conv2d_backward_weights(s.in(x), s.in(dy), p, dw, db, acc);
  }
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override {
    if (!wide(x)) return b_.linear_forward(x, w, b, y);
    Widen s;
    b_.linear_forward(s.in(x), s.in(w), b, s.out(y));
  }
  void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) override {
    if (!wide(dy)) return b_.linear_backward_data(dy, w, dx);
    Widen s;
    b_.linear_backward_data(s.in(dy), s.in(w), s.out(dx));
  }
  void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                               bool acc) override {
    if (!wide(x)) return b_.linear_backward_weights(x, dy, dw, db, acc);
    Widen s;
    b_.linear_backward_weights(s.in(x), s.in(dy), dw, db, acc);
  }
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                   double momentum, const Tensor& y, const Tensor& save_mean, const Tensor& save_var,
                                   const Tensor& running_mean, const Tensor& running_var, bool relu) override {
    if (!wide(x))
      return b_.batch_norm_forward_training(x, gamma, beta, eps, momentum, y, save_mean, save_var, running_mean,
                                            running_var, relu);
    Widen s;
    b_.batch_norm_forward_training(s.in(x), gamma, beta, eps, momentum, s.out(y), save_mean, save_var, running_mean,
                                   running_var, relu);
  }
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& rm,
                                    const Tensor& rv, double eps, const Tensor& y, bool relu) override {
    if (!wide(x)) return b_.batch_norm_forward_inference(x, gamma, beta, rm, rv, eps, y, relu);
    Widen s;
    b_.batch_norm_forward_inference(s.in(x), gamma, beta, rm, rv, eps, s.out(y), relu);
  }
  void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                           const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                           const Tensor& dbeta, bool acc, bool relu, const Tensor& y) override {
    if (!wide(x))
      return b_.batch_norm_backward(dy, x, gamma, save_mean, save_var, eps, dx, dgamma, dbeta, acc, relu, y);
    Widen s;
    b_.batch_norm_backward(s.in(dy), s.in(x), gamma, save_mean, save_var, eps, s.out(dx), dgamma, dbeta, acc, relu,
                           s.in(y));
  }
  void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& idx) override {
    if (!wide(x)) return b_.max_pool2d_forward(x, p, y, idx);
    Widen s;
    b_.max_pool2d_forward(s.in(x), p, s.out(y), idx);
  }
  void max_pool2d_backward(const Tensor& dy, const Tensor& idx, const Pool2dParams& p, const Tensor& dx) override {
    if (!wide(dy)) return b_.max_pool2d_backward(dy, idx, p, dx);
    Widen s;
    b_.max_pool2d_backward(s.in(dy), idx, p, s.out(dx));
  }
  void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) override {
    if (!wide(x)) return b_.global_avg_pool2d_forward(x, y);
    Widen s;
    b_.global_avg_pool2d_forward(s.in(x), s.out(y));
  }
  void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) override {
    if (!wide(dy)) return b_.global_avg_pool2d_backward(dy, dx);
    Widen s;
    b_.global_avg_pool2d_backward(s.in(dy), s.out(dx));
  }
  void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) override {
    if (!wide(a)) return b_.add_relu_forward(a, b, y);
    Widen s;
    b_.add_relu_forward(s.in(a), s.in(b), s.out(y));
  }
  void relu_forward(const Tensor& x, const Tensor& y) override {
    if (!wide(x)) return b_.relu_forward(x, y);
    Widen s;
    b_.relu_forward(s.in(x), s.out(y));
  }
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override {
    if (!wide(y)) return b_.relu_backward(dy, y, dx);
    Widen s;
    b_.relu_backward(s.in(dy), s.in(y), s.out(dx));
  }
  void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                       const Tensor& mask) override {
    if (!wide(x)) return b_.dropout_forward(x, p, seed, counter, y, mask);
    Widen s;
    b_.dropout_forward(s.in(x), p, seed, counter, s.out(y), mask);
  }
  void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override {
    if (!wide(dy)) return b_.dropout_backward(dy, mask, p, dx);
    Widen s;
    b_.dropout_backward(s.in(dy), mask, p, s.out(dx));
  }
  void add_(const Tensor& dst, const Tensor& src, float alpha) override {
    if (!wide(dst)) return b_.add_(dst, src, alpha);
    Widen s;
    b_.add_(s.out(dst, true), s.in(src), alpha);
  }
  void scale_(const Tensor& dst, float alpha) override {
    if (!wide(dst)) return b_.scale_(dst, alpha);
    Widen s;
    b_.scale_(s.out(dst, true), alpha);
  }
  void zero_(const Tensor& dst) override { b_.zero_(dst); }
  float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float ls,
                                      const Tensor& probs) override {
    Widen s;
    return b_.softmax_cross_entropy_forward(s.in(logits), labels, ls, probs);
  }
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float ls, float grad_loss,
                                      const Tensor& dlogits) override {
    Widen s;
    b_.softmax_cross_entropy_backward(probs, labels, ls, grad_loss, s.out(dlogits));
  }
  int64_t count_correct(const Tensor& logits, const Tensor& labels) override {
    Widen s;
    return b_.count_correct(s.in(logits), labels);
  }
  void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float ls, const Tensor& probs,
                                        const Tensor& metrics) override {
    Widen s;
    b_.softmax_cross_entropy_accumulate(s.in(logits), labels, ls, probs, metrics);
  }
  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamConstants& c,
                 const Tensor& out) override {
    b_.adam_step(param, grad, m, v, c, out);
  }
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdConstants& c,
                const Tensor& out) override {
    b_.sgd_step(param, grad, buf, c, out);
  }
  void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) override { b_.amp_scale(src, state, dst); }
  void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) override {
    b_.amp_unscale_check_(grads, state);
  }
  void amp_update_scale_(const Tensor& state, const AmpScaleParams& p) override { b_.amp_update_scale_(state, p); }
  void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& norm) override {
    b_.clip_grad_norm_(grads, max_norm, norm);
  }
  void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn) override {
    b_.run_if_finite(state, touched, std::move(fn));
  }

 private:
  Backend& b_;
};

}  // namespace

Backend& f16_storage_backend(Backend& inner) {
  static StorageOnly* b = new StorageOnly(inner);
  return *b;
}

}  // namespace tandem::ops::cpu
