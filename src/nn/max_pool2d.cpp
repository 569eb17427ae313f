#include "tandem/nn/max_pool2d.h"

#include "nn/module_util.h"

namespace tandem::nn {

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, int64_t padding) {
  if (stride == 0) stride = kernel_size;
  TD_CHECK_ARG(kernel_size >= 1 && stride >= 1 && padding >= 0 && 2 * padding <= kernel_size, "MaxPool2d",
               "expected kernel_size >= 1, stride >= 0 and padding in [0, kernel_size/2], found kernel_size={} "
               "stride={} padding={}",
               kernel_size, stride, padding);
  params_ = {kernel_size, kernel_size, stride, stride, padding, padding};
}

Tensor MaxPool2d::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() == 4, "MaxPool2d", "expected input [N, C, H, W], found {}", shape_str(x.shape()));
  const Shape ys = ops::max_pool2d_output_shape(x.shape(), params_);
  const Tensor& y = detail::reuse(y_, ys, x.device(), x.dtype(), x.memory_format());
  if (training_) {
    const Tensor& idx = detail::reuse(indices_, ys, x.device(), DType::i32, x.memory_format());
    ops::max_pool2d_forward(x, params_, y, idx);
    x_shape_ = x.shape();
    x_format_ = x.memory_format();
  } else {
    ops::max_pool2d_forward(x, params_, y, Tensor());
    x_shape_.clear();
  }
  return y;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  if (x_shape_.empty()) detail::no_forward("MaxPool2d");
  const Tensor& dx = detail::reuse(dx_, x_shape_, dy.device(), dy.dtype(), x_format_);
  ops::max_pool2d_backward(ops::to_memory_format(dy, x_format_), indices_, params_, dx);  // dy in either layout
  x_shape_.clear();
  return dx;
}

std::string MaxPool2d::describe() const {
  return fmt::format("MaxPool2d(kernel_size={}, stride={}, padding={})", params_.kernel_h, params_.stride_h,
                     params_.pad_h);
}

Shape MaxPool2d::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  TD_CHECK_ARG(in.size() == 4, "plan", "MaxPool2d: expected input [N, C, H, W], found {}",
               shape_str(in));
  const Shape out = ops::max_pool2d_output_shape(in, params_);
  plan.add(out, dtype);             // y
  plan.add_train(out, DType::i32);  // arg-max indices
  plan.add_train(in, dtype);        // dx
  return out;
}

void MaxPool2d::release_buffers() {
  y_ = indices_ = dx_ = Tensor();
  x_shape_.clear();
}

}  // namespace tandem::nn
