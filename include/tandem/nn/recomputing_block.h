// RecomputingBlock: activation recompute (checkpointing; Chen et al. 2016, "Training Deep Nets
// with Sublinear Memory Cost", arXiv 1604.06174) and the kept block input, written once for
// every block that recomputes: nn::Residual (a ResNet's residual block) and nn::Block (a GPT-2
// block) derive from it. This class owns the recompute flag (Module::set_recompute), the kept
// input (held here, or in the model's KeptInputs store: Module::set_kept_inputs), its put after
// a training forward and its take before the backward, the forward run again from it, the
// release of the internals and the buffer plan's split between what stays and what lives only
// while the block runs. A block gives only what is its own, through the hooks below.
// With recompute off, forward() and backward() are the block's run_forward() and
// run_backward(), and its buffers stay from step to step. With recompute on:
//  - forward(x): run_forward(x); in training x is kept (put in the store, or held here); then
//    release_internals() (an evaluation forward keeps nothing inside either), and with a store
//    release_output() too: the caller holds the output, and the next block's put moves it off
//    the device.
//  - backward(dy): the kept input comes back (taken from the store, or from here),
//    replay_forward() runs the forward again from it, then run_backward(dy), then
//    release_internals() (the returned input gradient lives on with the caller).
// Same kernels on the same inputs: outputs, gradients and running statistics are bit-identical
// to not recomputing.
// Shapes and dtypes: the block's own (the output's shape and dtype are those of the gradient it
// receives). Errors: backward() without a preceding training-mode forward() throws
// Error(invalid_argument) naming the block; KeptInputs::take's errors pass through.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <memory>
#include <utility>

#include "tandem/nn/kept_inputs.h"
#include "tandem/nn/module.h"

namespace tandem::nn {

class RecomputingBlock : public Module {
 public:
  Tensor forward(const Tensor& x) final;
  Tensor backward(const Tensor& dy) final;
  /// Without recompute: the block's internals (plan_internals) and, for Output::own, its output
  /// kept. With recompute: the output only (held by the caller, or by the block) is kept, and
  /// the internals with the incoming gradient (the next block's input gradient, alive while
  /// this one runs) count once, as the transient peak (BufferPlan::add_transient).
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) final;
  /// Drops the internals, the output and the kept input held here (not one waiting in the
  /// store); a backward() after it throws as without a forward().
  void release_buffers() final;
  /// Recompute on or off (see above); drops an input kept here. Returns 1: this block
  /// recomputes when on.
  int64_t set_recompute(bool on) final;
  bool recompute() const final { return recompute_; }
  /// With recompute: where the kept input waits between forward and backward (null: on the
  /// input's device, held here). Shared by the blocks of a model, in forward order
  /// (Module::set_kept_inputs, Module::set_activation_offload).
  void set_kept_inputs(std::shared_ptr<KeptInputs> store) final { kept_inputs_ = std::move(store); }

 protected:
  /// Whether the block's output buffer is one of its internals (release_internals drops it,
  /// its backward reads it: a residual block's ReLU) or the block's own, kept apart from the
  /// internals until release_output (a GPT-2 block's residual sum).
  enum class Output { internal, own };
  /// `name` (a string literal) names the block in errors.
  RecomputingBlock(const char* name, Output output) : name_(name), output_(output) {}

  /// The block's forward on x; keeps (in training) what its backward needs; returns the output.
  virtual Tensor run_forward(const Tensor& x) = 0;
  /// The forward again on the same x before a recomputing backward: rebuilds what the backward
  /// needs, leaving running statistics and counters as they are (a BatchNorm2d replays); the
  /// output itself need not be made.
  virtual void replay_forward(const Tensor& x) = 0;
  /// The block's backward for the last forward: dy -> dx (undefined without input gradient).
  virtual Tensor run_backward(const Tensor& dy) = 0;
  /// Drops the buffers that recompute rebuilds (those of the modules inside, the block's own
  /// intermediates and gradients; the output too for Output::internal).
  virtual void release_internals() = 0;
  /// Drops the block's own handle on its output (Output::own); the default has none.
  virtual void release_output() {}
  /// Adds the internals' buffers (those release_internals drops) to `plan`, which is the
  /// block's plan or, with recompute, the transient plan; returns the output's shape and
  /// leaves plan.current at the output's layout.
  virtual Shape plan_internals(const Shape& input, DType dtype, BufferPlan& plan) = 0;

 private:
  const char* name_;
  Output output_;
  Tensor x_in_;  // the kept input, when no store holds it
  std::shared_ptr<KeptInputs> kept_inputs_;
  bool have_forward_ = false, recompute_ = false;
};

}  // namespace tandem::nn
