#include "tandem/nn/dropout.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  TD_CHECK_ARG(p >= 0.0f && p < 1.0f, "Dropout", "p must be in [0, 1), found {}", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!training_ || p_ == 0.0f) {
    have_mask_ = false;
    return x;
  }
  const Tensor& y = detail::reuse(y_, x.shape(), x.device(), x.dtype(), x.memory_format());
  const Tensor& mask = detail::reuse(mask_, x.shape(), x.device(), DType::u8, x.memory_format());
  ops::dropout_forward(x, p_, seed_, counter_++, y, mask);
  have_mask_ = true;
  return y;
}

Tensor Dropout::backward(const Tensor& dy) {
  if (!training_) detail::no_forward("Dropout");
  if (p_ == 0.0f) return dy;
  if (!have_mask_) detail::no_forward("Dropout");
  const Tensor& dx = detail::reuse(dx_, dy.shape(), dy.device(), dy.dtype(), mask_.memory_format());
  ops::dropout_backward(ops::to_memory_format(dy, mask_.memory_format()), mask_, p_, dx);  // dy in either layout
  have_mask_ = false;
  return dx;
}

std::string Dropout::describe() const { return fmt::format("Dropout(p={}, inplace=False)", p_); }

Shape Dropout::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  if (p_ == 0.0f) return in;
  plan.add_train(in, dtype);      // y (an evaluation forward returns its input)
  plan.add_train(in, DType::u8);  // mask
  plan.add_train(in, dtype);      // dx
  return in;
}

void Dropout::release_buffers() {
  y_ = mask_ = dx_ = Tensor();
  have_mask_ = false;
}

}  // namespace tandem::nn
