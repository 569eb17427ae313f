// BatchNorm2d (torch.nn.BatchNorm2d; Ioffe & Szegedy 2015):
//   x [N, C, H, W] -> y = (x - mean) / sqrt(var + eps) * weight + bias, per channel.
// Training: batch statistics (biased variance) normalise; running_mean/running_var move by
//   running = (1 - momentum) * running + momentum * batch_stat with the unbiased variance,
//   and num_batches_tracked (i64, 0-d) counts training forwards.
// Eval: running statistics normalise.
// State (PyTorch order): weight, bias, running_mean, running_var, num_batches_tracked.
// Init: weight 1 (0 after set_zero_init(true): torchvision's zero_init_residual for a residual
// block's last BatchNorm2d), bias 0, running_mean 0, running_var 1.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class BatchNorm2d final : public Module {
 public:
  /// Throws Error(invalid_argument) for num_features < 1, eps <= 0 or momentum outside [0, 1].
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);

  /// x [N, C, H, W] with C == num_features; training needs more than one value per channel.
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override {
    return {ops::Op::batch_norm_forward_training, ops::Op::batch_norm_forward_inference,
            ops::Op::batch_norm_backward};
  }

  /// Applies max(0, .) to the output in the same pass (for a following ReLU that is then
  /// skipped; set by containers that fuse the pair).
  void set_fuse_relu(bool on) { fuse_relu_ = on; }
  bool fuse_relu() const { return fuse_relu_; }
  /// reset_parameters sets weight (gamma) to 0 instead of 1 (takes effect at the next reset).
  void set_zero_init(bool on) { zero_init_ = on; }
  /// Replay (the second forward of a recomputing block, nn/residual.h): while on, a training
  /// forward normalises with the batch statistics and keeps what backward needs, as always,
  /// but leaves running_mean, running_var and num_batches_tracked as they are (the first
  /// forward of the step moved them already).
  void set_replay(bool on) { replay_ = on; }

  Parameter weight, bias;
  Tensor running_mean, running_var;  // [C] f32
  Tensor num_batches_tracked;        // [] i64

 private:
  int64_t c_;
  double eps_, momentum_;
  bool fuse_relu_ = false;
  bool zero_init_ = false;
  bool replay_ = false;
  Tensor x_, y_, dx_, save_mean_, save_var_;
};

}  // namespace tandem::nn
