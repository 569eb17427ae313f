#include "tandem/nn/sequential.h"

#include <algorithm>

#include "nn/module_util.h"

namespace tandem::nn {

Sequential::Sequential(std::vector<ModulePtr> children) {
  for (ModulePtr& m : children) {
    TD_CHECK_ARG(m != nullptr, "Sequential", "null child module");
    names_.push_back(std::to_string(children_.size()));
    children_.push_back(std::move(m));
  }
  plan();
}

Sequential::Sequential(std::vector<std::pair<std::string, ModulePtr>> children) {
  for (auto& [name, m] : children) add(name, std::move(m));
}

void Sequential::add(ModulePtr m) { add(std::to_string(children_.size()), std::move(m)); }

void Sequential::add(const std::string& name, ModulePtr m) {
  TD_CHECK_ARG(m != nullptr, "Sequential", "null child module '{}'", name);
  TD_CHECK_ARG(name.empty() || std::find(names_.begin(), names_.end(), name) == names_.end(), "Sequential",
               "two children named '{}'", name);
  children_.push_back(std::move(m));
  names_.push_back(name);
  plan();
}

void Sequential::set_fused_away(size_t i, bool on) {
  TD_CHECK_ARG(i >= 1 && i < children_.size(), "Sequential", "set_fused_away({}): expected 1 <= i < {}", i,
               children_.size());
  skip_[i] = on;
}

std::vector<NamedChild> Sequential::named_children() {
  std::vector<NamedChild> out;
  for (size_t i = 0; i < children_.size(); ++i) out.push_back({names_[i], children_[i].get()});
  return out;
}

void Sequential::plan() {
  skip_.resize(children_.size(), false);
  // Without an input gradient, backward stops at the first child with parameters; that
  // child and those before it get no input-gradient request.
  first_trainable_ = children_.size();
  child_params_.assign(children_.size(), {});
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i]->collect_parameters(names_[i] + ".", child_params_[i]);
    if (!child_params_[i].empty() && first_trainable_ == children_.size()) first_trainable_ = i;
  }
  for (size_t i = 0; i < children_.size(); ++i)
    children_[i]->set_needs_input_grad(needs_input_grad_ || i > first_trainable_);
}

void Sequential::set_param_stream(ParamStream* stream, std::vector<int> parts, bool outer) {
  TD_CHECK_ARG(stream == nullptr || parts.size() == children_.size(), "Sequential",
               "set_param_stream: {} parts for {} children", parts.size(), children_.size());
  stream_ = stream;
  parts_ = stream ? std::move(parts) : std::vector<int>();
  outer_ = stream && outer;
}

Tensor Sequential::forward(const Tensor& x) {
  const StreamPass pass = training_ ? StreamPass::forward : StreamPass::eval;
  if (outer_) stream_->use(kOuterPart, pass);
  Tensor h = x;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (skip_[i]) continue;
    const int part = stream_ ? parts_[i] : -1;
    if (part >= 0) stream_->use(part, pass);
    h = children_[i]->forward(h);
    if (part >= 0) stream_->done(part, pass);
  }
  if (outer_ && !training_) stream_->done(kOuterPart, StreamPass::eval);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = children_.size(); i-- > 0;) {
    if (skip_[i]) continue;
    const int part = stream_ ? parts_[i] : -1;
    if (part >= 0) stream_->use(part, StreamPass::backward);
    g = children_[i]->backward(g);
    if (part >= 0) stream_->done(part, StreamPass::backward);
    report_grad_ready(*children_[i], child_params_[i]);
    if (!needs_input_grad_ && i <= first_trainable_) {
      g = Tensor();
      break;
    }
  }
  if (outer_) stream_->done(kOuterPart, StreamPass::backward);
  return g;
}

void Sequential::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  plan();
}

std::string Sequential::describe() const {
  std::string s = "Sequential(\n";
  for (size_t i = 0; i < children_.size(); ++i) {
    s += fmt::format("  ({}): {}\n", names_[i].empty() ? std::to_string(i) : names_[i],
                     detail::indent_lines(children_[i]->describe()));
  }
  return s + ")";
}

Shape Sequential::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  Shape h = in;
  for (size_t i = 0; i < children_.size(); ++i)
    if (!skip_[i]) h = children_[i]->plan_buffers(h, dtype, plan);
  return h;
}

}  // namespace tandem::nn
