// Dropout (torch.nn.Dropout, inverted): in training y = x * mask / (1 - p), mask[i] = 0 with
// probability p; identity in eval. The mask is drawn from tandem::Philox keyed by (seed,
// call counter): the n-th training forward of a module uses counter n, so masks are a pure
// function of the seed and the step, independent of threads. Any shape.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include "tandem/nn/module.h"

namespace tandem::nn {

class Dropout final : public Module {
 public:
  /// 0 <= p < 1, else Error(invalid_argument).
  explicit Dropout(float p = 0.5f, uint64_t seed = 0);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void release_buffers() override;
  std::string describe() const override;
  std::vector<ops::Op> own_ops() const override { return {ops::Op::dropout_forward, ops::Op::dropout_backward}; }

  /// Sets the mask seed and restarts the call counter.
  void set_seed(uint64_t seed) {
    seed_ = seed;
    counter_ = 0;
  }
  uint64_t counter() const { return counter_; }

 private:
  float p_;
  uint64_t seed_, counter_ = 0;
  bool have_mask_ = false;
  Tensor y_, mask_, dx_;
};

}  // namespace tandem::nn
