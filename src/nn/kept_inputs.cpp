#include "tandem/nn/kept_inputs.h"

#include <algorithm>

#include "tandem/error.h"

namespace tandem::nn {

KeptInputs::KeptInputs(MoveFn to_host, MoveFn to_device)
    : to_host_(std::move(to_host)), to_device_(std::move(to_device)) {
  TD_CHECK_ARG(to_host_ && to_device_, "KeptInputs", "expected both move functions");
}

void KeptInputs::put(const void* owner, const Tensor& x) {
  auto stale = std::find_if(away_.begin(), away_.end(), [owner](const auto& e) { return e.first == owner; });
  if (stale != away_.end()) away_.erase(stale);
  if (ahead_owner_ == owner) ahead_owner_ = nullptr, ahead_ = Tensor();
  away_.emplace_back(owner, to_host_(x));
}

Tensor KeptInputs::take(const void* owner) {
  auto it = std::find_if(away_.rbegin(), away_.rend(), [owner](const auto& e) { return e.first == owner; });
  TD_CHECK_ARG(it != away_.rend(), "KeptInputs", "no input kept for this block: backward without a training forward");
  Tensor x = ahead_owner_ == owner ? std::move(ahead_) : to_device_(it->second);
  ahead_owner_ = nullptr, ahead_ = Tensor();
  auto pos = std::next(it).base();  // the forward iterator of the same element
  const auto index = pos - away_.begin();
  away_.erase(pos);
  if (index > 0) {  // the block before this one runs its backward next: its input comes back now
    ahead_owner_ = away_[static_cast<size_t>(index - 1)].first;
    ahead_ = to_device_(away_[static_cast<size_t>(index - 1)].second);
  }
  return x;
}

}  // namespace tandem::nn
