#include "tandem/nn/conv2d.h"

#include "nn/module_util.h"

namespace tandem::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding,
               bool has_bias)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), stride_(stride), padding_(padding) {
  TD_CHECK_ARG(in_ > 0 && out_ > 0 && kernel_ > 0 && stride_ > 0 && padding_ >= 0, "Conv2d",
               "expected positive channels, kernel_size and stride and padding >= 0, found in={} out={} "
               "kernel_size={} stride={} padding={}",
               in_, out_, kernel_, stride_, padding_);
  params_ = {stride_, stride_, padding_, padding_};
  weight = detail::make_parameter("weight", {out_, in_, kernel_, kernel_});
  weight.low_precision = true;
  if (has_bias) bias = detail::make_parameter("bias", {out_});
  uint64_t index = 0;
  reset_parameters(0, index);
}

void Conv2d::reset_parameters(uint64_t seed, uint64_t& index) {
  if (init_ == ConvInit::kaiming_normal_fan_out) {
    detail::normal_init(weight, std::sqrt(2.0f / static_cast<float>(out_ * kernel_ * kernel_)), seed, index++);
    if (bias.value.defined()) {
      detail::constant_init(bias, 0.0);
      ++index;
    }
    return;
  }
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_ * kernel_ * kernel_));
  detail::uniform_init(weight, bound, seed, index++);
  if (bias.value.defined()) detail::uniform_init(bias, bound, seed, index++);
}

Tensor Conv2d::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 4 && x.size(1) == in_, "Conv2d", "expected input [N, {}, H, W], found {}", in_,
               shape_str(x.shape()));
  // The output takes the device's preferred layout (channels_last on cpu and virt), which the
  // layers after it keep.
  const Tensor& y = detail::reuse(y_, ops::conv2d_output_shape(x.shape(), weight.value.shape(), params_),
                                  x.device(), x.dtype(), ops::preferred_memory_format(x.device(), x.dtype()));
  ops::conv2d_forward(x, weight.as(x.dtype()), bias.value, params_, y);
  x_ = training_ ? x : Tensor();
  return y;
}

Tensor Conv2d::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("Conv2d");
  if (!needs_input_grad_) {
    ops::conv2d_backward_weights(x_, dy, params_, weight.grad, bias.grad, true);
    x_ = Tensor();
    return Tensor();
  }
  // The input gradient first: on a device its consumer (the layer before, a boundary copy
  // under --place) can start while the weight gradient is still being computed.
  const Tensor& dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype(), x_.memory_format());
  ops::conv2d_backward_data(dy, weight.as(dy.dtype()), params_, dx);
  ops::conv2d_backward_weights(x_, dy, params_, weight.grad, bias.grad, true);
  x_ = Tensor();
  return dx;
}

void Conv2d::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  detail::push_parameter(prefix, weight, out, "weight");
  if (bias.value.defined()) detail::push_parameter(prefix, bias, out, "bias");
}

void Conv2d::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  out.push_back({prefix + "weight", weight.value, true});
  if (bias.value.defined()) out.push_back({prefix + "bias", bias.value, true});
}

std::string Conv2d::describe() const {
  std::string s = fmt::format("Conv2d({}, {}, kernel_size=({}, {}), stride=({}, {})", in_, out_, kernel_, kernel_,
                              stride_, stride_);
  if (padding_) s += fmt::format(", padding=({}, {})", padding_, padding_);
  if (!bias.value.defined()) s += ", bias=False";
  return s + ")";
}

Shape Conv2d::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 4 && in[1] == in_, "plan",
               "Conv2d: expected input [N, {}, H, W], found {}", in_, shape_str(in));
  const Shape out = ops::conv2d_output_shape(in, weight.value.shape(), params_);
  plan.add(out, dtype);                              // y
  if (needs_input_grad_) plan.add_train(in, dtype);  // dx
  plan.current = plan.preferred;
  return out;
}

void Conv2d::release_buffers() {
  x_ = y_ = dx_ = Tensor();
}

}  // namespace tandem::nn
