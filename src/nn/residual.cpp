#include "tandem/nn/residual.h"

#include "nn/module_util.h"
#include "tandem/ops.h"

namespace tandem::nn {

Residual::Residual(ModulePtr body, ModulePtr shortcut) : body_(std::move(body)), shortcut_(std::move(shortcut)) {
  TD_CHECK_ARG(body_ != nullptr, "Residual", "null body module");
  body_->collect_parameters("", body_params_);
  if (shortcut_) shortcut_->collect_parameters("downsample.", shortcut_params_);
}

std::vector<NamedChild> Residual::named_children() {
  std::vector<NamedChild> out{{"", body_.get()}};
  if (shortcut_) out.push_back({"downsample", shortcut_.get()});
  return out;
}

Tensor Residual::forward(const Tensor& x) {
  const Tensor b = body_->forward(x);
  Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  TD_CHECK_ARG(b.shape() == s.shape(), "Residual", "the body gives {} but the shortcut {}: expected one shape",
               shape_str(b.shape()), shape_str(s.shape()));
  // The sum takes the body's layout (an identity shortcut of a contiguous input differs from
  // a channels_last body).
  s = ops::to_memory_format(s, b.memory_format());
  const Tensor& y = detail::reuse(y_, b.shape(), b.device(), b.dtype(), b.memory_format());
  ops::add_relu_forward(b, s, y);
  have_y_ = training_;
  return y;
}

Tensor Residual::backward(const Tensor& dy) {
  if (!have_y_) detail::no_forward("Residual");
  have_y_ = false;
  const Tensor& g = detail::reuse(g_, y_.shape(), y_.device(), y_.dtype(), y_.memory_format());
  ops::relu_backward(ops::to_memory_format(dy, y_.memory_format()), y_, g);  // dy in either layout
  Tensor ds = g;
  if (shortcut_) {
    ds = shortcut_->backward(g);
    report_grad_ready(*shortcut_, shortcut_params_);
  }
  Tensor dx = body_->backward(g);
  report_grad_ready(*body_, body_params_);
  if (!needs_input_grad_) return Tensor();
  ops::add_(dx, ops::to_memory_format(ds, dx.memory_format()));  // dx is the body's own buffer, free until its next backward
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

Shape Residual::plan_buffers(const Shape& in, DType dtype, BufferPlan& plan) {
  const MemoryFormat in_format = plan.current;
  const Shape b = body_->plan_buffers(in, dtype, plan);
  const MemoryFormat body_format = plan.current;
  plan.current = in_format;
  const Shape s = shortcut_ ? shortcut_->plan_buffers(in, dtype, plan) : in;
  TD_CHECK_ARG(b == s, "plan", "Residual: the body gives {} but the shortcut {}", shape_str(b),
               shape_str(s));
  plan.current = body_format;
  plan.add(b, dtype);        // y
  plan.add_train(b, dtype);  // the gradient through the ReLU
  return b;
}

}  // namespace tandem::nn
