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

}  // namespace tandem::nn
