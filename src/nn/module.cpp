#include "tandem/nn/module.h"

#include <cstring>

namespace tandem::nn {

void Module::collect_parameters(const std::string&, std::vector<Parameter*>&) {}

void Module::collect_state(const std::string&, std::vector<NamedTensor>&) {}

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
    if (p->grad.defined() && p->grad.nbytes()) std::memset(p->grad.raw_data(), 0, p->grad.nbytes());
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
