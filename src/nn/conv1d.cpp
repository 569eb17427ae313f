#include "tandem/nn/conv1d.h"

#include "nn/module_util.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {

Conv1D::Conv1D(int64_t in_features, int64_t out_features, float init_std)
    : in_(in_features), out_(out_features), init_std_(init_std) {
  TD_CHECK_ARG(in_features >= 1 && out_features >= 1 && init_std >= 0.0f, "Conv1D",
               "expected feature counts >= 1 and init_std >= 0, found ({}, {}) and {}", in_features, out_features,
               init_std);
  weight = detail::make_parameter("weight", {in_, out_});
  weight.low_precision = true;
  bias = detail::make_parameter("bias", {out_});
  uint64_t index = 0;
  reset_parameters(0, index);
}

void Conv1D::reset_parameters(uint64_t seed, uint64_t& index) {
  detail::normal_init(weight, init_std_, seed, index++);
  detail::constant_init(bias, 0.0);
  ++index;
}

Tensor Conv1D::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() >= 1 && x.size(-1) == in_, "Conv1D", "expected input [..., {}], found {}", in_,
               shape_str(x.shape()));
  const int64_t rows = x.numel() / in_;
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  const Tensor& y = detail::reuse(y_, out_shape, x.device(), x.dtype());
  ops::linear_in_out_forward(x.view({rows, in_}), weight.as(x.dtype()), bias.value, y.view({rows, out_}));
  x_ = training_ ? x : Tensor();
  return y;
}

Tensor Conv1D::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("Conv1D");
  const int64_t rows = x_.numel() / in_;
  const Tensor x2 = x_.view({rows, in_}), dy2 = dy.view({rows, out_});
  Tensor dx;
  if (needs_input_grad_) {
    dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype());
    ops::linear_in_out_backward_data(dy2, weight.as(dy.dtype()), dx.view({rows, in_}));
  }
  ops::linear_in_out_backward_weights(x2, dy2, weight.grad, bias.grad, true);
  x_ = Tensor();
  return dx;
}

void Conv1D::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, weight, out, "weight");
  detail::push_parameter(prefix, bias, out, "bias");
}

void Conv1D::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "weight", weight.value, true});
  out.push_back({prefix + "bias", bias.value, true});
}

std::string Conv1D::describe() const { return fmt::format("Conv1D(nf={}, nx={})", out_, in_); }

Shape Conv1D::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(!in.empty() && in.back() == in_, "plan",
               "Conv1D: expected input [..., {}], found {}", in_, shape_str(in));
  Shape out = in;
  out.back() = out_;
  plan.add(out, dtype);                              // y
  if (needs_input_grad_) plan.add_train(in, dtype);  // dx
  return out;
}

void Conv1D::release_buffers() {
  x_ = y_ = dx_ = Tensor();
}

}  // namespace tandem::nn
