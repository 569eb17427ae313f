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

void Sequential::add_stage(const std::string& name, std::shared_ptr<Sequential> stage) {
  TD_CHECK_ARG(stages_.empty() || stages_.back().first + 1 == children_.size(), "Sequential",
               "add_stage('{}'): the stages must follow each other", name);
  Sequential* raw = stage.get();
  add(name, std::move(stage));
  stages_.emplace_back(children_.size() - 1, raw);
  for (size_t b = 0; b < raw->size(); ++b) {
    blocks_.push_back(raw->children_[b].get());
    block_at_.emplace_back(raw, b);
  }
}

void Sequential::set_block_words(std::string kind, std::string outer_label, std::string outer_phrase) {
  kind_ = std::move(kind);
  outer_label_ = std::move(outer_label);
  outer_phrase_ = std::move(outer_phrase);
}

ModelBlocks Sequential::blocks() {
  ModelBlocks d;
  if (stages_.empty()) return d;
  std::string names;
  for (size_t i = 0, s = 0; i < children_.size(); ++i) {
    if (s < stages_.size() && stages_[s].first == i) {
      const Sequential& stage = *stages_[s++].second;
      for (size_t b = 0; b < stage.size(); ++b)
        d.blocks.push_back({names_[i] + "." + stage.name(b), stage[b].get()});
      continue;
    }
    d.outer.push_back({names_[i], children_[i].get()});
    if (!names_[i].empty()) names += (names.empty() ? "" : ", ") + names_[i];
  }
  d.kind = kind_;
  d.outer_label = outer_label_.empty() ? names : outer_label_;
  d.outer_phrase = outer_phrase_.empty() ? names : outer_phrase_;
  return d;
}

void Sequential::set_param_stream(ParamStream* stream) {
  TD_CHECK_ARG(stream == nullptr || !stages_.empty(), "Sequential", "set_param_stream: no stages of blocks to stream");
  loop_.set_stream(stream);
}

Tensor Sequential::forward(const Tensor& x) {
  const StreamPass pass = training_ ? StreamPass::forward : StreamPass::eval;
  loop_.begin(pass);
  Tensor h = x;
  for (size_t i = 0; i < children_.size(); ++i) {
    if (skip_[i]) continue;
    if (is_stage(i)) {  // every stage's blocks at the first one
      if (i == stages_.front().first) h = loop_.forward(blocks_, h, pass);
      continue;
    }
    h = children_[i]->forward(h);
  }
  if (!training_) loop_.end(StreamPass::eval);
  return h;
}

Tensor Sequential::backward(const Tensor& dy) {
  Tensor g = dy;
  for (size_t i = children_.size(); i-- > 0;) {
    if (skip_[i]) continue;
    if (is_stage(i)) {  // every stage's blocks at the last one
      if (i == stages_.back().first)
        g = loop_.backward(blocks_, g, [this](size_t b) {
          const auto& [stage, k] = block_at_[b];
          report_grad_ready(*blocks_[b], stage->child_params_[k]);
        });
    } else {
      g = children_[i]->backward(g);
      report_grad_ready(*children_[i], child_params_[i]);
    }
    if (!needs_input_grad_ && i <= first_trainable_) {
      g = Tensor();
      break;
    }
  }
  loop_.end(StreamPass::backward);
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
