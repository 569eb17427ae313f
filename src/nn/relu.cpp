#include "tandem/nn/relu.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

Tensor ReLU::forward(const Tensor& x) {
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype(), x.memory_format());
  ops::relu_forward(x, y);
  have_y_ = training_;
  return y;
}

Tensor ReLU::backward(const Tensor& dy) {
  if (!have_y_) detail::no_forward("ReLU");
  const Tensor& dx = detail::reuse(dx_, y_.shape(), y_.device(), y_.dtype(), y_.memory_format());
  ops::relu_backward(ops::to_memory_format(dy, y_.memory_format()), y_, dx);  // dy in either layout
  have_y_ = false;
  return dx;
}

Shape ReLU::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  plan.add(in, dtype);        // y
  plan.add_train(in, dtype);  // dx
  return in;
}

void ReLU::release_buffers() {
  y_ = dx_ = Tensor();
  have_y_ = false;
}

}  // namespace tandem::nn
