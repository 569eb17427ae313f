// Sequential: runs children in order (torch.nn.Sequential). Children are named "0", "1", ...
// unless named when added (a torchvision model's "conv1", "layer1"), so parameters and state
// appear as "0.weight", "layer1.0.conv1.weight", ... Backward runs the children in reverse.
// Parameters, state, reset, train/eval and the grad-ready hook recurse (Module).
// With set_needs_input_grad(false), backward stops after the first child that has
// parameters and returns an undefined Tensor.
// With stages (add_stage: a ResNet's layer1 .. layer4), the model declares the stages' children
// as its blocks and runs them in one BlockLoop (streaming, block by block).
// A child can be marked fused away (set_fused_away), e.g. a ReLU that the BatchNorm2d before
// it applies in its own pass (nn/fusion.h): forward and backward then skip it.
// With a grad-ready hook (Module::set_grad_ready_hook), backward calls it after each leaf
// child's backward with that child's parameters (the last child first); a container child
// reports its own children.
// Thread-safety: one thread at a time (see Module).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tandem/nn/block_loop.h"
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

  /// Appends `stage` (complete: its children added) as a child named `name` whose children are
  /// blocks of this model (Module::blocks), e.g. a ResNet's "layer1" of residual blocks; the
  /// children added with add() are the outer layers. The stages follow each other (an add()
  /// between two is refused), and this model's forward and backward run their blocks in one
  /// BlockLoop (tandem/nn/block_loop.h) instead of through the stages' own forward. Throws
  /// as add, and Error(invalid_argument) for a stage after an outer child that follows a stage.
  void add_stage(const std::string& name, std::shared_ptr<Sequential> stage);
  /// The words of the declaration (ModelBlocks::kind, outer_label, outer_phrase), e.g.
  /// "ResNet", "stem, classifier", "the stem and the classifier". Without them: "model", and
  /// the outer children's names.
  void set_block_words(std::string kind, std::string outer_label, std::string outer_phrase);
  /// The residual blocks of the stages (add_stage) in forward order, named
  /// "<stage>.<child>" ("layer2.1"), the other children outside them; none without stages.
  ModelBlocks blocks() override;
  /// Parameters streamed from their home (Module::set_param_stream): the stages' children are
  /// the parts 0, 1, ... in forward order, each computing between stream->use(part, pass) and
  /// stream->done(part, pass); the forward starts with use(kOuterPart, pass) (an
  /// evaluation's ends with done(kOuterPart, eval)) and the backward ends with
  /// done(kOuterPart, backward). Null removes it. Throws Error(invalid_argument) for a
  /// stream on a Sequential without stages.
  void set_param_stream(ParamStream* stream) override;
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
  std::vector<std::pair<size_t, Sequential*>> stages_;  // (child index, the stage) from add_stage
  std::vector<Module*> blocks_;                          // the stages' children, in forward order
  std::vector<std::pair<Sequential*, size_t>> block_at_;  // per block: its stage and index there
  std::string kind_ = "model", outer_label_, outer_phrase_;
  BlockLoop loop_;
  void plan();
  bool is_stage(size_t i) const {
    return !stages_.empty() && i >= stages_.front().first && i <= stages_.back().first;
  }
};

}  // namespace tandem::nn
