#include "tandem/nn/flatten.h"

#include "nn/module_util.h"

namespace tandem::nn {

Tensor Flatten::forward(const Tensor& x) {
  TD_CHECK_ARG(x.dim() >= 1, "Flatten", "expected an input with a batch dimension, found {}", shape_str(x.shape()));
  x_shape_ = x.shape();
  return x.view({x.size(0), x.size(0) == 0 ? 0 : -1});
}

Tensor Flatten::backward(const Tensor& dy) {
  if (x_shape_.empty()) detail::no_forward("Flatten");
  return dy.view(x_shape_);
}

}  // namespace tandem::nn
