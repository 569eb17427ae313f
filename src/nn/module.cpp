#include "tandem/nn/module.h"

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

void Module::train(bool on) {
  training_ = on;
  for (Module* m : children()) m->train(on);
}

void Module::set_grad_ready_hook(GradReadyHook hook) {
  for (Module* m : children()) m->set_grad_ready_hook(hook);
  grad_ready_hook_ = std::move(hook);
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

namespace {

// The stream copies between `a` and `b` run on: the default stream of the one that is not host.
Stream copy_stream(Device a, Device b) {
  const Device d = a.is_host() ? b : a;
  return runtime_for(d).default_stream(d.index);
}

}  // namespace

void Module::to(Device device) {
  runtime_for(device);  // a missing device fails before anything moves
  std::vector<Tensor> tensors;
  for (Parameter* p : parameters()) {
    tensors.push_back(p->value);
    tensors.push_back(p->grad);
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
