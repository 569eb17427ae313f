#include "tandem/nn/gelu.h"

#include "nn/module_util.h"
#include "tandem/transformer_ops.h"

namespace tandem::nn {

Tensor GELU::forward(const Tensor& x) {
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype());
  ops::gelu_forward(x, y);
  x_ = training_ ? x : Tensor();
  return y;
}

Tensor GELU::backward(const Tensor& dy) {
  if (!x_.defined()) detail::no_forward("GELU");
  const Tensor& dx = detail::reuse(dx_, x_.shape(), x_.device(), x_.dtype());
  ops::gelu_backward(dy, x_, dx);
  x_ = Tensor();
  return dx;
}

Shape GELU::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  plan.add(in, dtype);        // y
  plan.add_train(in, dtype);  // dx
  return in;
}

void GELU::release_buffers() {
  x_ = y_ = dx_ = Tensor();
}

}  // namespace tandem::nn
