// Activation recompute and the kept block input, once for every recomputing block
// (tandem/nn/recomputing_block.h).
#include "tandem/nn/recomputing_block.h"

#include "nn/module_util.h"

namespace tandem::nn {

int64_t RecomputingBlock::set_recompute(bool on) {
  recompute_ = on;
  x_in_ = Tensor();
  return 1;
}

// With recompute only the input stays (here or in the KeptInputs store); the output lives on
// with the caller (the next block's input), and the internals go back to the allocator.
Tensor RecomputingBlock::forward(const Tensor& x) {
  Tensor y = run_forward(x);
  have_forward_ = training_;
  if (recompute_) {  // an evaluation forward keeps nothing inside either
    if (training_ && kept_inputs_) {
      kept_inputs_->put(this, x);
    } else if (training_) {
      x_in_ = x;
    }
    release_internals();
    if (training_ && kept_inputs_) release_output();  // the caller holds it
  }
  return y;
}

// With recompute the forward runs again from the kept input first, and the internals are
// released after the backward (the returned dx lives on with the caller).
Tensor RecomputingBlock::backward(const Tensor& dy) {
  if (!have_forward_) detail::no_forward(name_);
  have_forward_ = false;
  if (recompute_) {
    replay_forward(kept_inputs_ ? kept_inputs_->take(this) : std::move(x_in_));
    x_in_ = Tensor();
  }
  Tensor dx = run_backward(dy);
  if (recompute_) release_internals();
  return dx;
}

void RecomputingBlock::release_buffers() {
  release_internals();
  release_output();
  x_in_ = Tensor();
  have_forward_ = false;
}

Shape RecomputingBlock::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  BufferPlan inner = plan.inner();
  BufferPlan& p = recompute_ ? inner : plan;
  const Shape out = plan_internals(in, dtype, p);
  if (recompute_ || output_ == Output::own) {
    plan.current = p.current;
    plan.add(out, dtype);  // the output (with recompute, the one the caller keeps)
  }
  if (recompute_) {
    inner.add_train(out, dtype);  // dy, the next block's dx
    plan.add_transient(inner);
  }
  return out;
}

}  // namespace tandem::nn
