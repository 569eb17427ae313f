#include "tandem/nn/batch_norm2d.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum)
    : c_(num_features), eps_(eps), momentum_(momentum) {
  TD_CHECK_ARG(c_ >= 1, "BatchNorm2d", "num_features must be >= 1, found {}", c_);
  TD_CHECK_ARG(eps > 0, "BatchNorm2d", "eps must be > 0, found {}", eps);
  TD_CHECK_ARG(momentum >= 0 && momentum <= 1, "BatchNorm2d", "momentum must be in [0, 1], found {}", momentum);
  weight = detail::make_parameter("weight", {c_});
  bias = detail::make_parameter("bias", {c_});
  running_mean = detail::new_tensor({c_});
  running_var = detail::new_tensor({c_});
  num_batches_tracked = detail::new_tensor({}, DType::i64);
  save_mean_ = detail::new_tensor({c_});
  save_var_ = detail::new_tensor({c_});
  uint64_t index = 0;
  reset_parameters(0, index);
}

void BatchNorm2d::reset_parameters(uint64_t, uint64_t& index) {
  detail::constant_init(weight, zero_init_ ? 0.0 : 1.0);
  detail::constant_init(bias, 0.0);
  detail::fill(running_mean, 0.0);
  detail::fill(running_var, 1.0);
  detail::fill(num_batches_tracked, 0.0);
  index += 2;
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 4 && x.size(1) == c_, "BatchNorm2d", "expected input [N, {}, H, W], found {}", c_,
               shape_str(x.shape()));
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype(), x.memory_format());
  if (training_) {
    // The batch statistics live on the input's device; num_batches_tracked stays on the host
    // (Module::to leaves 0-d i64 counters there), so this increment never touches a device.
    detail::reuse(save_mean_, {c_}, x.device());
    detail::reuse(save_var_, {c_}, x.device());
    // Undefined running statistics: the op leaves them alone (a replayed forward).
    ops::batch_norm_forward_training(x, weight.value, bias.value, eps_, momentum_, y, save_mean_, save_var_,
                                     replay_ ? Tensor() : running_mean, replay_ ? Tensor() : running_var,
                                     fuse_relu_);
    if (!replay_) num_batches_tracked.data<int64_t>()[0] += 1;
    x_ = x;
  } else {
    ops::batch_norm_forward_inference(x, weight.value, bias.value, running_mean, running_var, eps_, y, fuse_relu_);
    x_ = Tensor();
  }
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("BatchNorm2d");
  const Tensor& dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype(), x_.memory_format());
  // dy may come in either layout (a caller's contiguous gradient of a channels_last output).
  ops::batch_norm_backward(ops::to_memory_format(dy, x_.memory_format()), x_, weight.value, save_mean_, save_var_, eps_, dx, weight.grad, bias.grad, true,
                           fuse_relu_, y_);
  x_ = Tensor();
  return dx;
}

void BatchNorm2d::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, weight, out, "weight");
  detail::push_parameter(prefix, bias, out, "bias");
}

void BatchNorm2d::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "weight", weight.value, true});
  out.push_back({prefix + "bias", bias.value, true});
  out.push_back({prefix + "running_mean", running_mean, false});
  out.push_back({prefix + "running_var", running_var, false});
  out.push_back({prefix + "num_batches_tracked", num_batches_tracked, false});
}

std::string BatchNorm2d::describe() const {
  return fmt::format("BatchNorm2d({}, eps={}, momentum={}, affine=True, track_running_stats=True)", c_, eps_,
                     momentum_);
}

Shape BatchNorm2d::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 4 && in[1] == c_, "plan",
               "BatchNorm2d: expected input [N, {}, H, W], found {}", c_, shape_str(in));
  plan.add(in, dtype);               // y
  plan.add_train({c_}, DType::f32);  // save_mean
  plan.add_train({c_}, DType::f32);  // save_var
  plan.add_train(in, dtype);         // dx
  return in;
}

void BatchNorm2d::release_buffers() {
  x_ = y_ = dx_ = Tensor();
}

}  // namespace tandem::nn
