#include "train/dist/zero_optimizer.h"

#include <algorithm>

#include "tandem/error.h"

namespace tandem::train {

ZeroOptimizer::ZeroOptimizer(const std::string& name, std::vector<nn::Parameter*> params,
                             const optim::OptimizerOptions& options, comm::CommunicatorPtr comm)
    : Optimizer("zero", params, options.lr), comm_(std::move(comm)) {
  std::vector<int64_t> load(static_cast<size_t>(comm_->world_size()), 0);
  for (nn::Parameter* p : params) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_.push_back(r);
    load[static_cast<size_t>(r)] += p->value.numel();
    if (r != comm_->rank()) continue;
    owned_.push_back(p);
    owned_elements_ += p->value.numel();
  }
  inner_ = optim::make_optimizer(name, owned_, options);
}

void ZeroOptimizer::update_all() {
  inner_->set_lr(lr());
  inner_->step();
  const std::vector<nn::Parameter*>& ps = params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const Tensor& v = ps[i]->value;
    comm_->broadcast(v, owner_[i], runtime_for(v.device()).current_stream(v.device().index));
  }
}

void ZeroOptimizer::update(size_t, nn::Parameter&) {
  throw_error(ErrorCode::internal, "zero", "update() called: the inner optimizer updates the owned parameters");
}

size_t ZeroOptimizer::state_bytes() const {
  size_t n = 0;
  for (const nn::NamedTensor& t : inner_->state()) n += t.tensor.nbytes();
  return n;
}

}  // namespace tandem::train
