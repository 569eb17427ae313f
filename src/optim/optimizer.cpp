#include "tandem/optim/optimizer.h"

#include <cmath>
#include <cstring>
#include <set>

#include "tandem/amp_ops.h"
#include "tandem/device_traits.h"
#include "tandem/error.h"
#include "tandem/ops.h"

namespace tandem::optim {
namespace {

void check_f32(const char* op, const std::string& name, const char* what, const Tensor& t) {
  TD_CHECK_ARG(t.defined(), op, "parameter '{}': {} is undefined", name, what);
  TD_CHECK_ARG(t.dtype() == DType::f32 && t.is_contiguous(), op,
               "parameter '{}': {} must be a contiguous f32 tensor, got {} {} on {}", name, what,
               dtype_name(t.dtype()), shape_str(t.shape()), t.device().str());
}

// A state slot's device: the parameter's, except 0-d i64 step counters (read by the host to
// compute the update's constants), which stay on the host.
Device state_device(const Shape& shape, DType dtype, Device param_device) {
  return shape.empty() && dtype == DType::i64 ? Device{} : param_device;
}

// Copies src (host) into dst (any device) and waits for the copy.
void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_host()) {
    Tensor(dst).copy_from(src);
    return;
  }
  const Stream s = runtime_for(dst.device()).default_stream(dst.device().index);
  if (!dst.storage()->pending_write().query()) s.wait(dst.storage()->pending_write());
  runtime_for(dst.device()).copy_async(dst.raw_data(), dst.device(), src.raw_data(), src.device(),
                                       src.nbytes(), s);
  s.synchronize();
}

}  // namespace

Optimizer::Optimizer(const char* op, std::vector<nn::Parameter*> params, double lr)
    : op_(op), params_(std::move(params)), lr_(lr) {
  TD_CHECK_ARG(lr >= 0, op_, "lr must be >= 0, got {}", lr);
  std::set<std::string> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    TD_CHECK_ARG(params_[i] != nullptr, op_, "parameter {} is null", i);
    const std::string name = params_[i]->name.empty() ? "param" + std::to_string(i) : params_[i]->name;
    TD_CHECK_ARG(seen.insert(name).second, op_, "two parameters are named '{}'", name);
    check_f32(op_, name, "value", params_[i]->value);
    names_.push_back(name);
  }
  state_.resize(params_.size());
}

Optimizer::~Optimizer() { last_gated_.synchronize(); }

void Optimizer::set_lr(double lr) {
  TD_CHECK_ARG(lr >= 0, op_, "lr must be >= 0, got {}", lr);
  lr_ = lr;
}

void Optimizer::check_grad(size_t i) const { check_grad(i, *params_[i]); }

void Optimizer::check_grad(size_t i, const nn::Parameter& p) const {
  if (!p.requires_grad || !p.grad.defined()) return;
  check_f32(op_, names_[i], "grad", p.grad);
  TD_CHECK_ARG(p.grad.shape() == p.value.shape(), op_, "parameter '{}': grad shape {} differs from value shape {}",
               names_[i], shape_str(p.grad.shape()), shape_str(p.value.shape()));
  TD_CHECK_ARG(p.grad.device() == p.value.device(), op_, "parameter '{}': grad is on {} but the value on {}",
               names_[i], p.grad.device().str(), p.value.device().str());
}

void Optimizer::step() {
  // Check every gradient before touching any parameter, so a bad one leaves no half step.
  for (size_t i = 0; i < params_.size(); ++i) check_grad(i);
  if (gate_.defined()) return gated_step();
  update_all();
  ++step_count_;
}

void Optimizer::update_part(const std::vector<size_t>& indices) {
  TD_CHECK_ARG(!gate_.defined(), op_, "a step in parts cannot be gated (dynamic loss scaling): expected step()");
  for (size_t i : indices) {
    TD_CHECK_ARG(i < params_.size(), op_, "parameter index {} out of range: expected < {}", i, params_.size());
    check_grad(i);
  }
  for (size_t i : indices) {
    nn::Parameter& p = *params_[i];
    if (p.requires_grad && p.grad.defined()) update(i, p);
  }
}

void Optimizer::update_part(const std::vector<size_t>& indices, double lr, const std::vector<nn::Parameter*>& as) {
  TD_CHECK_ARG(!gate_.defined(), op_, "a step in parts cannot be gated (dynamic loss scaling): expected step()");
  TD_CHECK_ARG(as.size() == indices.size(), op_, "update_part: {} stand-ins for {} parameters", as.size(),
               indices.size());
  TD_CHECK_ARG(std::isfinite(lr) && lr >= 0, op_, "lr must be >= 0, got {}", lr);
  for (size_t k = 0; k < indices.size(); ++k) {
    TD_CHECK_ARG(indices[k] < params_.size(), op_, "parameter index {} out of range: expected < {}", indices[k],
                 params_.size());
    check_grad(indices[k], *as[k]);
  }
  in_part_ = true;
  part_lr_ = lr;
  try {
    for (size_t k = 0; k < indices.size(); ++k) {
      part_as_ = as[k];
      if (as[k]->requires_grad && as[k]->grad.defined()) update(indices[k], *as[k]);
    }
  } catch (...) {
    in_part_ = false;
    part_as_ = nullptr;
    throw;
  }
  in_part_ = false;
  part_as_ = nullptr;
}

void Optimizer::set_skip_gate(Tensor state, std::function<double(int64_t)> lr_of_step) {
  gate_ = std::move(state);
  lr_of_step_ = std::move(lr_of_step);
}

