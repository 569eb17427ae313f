#include "tandem/nn/linear.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias) : in_(in_features), out_(out_features) {
  TD_CHECK_ARG(in_features > 0 && out_features > 0, "Linear", "feature counts must be positive, found ({}, {})",
               in_features, out_features);
  weight = detail::make_parameter("weight", {out_, in_});
  weight.low_precision = true;
  if (has_bias) bias = detail::make_parameter("bias", {out_});
  uint64_t index = 0;
  reset_parameters(0, index);
}

void Linear::reset_parameters(uint64_t seed, uint64_t& index) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  detail::uniform_init(weight, bound, seed, index++);
  if (bias.value.defined()) detail::uniform_init(bias, bound, seed, index++);
}

Tensor Linear::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 2 && x.size(1) == in_, "Linear", "expected input [N, {}], found {}", in_,
               shape_str(x.shape()));
  const Tensor& y = detail::reuse(y_, {x.size(0), out_}, x.device(), x.dtype());
  ops::linear_forward(x, weight.as(x.dtype()), bias.value, y);
  x_ = training_ ? x : Tensor();
  return y;
}

Tensor Linear::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("Linear");
  if (!needs_input_grad_) {
    ops::linear_backward_weights(x_, dy, weight.grad, bias.grad, true);
    x_ = Tensor();
    return Tensor();
  }
  // The input gradient first: on a device its consumer (the layer before, a boundary copy
  // under --place) can start while the weight gradient is still being computed.
  const Tensor& dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype());
  ops::linear_backward_data(dy, weight.as(dy.dtype()), dx);
  ops::linear_backward_weights(x_, dy, weight.grad, bias.grad, true);
  x_ = Tensor();
  return dx;
}

void Linear::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, weight, out, "weight");
  if (bias.value.defined()) detail::push_parameter(prefix, bias, out, "bias");
}

void Linear::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "weight", weight.value, true});
  if (bias.value.defined()) out.push_back({prefix + "bias", bias.value, true});
}

std::string Linear::describe() const {
  return fmt::format("Linear(in_features={}, out_features={}, bias={})", in_, out_,
                     bias.value.defined() ? "True" : "False");
}

Shape Linear::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 2 && in[1] == in_, "plan", "Linear: expected input [N, {}], found {}",
               in_, shape_str(in));
  plan.add({in[0], out_}, dtype);                    // y
  if (needs_input_grad_) plan.add_train(in, dtype);  // dx
  plan.current = MemoryFormat::contiguous;
  return {in[0], out_};
}

void Linear::release_buffers() {
  x_ = y_ = dx_ = Tensor();
}

}  // namespace tandem::nn
