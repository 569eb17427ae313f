#include "tandem/nn/flatten.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

Tensor Flatten::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() >= 1, "Flatten", "expected an input with a batch dimension, found {}", shape_str(x.shape()));
  x_shape_ = x.shape();
  x_format_ = x.memory_format();
  // A channels_last input is copied to NCHW first: the flattened features are in C, H, W
  // order, as in PyTorch (whose flatten of a channels_last tensor does the same copy).
  if (x_format_ == MemoryFormat::contiguous) return x.view({x.size(0), x.size(0) == 0 ? 0 : -1});
  const Tensor& xc = detail::reuse(xc_, x.shape(), x.device(), x.dtype());
  ops::convert_memory_format(x, xc);
  return xc.view({x.size(0), x.size(0) == 0 ? 0 : -1});
}

Tensor Flatten::backward(const Tensor& dy) {
  if (x_shape_.empty()) detail::no_forward("Flatten");
  if (x_format_ == MemoryFormat::contiguous) return dy.view(x_shape_);
  const Tensor& dx = detail::reuse(dx_, x_shape_, dy.device(), dy.dtype(), x_format_);
  ops::convert_memory_format(dy.view(x_shape_), dx);
  return dx;
}

// A channels_last input that is not also contiguous (C > 1 and H * W > 1) is copied.
Shape Flatten::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(!in.empty(), "plan", "Flatten: expected an input with a batch dimension, found {}",
               shape_str(in));
  if (plan.current == MemoryFormat::channels_last && in.size() == 4 && in[1] > 1 &&
      in[2] * in[3] > 1) {
    plan.add(in, dtype);        // NCHW copy
    plan.add_train(in, dtype);  // its gradient
  }
  plan.current = MemoryFormat::contiguous;
  return {in[0], in[0] == 0 ? 0 : shape_numel(in) / in[0]};
}

void Flatten::release_buffers() {
  xc_ = dx_ = Tensor();
  x_shape_.clear();
}

}  // namespace tandem::nn
