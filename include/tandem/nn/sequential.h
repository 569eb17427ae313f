// Sequential: runs children in order (torch.nn.Sequential). Children are named "0", "1", ...
// unless named when added (a torchvision model's "conv1", "layer1"), so parameters and state
// appear as "0.weight", "layer1.0.conv1.weight", ... Backward runs the children in reverse.
// Parameters, state, reset, train/eval and the grad-ready hook recurse (Module).
// With set_needs_input_grad(false), backward stops after the first child that has
// parameters and returns an undefined Tensor.
// A child can be marked fused away (set_fused_away), e.g. a ReLU that the BatchNorm2d before
// it applies in its own pass (nn/fusion.h): forward and backward then skip it.
// With a grad-ready hook (Module::set_grad_ready_hook), backward calls it after each leaf
// child's backward with that child's parameters (the last child first); a container child
// reports its own children.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/nn/param_stream.h"

namespace tandem::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;
  /// Children named "0", "1", ...; throws Error(invalid_argument) for a null child.
  explicit Sequential(std::vector<ModulePtr> children);
  /// Named children; throws Error(invalid_argument) for a null child or a repeated name
  /// (an empty name is allowed for modules without state, e.g. a ReLU).
  explicit Sequential(std::vector<std::pair<std::string, ModulePtr>> children);

  /// Appends a child named by its position, or by `name` when given.
  void add(ModulePtr m);
  void add(const std::string& name, ModulePtr m);
  size_t size() const { return children_.size(); }
  const ModulePtr& operator[](size_t i) const { return children_.at(i); }
  /// The name of child i.
  const std::string& name(size_t i) const { return names_.at(i); }
  /// True when child i is not run on its own because the child before absorbed it (fusion).
  bool fused_away(size_t i) const { return skip_.at(i); }
  /// Marks child i as absorbed by the child before it (or not); for graph passes (nn/fusion.h).
  /// Throws Error(invalid_argument) for i == 0 or i >= size().
  void set_fused_away(size_t i, bool on);

  /// Parameters streamed from their home (tandem/nn/param_stream.h): child i computes between
  /// stream->use(parts[i], pass) and stream->done(parts[i], pass) where parts[i] >= 0 (-1: no
  /// part of its own). With `outer`, this is the model's top: its forward starts with
  /// use(kOuterPart, pass) (an evaluation's ends with done(kOuterPart, eval)) and its backward
  /// ends with done(kOuterPart, backward). Null removes it. Throws Error(invalid_argument) when
  /// parts.size() differs from size().
  void set_param_stream(ParamStream* stream, std::vector<int> parts, bool outer);
  std::vector<NamedChild> named_children() override;
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  Shape plan_buffers(const Shape& input, DType dtype, BufferPlan& plan) override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;

 private:
  std::vector<ModulePtr> children_;
  std::vector<std::string> names_;
  std::vector<bool> skip_;  // children bypassed because the one before absorbed them
  std::vector<std::vector<Parameter*>> child_params_;  // per child, for the grad-ready hook
  size_t first_trainable_ = 0;  // index of the first child with parameters
  ParamStream* stream_ = nullptr;
  std::vector<int> parts_;  // per child: its part for stream_ (-1: none)
  bool outer_ = false;
  void plan();
};

}  // namespace tandem::nn
