#include "train/dist/zero_optimizer.h"

#include <algorithm>

#include "tandem/error.h"
#include "tandem/optim/adam.h"
#include "tandem/shard_range.h"

namespace tandem::train {

ZeroOptimizer::ZeroOptimizer(const std::string& name, std::vector<nn::Parameter*> params,
                             const optim::OptimizerOptions& options, comm::CommunicatorPtr comm)
    : Optimizer("zero", params, options.lr), comm_(std::move(comm)), momentum_(options.momentum != 0) {
  // Whole parameters, each to the rank whose shard of the flat concatenation (shard_range)
  // holds its middle element: the rank holding the largest share of it.
  int64_t total = 0;
  for (const nn::Parameter* p : params) total += p->value.numel();
  int64_t begin = 0;
  std::vector<uint32_t> streams;  // bf16 moments: each owned parameter's index among all of them
  for (nn::Parameter* p : params) {
    const int64_t n = p->value.numel();
    const int r = shard_owner(begin + (n > 0 ? (n - 1) / 2 : 0), total, comm_->world_size());
    begin += n;
    owner_.push_back(r);
    if (r != comm_->rank()) continue;
    streams.push_back(static_cast<uint32_t>(owner_.size() - 1));
    owned_.push_back(p);
    owned_elements_ += n;
  }
  inner_ = optim::make_optimizer(name, owned_, options);
  // The unpartitioned optimizer's noise for the moments' stochastic rounding: its bits.
  if (auto* adam = dynamic_cast<optim::Adam*>(inner_.get())) adam->set_rounding_streams(std::move(streams));
}

void ZeroOptimizer::update_all() {
  inner_->set_lr(lr());
  inner_->step();
  const std::vector<nn::Parameter*>& ps = params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const Tensor& v = ps[i]->value;
    const Stream s = runtime_for(v.device()).current_stream(v.device().index);
    comm_->broadcast(v, owner_[i], s);
    // bf16/fp16: the owner's update rounded the compute copy the forward reads; the others'
    // copies are stale until they receive it.
    if (ps[i]->compute.defined()) comm_->broadcast(ps[i]->compute, owner_[i], s);
  }
}

void ZeroOptimizer::update(size_t, nn::Parameter&) {
  throw_error(ErrorCode::internal, "zero", "update() called: the inner optimizer updates the owned parameters");
}

std::vector<nn::NamedTensor> ZeroOptimizer::gathered_state(const Stream& s) const {
  std::vector<nn::NamedTensor> out;
  if (step_count() == 0) return out;
  const std::vector<nn::NamedTensor> mine = inner_->state();
  const std::string name = inner_->name();
  // The slots every updated parameter has (Adam: moments and step; SGD: momentum, if any).
  std::vector<std::pair<std::string, DType>> keys;
  if (name == "sgd") {
    if (momentum_) keys = {{"momentum_buffer", DType::f32}};
  } else {
    keys = inner_->state_keys();  // the moments f32 or bf16 (--optimizer-moments)
  }
  const std::vector<nn::Parameter*>& ps = params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const nn::Parameter& p = *ps[i];
    if (!p.requires_grad || !p.grad.defined()) continue;
    for (const auto& [key, dtype] : keys) {
      const std::string full = param_name(i) + "." + key;
      if (key == "step") {  // every parameter is updated each step: the count is the optimizer's (a host scalar)
        Tensor step = Tensor::empty({}, DType::i64);
        *step.data<int64_t>() = step_count();
        out.push_back({full, step, false});
        continue;
      }
      Tensor t = Tensor::empty(key == "step" ? Shape{} : p.value.shape(), dtype, p.value.device());
      if (owner_[i] == comm_->rank()) {
        const Tensor* src = nullptr;
        for (const nn::NamedTensor& nt : mine)
          if (nt.name == full) src = &nt.tensor;
        TD_CHECK(src != nullptr, ErrorCode::internal, "zero", "rank {} owns '{}' but holds no '{}'", comm_->rank(),
                 param_name(i), full);
        runtime_for(t.device()).copy_async(t.raw_data(), t.device(), src->raw_data(), src->device(), t.nbytes(), s);
      }
      comm_->broadcast(t, owner_[i], s);
      out.push_back({full, t, false});
    }
  }
  return out;
}

void ZeroOptimizer::load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) {
  std::vector<nn::NamedTensor> owned;
  for (const nn::NamedTensor& nt : state)
    for (const nn::Parameter* p : owned_)
      if (nt.name.rfind(p->name + ".", 0) == 0 && nt.name.find('.', p->name.size() + 1) == std::string::npos)
        owned.push_back(nt);
  inner_->load_state(owned, step_count);
  set_step_count(step_count);
}

size_t ZeroOptimizer::state_bytes() const {
  size_t n = 0;
  for (const nn::NamedTensor& t : inner_->state()) n += t.tensor.nbytes();
  return n;
}

}  // namespace tandem::train
