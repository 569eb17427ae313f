// Sequential: runs children in order (torch.nn.Sequential). Children are named "0", "1", ...
// so parameters and state appear as "0.weight", "1.running_mean", ... Backward runs the
// children in reverse. train()/eval(), parameters, state and reset_parameters recurse.
// With set_needs_input_grad(false), backward stops after the first child that has
// parameters and returns an undefined Tensor.
// A BatchNorm2d directly followed by a ReLU is fused (one pass, same results) unless
// set_fusion(false).
// With a grad-ready hook (Module::set_grad_ready_hook), backward calls it after each child's
// backward with that child's parameters (the last child first).
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <vector>

#include "tandem/nn/module.h"

namespace tandem::nn {

class Sequential final : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<ModulePtr> children);

  /// Appends a child named by its position.
  void add(ModulePtr m);
  size_t size() const { return children_.size(); }
  const ModulePtr& operator[](size_t i) const { return children_.at(i); }
  /// True when child i is not run on its own because the child before absorbed it (fusion).
  bool fused_away(size_t i) const { return skip_.at(i); }

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& dy) override;
  void collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) override;
  void collect_state(const std::string& prefix, std::vector<NamedTensor>& out) override;
  void reset_parameters(uint64_t seed, uint64_t& index) override;
  void train(bool on = true) override;
  void set_needs_input_grad(bool on) override;
  std::string describe() const override;

  /// Enables/disables BatchNorm2d+ReLU fusion (on by default).
  void set_fusion(bool on);

 private:
  std::vector<ModulePtr> children_;
  std::vector<bool> skip_;  // children bypassed because the one before absorbed them
  std::vector<std::vector<Parameter*>> child_params_;  // per child, for the grad-ready hook
  bool fusion_ = true;
  size_t first_trainable_ = 0;  // index of the first child with parameters
  void plan();
};

}  // namespace tandem::nn
