#include "tandem/nn/layer_norm.h"

#include "nn/module_util.h"
#include "tandem/ops.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {

LayerNorm::LayerNorm(int64_t features, float eps) : c_(features), eps_(eps) {
  TD_CHECK_ARG(features >= 1 && eps > 0.0f, "LayerNorm", "expected features >= 1 and eps > 0, found {} and {}",
               features, eps);
  weight = detail::make_parameter("weight", {c_});
  bias = detail::make_parameter("bias", {c_});
  uint64_t index = 0;
  reset_parameters(0, index);
}

void LayerNorm::reset_parameters(uint64_t, uint64_t& index) {
  detail::constant_init(weight, 1.0);
  detail::constant_init(bias, 0.0);
  index += 2;
}

Tensor LayerNorm::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() >= 1 && x.size(-1) == c_, "LayerNorm", "expected input [..., {}], found {}", c_,
               shape_str(x.shape()));
  const int64_t rows = x.numel() / c_;
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype());
  const Tensor& mean = detail::reuse(mean_, {rows}, x.device());
  const Tensor& rstd = detail::reuse(rstd_, {rows}, x.device());
  ops::layer_norm_forward(x, weight.value, bias.value, eps_, y, mean, rstd);
  x_ = training_ ? x : Tensor();
  return y;
}

Tensor LayerNorm::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("LayerNorm");
  Tensor dx;
  if (needs_input_grad_) dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype());
  ops::layer_norm_backward(dy, x_, weight.value, mean_, rstd_, dx, weight.grad, bias.grad, true);
  x_ = Tensor();
  return dx;
}

void LayerNorm::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, weight, out, "weight");
  detail::push_parameter(prefix, bias, out, "bias");
}

void LayerNorm::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "weight", weight.value, true});
  out.push_back({prefix + "bias", bias.value, true});
}

std::string LayerNorm::describe() const {
  return fmt::format("LayerNorm(({},), eps={}, elementwise_affine=True)", c_, eps_);
}

Shape LayerNorm::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(!in.empty() && in.back() == c_, "plan",
               "LayerNorm: expected input [..., {}], found {}", c_, shape_str(in));
  const int64_t rows = shape_numel(in) / c_;
  plan.add(in, dtype);                               // y
  plan.add({rows}, DType::f32);                      // mean
  plan.add({rows}, DType::f32);                      // rstd
  if (needs_input_grad_) plan.add_train(in, dtype);  // dx
  return in;
}

void LayerNorm::release_buffers() {
  x_ = y_ = mean_ = rstd_ = dx_ = Tensor();
}

}  // namespace tandem::nn