void Optimizer::gated_step() {
  std::vector<Tensor> touched;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    if (!p.requires_grad || !p.grad.defined()) continue;
    prepare_state(i, p);
    for (const Tensor& t : {p.value, p.grad, p.compute}) touched.push_back(t);
    for (const auto& [key, t] : state_[i]) touched.push_back(t);
  }
  gated_host_addressable_ = host_addressable(gate_.device());
  // The lr is fixed here or when the step runs, never read back from lr_ there: the host may
  // already have set the next step's with set_lr().
  ops::run_if_finite(gate_, touched, [this, enqueued_lr = lr()] {
    gated_lr_ = lr_of_step_ ? lr_of_step_(step_count_.load(std::memory_order_relaxed)) : enqueued_lr;
    if (lr_of_step_) lr_ = gated_lr_;  // what lr() reports
    in_gated_ = true;
    update_all();
    in_gated_ = false;
    step_count_.fetch_add(1, std::memory_order_release);
  });
  // The task's completion is the pending write it left on the tensors it touched.
  for (const Tensor& t : touched)
    if (t.defined() && !t.device().is_host()) {
      last_gated_ = t.storage()->pending_write();
      break;
    }
}

void Optimizer::update_all() {
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    if (p.requires_grad && p.grad.defined()) update(i, p);
  }
}

void Optimizer::zero_grad() {
  for (nn::Parameter* p : params_)
    if (p->grad.defined() && p->grad.numel()) ops::zero_(p->grad);
}

std::vector<nn::NamedTensor> Optimizer::state() const {
  std::vector<nn::NamedTensor> out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [key, t] : state_[i]) out.push_back({names_[i] + "." + key, t, false});
  return out;
}

void Optimizer::load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) {
  TD_CHECK_ARG(step_count >= 0, op_, "step_count must be >= 0, got {}", step_count);
  const auto keys = state_keys();
  struct Target {
    size_t index;
    std::string key;
    const Tensor* src;
  };
  std::vector<Target> targets;
  std::vector<Tensor> converted;  // moments saved in the other of f32 / bf16
  converted.reserve(state.size());
  const auto moment_dtype = [](DType d) { return d == DType::f32 || d == DType::bf16; };
  for (const nn::NamedTensor& nt : state) {
    bool found = false;
    for (size_t i = 0; i < names_.size() && !found; ++i) {
      for (const auto& [key, dtype] : keys) {
        if (nt.name != names_[i] + "." + key) continue;
        const Shape want = dtype == DType::i64 ? Shape{} : params_[i]->value.shape();
        const Tensor* src = &nt.tensor;
        // A run resumed with another --optimizer-moments (--force): f32 moments rounded to the
        // nearest bf16, bf16 ones widened (exact).
        if (src->defined() && src->dtype() != dtype && moment_dtype(src->dtype()) && moment_dtype(dtype) &&
            src->device().is_host() && src->shape() == want) {
          converted.push_back(src->to(dtype));
          src = &converted.back();
        }
        TD_CHECK_ARG(src->defined() && src->dtype() == dtype &&
                         src->shape() == want && src->device().is_host() && src->is_contiguous(),
                     op_, "state '{}': expected a {} host tensor of shape {}, got {} {}",
                     nt.name, dtype_name(dtype), shape_str(want),
                     nt.tensor.defined() ? dtype_name(nt.tensor.dtype()) : "undefined",
                     nt.tensor.defined() ? shape_str(nt.tensor.shape()) : "");
        targets.push_back({i, key, src});
        found = true;
        break;
      }
    }
    TD_CHECK_ARG(found, op_, "state '{}' matches no parameter and key of this optimizer",
                 nt.name);
  }
  for (const Target& t : targets) {
    Tensor* dst = find_state(t.index, t.key);
    if (dst == nullptr) dst = &create_state(t.index, t.key, t.src->shape(), t.src->dtype());
    copy_into(*dst, *t.src);
  }
  step_count_ = step_count;
}

Tensor* Optimizer::find_state(size_t index, const std::string& key) {
  for (auto& [k, t] : state_[index])
    if (k == key) return &t;
  return nullptr;
}

Tensor& Optimizer::create_state(size_t index, const std::string& key, const Shape& shape,
                                DType dtype) {
  TD_ASSERT(find_state(index, key) == nullptr);
  // A stand-in's update (update_part with `as`) creates the state where the stand-in's value is.
  const Device dev = state_device(shape, dtype, part_as_ ? part_as_->value.device() : params_[index]->value.device());
  Tensor t = state_home_ ? state_home_(index, key, shape, dtype) : Tensor();
  if (t.defined()) {
    TD_CHECK_ARG(t.dtype() == dtype && t.shape() == shape && t.is_contiguous() && t.device() == dev, op_,
                 "state '{}.{}': its home gave a {} tensor of shape {} on {}, expected contiguous {} {} on {}",
                 names_[index], key, dtype_name(t.dtype()), shape_str(t.shape()), t.device().str(), dtype_name(dtype),
                 shape_str(shape), dev.str());
    if (dev.is_host()) {
      std::memset(t.raw_data(), 0, t.nbytes());
    } else if (t.numel()) {
      ops::zero_(t);
    }
  } else {
    t = dev.is_host() ? Tensor::zeros(shape, dtype) : Tensor::empty(shape, dtype, dev);
    if (!dev.is_host() && t.numel()) ops::zero_(t);
  }
  state_[index].emplace_back(key, std::move(t));
  return state_[index].back().second;
}

}  // namespace tandem::optim
