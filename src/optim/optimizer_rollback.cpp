// Optimizer::save_part / restore_part: what undoing a speculative update needs (the values,
// compute copies and state slots it overwrites), kept in host copies reused from step to step.
#include <cstring>

#include "tandem/error.h"
#include "tandem/optim/optimizer.h"

namespace tandem::optim {

namespace {

// dst (reallocated when its shape or dtype differs) = src, both host and contiguous.
void keep(Tensor& dst, const Tensor& src, const char* op, const std::string& what) {
  TD_CHECK_ARG(src.device().is_host() && src.is_contiguous(), op,
               "{}: a speculative update keeps host tensors only, found one on {}", what, src.device().str());
  if (!dst.defined() || dst.shape() != src.shape() || dst.dtype() != src.dtype())
    dst = Tensor::empty(src.shape(), src.dtype());
  if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
}

void put_back(const Tensor& dst, const Tensor& src) {
  if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
}

}  // namespace

void Optimizer::save_part(const std::vector<size_t>& indices, const std::vector<nn::Parameter*>& as) {
  TD_CHECK_ARG(as.size() == indices.size(), op_, "save_part: {} stand-ins for {} parameters", as.size(),
               indices.size());
  if (saved_.size() != params_.size()) saved_.resize(params_.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    TD_CHECK_ARG(i < params_.size(), op_, "parameter index {} out of range: expected < {}", i, params_.size());
    Saved& s = saved_[i];
    const nn::Parameter& p = *as[k];
    keep(s.value, p.value, op_, names_[i]);
    if (p.compute.defined()) keep(s.compute, p.compute, op_, names_[i]);
    s.slots.resize(state_[i].size());
    for (size_t j = 0; j < state_[i].size(); ++j) {
      s.slots[j].first = state_[i][j].first;
      keep(s.slots[j].second, state_[i][j].second, op_, names_[i] + "." + state_[i][j].first);
    }
    s.valid = true;
  }
}

void Optimizer::restore_part(const std::vector<size_t>& indices, const std::vector<nn::Parameter*>& as) {
  TD_CHECK_ARG(as.size() == indices.size(), op_, "restore_part: {} stand-ins for {} parameters", as.size(),
               indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const size_t i = indices[k];
    TD_CHECK_ARG(i < saved_.size() && saved_[i].valid, op_, "restore_part: parameter '{}' was not saved",
                 i < names_.size() ? names_[i] : std::to_string(i));
    const Saved& s = saved_[i];
    const nn::Parameter& p = *as[k];
    put_back(p.value, s.value);
    if (p.compute.defined() && s.compute.defined()) put_back(p.compute, s.compute);
    for (auto& [key, t] : state_[i]) {
      const Tensor* old = nullptr;
      for (const auto& [k2, t2] : s.slots)
        if (k2 == key) old = &t2;
      if (old) {
        put_back(t, *old);
      } else if (t.nbytes()) {  // created by the update undone: as before a first update
        std::memset(t.raw_data(), 0, t.nbytes());
      }
    }
  }
}

}  // namespace tandem::optim
