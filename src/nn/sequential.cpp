#include "tandem/nn/sequential.h"

#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/relu.h"

namespace tandem::nn {

Sequential::Sequential(std::vector<ModulePtr> children) : children_(std::move(children)) {
  for (const ModulePtr& m : children_) TD_CHECK_ARG(m != nullptr, "Sequential", "null child module");
  plan();
}

void Sequential::add(ModulePtr m) {
  TD_CHECK_ARG(m != nullptr, "Sequential", "null child module");
  children_.push_back(std::move(m));
  plan();
}

void Sequential::set_fusion(bool on) {
  fusion_ = on;
  plan();
}

void Sequential::plan() {
  skip_.assign(children_.size(), false);
  // Without an input gradient, backward stops at the first child with parameters; that
  // child and those before it get no input-gradient request.
  first_trainable_ = children_.size();
  child_params_.assign(children_.size(), {});
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i]->collect_parameters(std::to_string(i) + ".", child_params_[i]);
    if (!child_params_[i].empty() && first_trainable_ == children_.size()) first_trainable_ = i;
  }
  for (size_t i = 0; i < children_.size(); ++i)
    children_[i]->set_needs_input_grad(needs_input_grad_ || i > first_trainable_);
  for (size_t i = 0; i < children_.size(); ++i) {
    auto* bn = dynamic_cast<BatchNorm2d*>(children_[i].get());
    if (!bn) continue;
    const bool fuse = fusion_ && i + 1 < children_.size() && dynamic_cast<ReLU*>(children_[i + 1].get());
    bn->set_fuse_relu(fuse);
    if (fuse) skip_[i + 1] = true;
  }
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < children_.size(); ++i)
    if (!skip_[i]) h = children_[i]->forward(h);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = children_.size(); i-- > 0;) {
    if (skip_[i]) continue;
    g = children_[i]->backward(g);
    if (grad_ready_hook_ && !child_params_[i].empty()) grad_ready_hook_(child_params_[i]);
    if (!needs_input_grad_ && i <= first_trainable_) return Tensor();
  }
  return g;
}

void Sequential::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  for (size_t i = 0; i < children_.size(); ++i)
    children_[i]->collect_parameters(prefix + std::to_string(i) + ".", out);
}

void Sequential::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  for (size_t i = 0; i < children_.size(); ++i) children_[i]->collect_state(prefix + std::to_string(i) + ".", out);
}

void Sequential::reset_parameters(uint64_t seed, uint64_t& index) {
  for (const ModulePtr& m : children_) m->reset_parameters(seed, index);
}

void Sequential::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  plan();
}

void Sequential::train(bool on) {
  training_ = on;
  for (const ModulePtr& m : children_) m->train(on);
}

std::string Sequential::describe() const {
  std::string s = "Sequential(\n";
  for (size_t i = 0; i < children_.size(); ++i) s += fmt::format("  ({}): {}\n", i, children_[i]->describe());
  return s + ")";
}

}  // namespace tandem::nn
