#include "tandem/nn/adaptive_avg_pool2d.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int64_t output_size) {
  TD_CHECK_ARG(output_size == 1, "AdaptiveAvgPool2d", "only output_size 1 is supported, found {}", output_size);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 4, "AdaptiveAvgPool2d", "expected input [N, C, H, W], found {}", shape_str(x.shape()));
  const Tensor& y = detail::reuse(y_, {x.size(0), x.size(1), 1, 1}, x.device(), x.dtype());
  ops::global_avg_pool2d_forward(x, y);
  x_shape_ = training_ ? x.shape() : Shape();
  x_format_ = x.memory_format();
  return y;
}

Tensor AdaptiveAvgPool2d::backward(const Tensor& dy) {
  if (x_shape_.empty()) detail::no_forward("AdaptiveAvgPool2d");
  const Tensor& dx = detail::reuse(dx_, x_shape_, dy.device(), dy.dtype(), x_format_);
  ops::global_avg_pool2d_backward(dy, dx);
  x_shape_.clear();
  return dx;
}

Shape AdaptiveAvgPool2d::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 4, "plan", "AdaptiveAvgPool2d: expected input [N, C, H, W], found {}",
               shape_str(in));
  const Shape out{in[0], in[1], 1, 1};
  plan.add(out, dtype);       // y
  plan.add_train(in, dtype);  // dx
  plan.current = MemoryFormat::contiguous;
  return out;
}

void AdaptiveAvgPool2d::release_buffers() {
  y_ = dx_ = Tensor();
  x_shape_.clear();
}

}  // namespace tandem::nn
