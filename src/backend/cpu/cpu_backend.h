// The cpu backend: oneDNN for convolution, inner products (sgemm) and batch norm; vectorised
// OpenMP loops for pooling, element-wise ops and the loss. Methods are defined in the
// cpu_<op>.cpp files beside this header.
#pragma once

#include "tandem/backend.h"

namespace tandem::ops {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  /// f32 and zero_ always; bf16 for every op when oneDNN runs bf16 on this CPU
  /// (cpu_support.cpp); f16 for no other op.
  bool supports(Op op, DType dtype) const override;
  /// Convolutions, batch norm, pooling and the element-wise ops take channels_last.
  bool supports_channels_last() const override { return true; }
  /// channels_last for every dtype (cpu_memory_format.cpp).
  MemoryFormat preferred_memory_format(DType dtype) const override;
  void convert_memory_format(const Tensor& src, const Tensor& dst) override;

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                      const Tensor& y) override;
  void conv2d_backward_data(const Tensor& dy, const Tensor& w, const Conv2dParams& p, const Tensor& dx) override;
  void conv2d_backward_weights(const Tensor& x, const Tensor& dy, const Conv2dParams& p, const Tensor& dw,
                               const Tensor& db, bool accumulate) override;

  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) override;
  void linear_backward_data(const Tensor& dy, const Tensor& w, const Tensor& dx) override;
  void linear_backward_weights(const Tensor& x, const Tensor& dy, const Tensor& dw, const Tensor& db,
                               bool accumulate) override;

  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                   double momentum, const Tensor& y, const Tensor& save_mean,
                                   const Tensor& save_var, const Tensor& running_mean,
                                   const Tensor& running_var, bool fuse_relu) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var, double eps,
                                    const Tensor& y, bool fuse_relu) override;
  void batch_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                           const Tensor& save_var, double eps, const Tensor& dx, const Tensor& dgamma,
                           const Tensor& dbeta, bool accumulate, bool fuse_relu, const Tensor& y) override;

  void max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) override;
  void max_pool2d_backward(const Tensor& dy, const Tensor& indices, const Pool2dParams& p,
                           const Tensor& dx) override;

  void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) override;
  void global_avg_pool2d_backward(const Tensor& dy, const Tensor& dx) override;

  void relu_forward(const Tensor& x, const Tensor& y) override;
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx) override;
  void add_relu_forward(const Tensor& a, const Tensor& b, const Tensor& y) override;
  void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t counter, const Tensor& y,
                       const Tensor& mask) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, float p, const Tensor& dx) override;
  void add_(const Tensor& dst, const Tensor& src, float alpha) override;
  void scale_(const Tensor& dst, float alpha) override;
  void zero_(const Tensor& dst) override;

  float softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      const Tensor& probs) override;
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels, float label_smoothing,
                                      float grad_loss, const Tensor& dlogits) override;
  int64_t count_correct(const Tensor& logits, const Tensor& labels) override;
  void softmax_cross_entropy_accumulate(const Tensor& logits, const Tensor& labels, float label_smoothing,
                                        const Tensor& probs, const Tensor& metrics) override;

  void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamConstants& c, const Tensor& out) override;
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdConstants& c,
                const Tensor& out) override;

  void amp_scale(const Tensor& src, const Tensor& state, const Tensor& dst) override;
  void amp_unscale_check_(const std::vector<Tensor>& grads, const Tensor& state) override;
  void amp_update_scale_(const Tensor& state, const AmpScaleParams& params) override;
  void clip_grad_norm_(const std::vector<Tensor>& grads, double max_norm, const Tensor& total_norm) override;
  void run_if_finite(const Tensor& state, const std::vector<Tensor>& touched, std::function<void()> fn) override;
};

}  // namespace tandem::ops
