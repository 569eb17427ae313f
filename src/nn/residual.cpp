#include "tandem/nn/residual.h"

#include "nn/module_util.h"
#include "tandem/nn/batch_norm2d.h"
#include "tandem/nn/module_walk.h"
#include "tandem/ops.h"

namespace tandem::nn {

Residual::Residual(ModulePtr body, ModulePtr shortcut)
    : RecomputingBlock("Residual", Output::internal),
      body_(std::move(body)),
      shortcut_(std::move(shortcut)) {
  TD_CHECK_ARG(body_ != nullptr, "Residual", "null body module");
  body_->collect_parameters("", body_params_);
  if (shortcut_) shortcut_->collect_parameters("downsample.", shortcut_params_);
  collect_modules_of<BatchNorm2d>(*body_, norms_);
  if (shortcut_) collect_modules_of<BatchNorm2d>(*shortcut_, norms_);
}

std::vector<NamedChild> Residual::named_children() {
  std::vector<NamedChild> out{{"", body_.get()}};
  if (shortcut_) out.push_back({"downsample", shortcut_.get()});
  return out;
}

Tensor Residual::run_forward(const Tensor& x) {
  const Tensor b = body_->forward(x);
  Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  TD_CHECK_ARG(b.shape() == s.shape(), "Residual", "the body gives {} but the shortcut {}: expected one shape",
               shape_str(b.shape()), shape_str(s.shape()));
  // The sum takes the body's layout (an identity shortcut of a contiguous input differs from
  // a channels_last body).
  s = ops::to_memory_format(s, b.memory_format());
  const Tensor& y = detail::reuse(y_, b.shape(), b.device(), b.dtype(), b.memory_format());
  ops::add_relu_forward(b, s, y);
  return y;
}

void Residual::release_internals() {
  body_->release_buffers();
  if (shortcut_) shortcut_->release_buffers();
  y_ = g_ = Tensor();
}

// The forward again before a recomputing backward, with the BatchNorm2d layers in replay: the
// running statistics and counters stay as the first forward left them.
void Residual::replay_forward(const Tensor& x) {
  struct Replay {  // on for this forward only, whether it returns or throws
    const std::vector<BatchNorm2d*>& norms;
    explicit Replay(const std::vector<BatchNorm2d*>& n) : norms(n) {
      for (BatchNorm2d* b : norms) b->set_replay(true);
    }
    ~Replay() {
      for (BatchNorm2d* b : norms) b->set_replay(false);
    }
  } replay(norms_);
  run_forward(x);
}

Tensor Residual::run_backward(const Tensor& dy) {
  const Tensor& g = detail::reuse(g_, y_.shape(), y_.device(), y_.dtype(), y_.memory_format());
  ops::relu_backward(ops::to_memory_format(dy, y_.memory_format()), y_, g);  // dy in either layout
  Tensor ds = g;
  if (shortcut_) {
    ds = shortcut_->backward(g);
    report_grad_ready(*shortcut_, shortcut_params_);
  }
  Tensor dx = body_->backward(g);
  report_grad_ready(*body_, body_params_);
  if (needs_input_grad_) {
    // dx is the body's own buffer, free until its next backward (with recompute, released
    // here: the caller's handle keeps it).
    ops::add_(dx, ops::to_memory_format(ds, dx.memory_format()));
  } else {
    dx = Tensor();
  }
  return dx;
}

void Residual::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  body_->set_needs_input_grad(on);
  if (shortcut_) shortcut_->set_needs_input_grad(on);
}

std::string Residual::describe() const {
  std::string s = "Residual(\n  (body): " + detail::indent_lines(body_->describe()) + "\n";
  if (shortcut_) s += "  (downsample): " + detail::indent_lines(shortcut_->describe()) + "\n";
  return s + ")";
}

// The body's and the shortcut's buffers, the output (y_, read by the ReLU's backward) and the
// gradient through the ReLU; with recompute, all of them live only while the block runs
// (RecomputingBlock::plan_buffers).
Shape Residual::plan_internals(const Shape& in, DType dtype, BufferPlan& p) {
  const MemoryFormat in_format = p.current;
  const Shape b = body_->plan_buffers(in, dtype, p);
  const MemoryFormat body_format = p.current;
  p.current = in_format;
  const Shape s = shortcut_ ? shortcut_->plan_buffers(in, dtype, p) : in;
  TD_CHECK_ARG(b == s, "plan", "Residual: the body gives {} but the shortcut {}", shape_str(b),
               shape_str(s));
  p.current = body_format;
  p.add(b, dtype);        // y
  p.add_train(b, dtype);  // the gradient through the ReLU
  return b;
}

}  // namespace tandem::nn
