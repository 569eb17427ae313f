#include "tandem/nn/module.h"
#include "tandem/nn/param_init.h"

#include <algorithm>
#include <set>

#include "tandem/ops.h"

namespace tandem::nn {

std::vector<Module*> Module::children() {
  std::vector<Module*> out;
  for (const NamedChild& c : named_children()) out.push_back(c.module);
  return out;
}

std::string Module::child_prefix(const std::string& prefix, const NamedChild& child) {
  return child.name.empty() ? prefix : prefix + child.name + ".";
}

void Module::collect_parameters(const std::string& prefix, std::vector<Parameter*>& out) {
  for (const NamedChild& c : named_children()) c.module->collect_parameters(child_prefix(prefix, c), out);
}

void Module::collect_state(const std::string& prefix, std::vector<NamedTensor>& out) {
  for (const NamedChild& c : named_children()) c.module->collect_state(child_prefix(prefix, c), out);
}

void Module::reset_parameters(uint64_t seed, uint64_t& index) {
  for (Module* m : children()) m->reset_parameters(seed, index);
}

Shape Module::plan_buffers(const Shape&, DType, BufferPlan&) {
  throw_error(ErrorCode::not_available, "plan",
              describe().substr(0, describe().find('\n')) + " has no buffer estimate");
}

void Module::release_buffers() {
  for (Module* m : children()) m->release_buffers();
}

int64_t Module::set_recompute(bool on) {
  int64_t n = 0;
  for (Module* m : children()) n += m->set_recompute(on);
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (Module* m : children()) m->train(on);
}

void Module::set_grad_ready_hook(GradReadyHook hook) {
  for (Module* m : children()) m->set_grad_ready_hook(hook);
  grad_ready_hook_ = std::move(hook);
}

void Module::loss_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  throw_error(ErrorCode::invalid_argument, "loss_forward", describe().substr(0, 64) + " has no fused loss");
}

void Module::loss_backward() {
  throw_error(ErrorCode::invalid_argument, "loss_backward", describe().substr(0, 64) + " has no fused loss");
}

void Module::report_grad_ready(Module& child, const std::vector<Parameter*>& params) {
  if (grad_ready_hook_ && !params.empty() && child.named_children().empty()) grad_ready_hook_(params);
}

std::vector<Parameter*> Module::parameters() {
  std::vector<Parameter*> out;
  collect_parameters("", out);
  return out;
}

std::vector<NamedTensor> Module::state_dict() {
  std::vector<NamedTensor> out;
  collect_state("", out);
  return out;
}

void Module::zero_grad() {
  for (Parameter* p : parameters())
    if (p->grad.defined() && p->grad.nbytes()) ops::zero_(p->grad);
}

static void collect_ops(Module& m, std::vector<ops::Op>& out) {
  for (ops::Op op : m.own_ops())
    if (std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  for (Module* c : m.children()) collect_ops(*c, out);
}

std::vector<ops::Op> Module::ops_used() {
  std::vector<ops::Op> out;
  collect_ops(*this, out);
  if (!parameters().empty() && std::find(out.begin(), out.end(), ops::Op::zero_) == out.end())
    out.push_back(ops::Op::zero_);  // zero_grad()
  return out;
}

namespace {

// The stream copies between `a` and `b` run on: the calling thread's current stream of the one
// that is not host (its default stream unless the thread has a stream of its own, as the
// inference replica has: its set-up then never waits for another thread's queued work).
Stream copy_stream(Device a, Device b) {
  const Device d = a.is_host() ? b : a;
  return runtime_for(d).current_stream(d.index);
}

}  // namespace

void Module::to(Device device) {
  runtime_for(device);  // a missing device fails before anything moves
  std::vector<Tensor> tensors;
  for (Parameter* p : parameters()) {
    tensors.push_back(p->value);
    tensors.push_back(p->grad);
    tensors.push_back(p->compute);
  }
  for (const NamedTensor& t : state_dict()) {
    if (t.is_parameter) continue;
    if (t.tensor.defined() && t.tensor.dim() == 0 && t.tensor.dtype() == DType::i64) continue;  // host counter
    tensors.push_back(t.tensor);
  }
  std::set<Storage*> moved;
  for (const Tensor& t : tensors) {
    if (!t.defined() || !moved.insert(t.storage().get()).second) continue;
    if (t.device() == device) continue;
    t.storage()->migrate(device, copy_stream(t.device(), device));
  }
}

void Module::set_compute_dtype(DType dtype) {
  TD_CHECK_ARG(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16, "set_compute_dtype",
               "expected f32, bf16 or f16, found {}", dtype_name(dtype));
  for (Parameter* p : parameters()) {
    if (!p->low_precision || dtype == DType::f32) {
      p->compute = Tensor();
      continue;
    }
    if (!has_values(*p)) {  // built without memory (make_model_lazy): the copy's shape and dtype only
      p->compute = Tensor::from_blob(nullptr, p->value.shape(), dtype);
      continue;
    }
    const Device dev = p->value.device();
    if (dev.is_host()) {
      // In place where the copy exists: its memory may be a home another part reads from
      // (--param-device cpu keeps the compute copies in pinned memory and uploads from them).
      const Tensor fresh = p->value.to(dtype);
      if (p->compute.defined() && p->compute.device().is_host() && p->compute.dtype() == dtype &&
          p->compute.shape() == fresh.shape()) {
        p->compute.copy_from(fresh);
      } else {
        p->compute = fresh;
      }
      continue;
    }
    // Converted on the host: a one-off at set-up and after loading weights.
    const Stream s = copy_stream(dev, Device{});
    Tensor host = p->value.to(Device{}, s);
    s.synchronize();
    p->compute = host.to(dtype).to(dev, s);
    s.synchronize();
  }
}

Device Module::device() {
  for (Parameter* p : parameters())
    if (p->value.defined()) return p->value.device();
  return Device{};
}

std::vector<NamedTensor> Module::host_state_dict() {
  std::vector<NamedTensor> out = state_dict();
  for (NamedTensor& t : out) {
    if (!t.tensor.defined() || t.tensor.device().is_host()) continue;
    const Stream s = copy_stream(t.tensor.device(), Device{});
    t.tensor = t.tensor.to(Device{}, s);
    s.synchronize();
  }
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (Parameter* p : parameters())
    if (p->requires_grad) n += p->value.numel();
  return n;
}

void Module::init_parameters(uint64_t seed) {
  uint64_t index = 0;
  reset_parameters(seed, index);
}

}  // namespace tandem::nn
