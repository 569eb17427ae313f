#include "tandem/serve/weights_slot.h"

#include "tandem/error.h"

namespace tandem::serve {

namespace {

class HostWeights final : public train::WeightCopy {
 public:
  explicit HostWeights(NamedTensors t) : tensors_(std::move(t)) {}
  void wait() const override {}
  const NamedTensors& tensors() const override { return tensors_; }

 private:
  NamedTensors tensors_;
};

}  // namespace

std::shared_ptr<const train::WeightCopy> host_weights(NamedTensors tensors) {
  return std::make_shared<HostWeights>(std::move(tensors));
}

void WeightsSlot::publish(std::shared_ptr<const ServedWeights> w) {
  TD_CHECK_ARG(w && w->weights, "serve", "publish needs weights");
  std::lock_guard<std::mutex> lock(mu_);
  TD_CHECK_ARG(!current_ || w->version >= current_->version, "serve",
               "version {} published after version {}: expected versions that do not go back", w->version,
               current_->version);
  current_ = std::move(w);
  ++publishes_;
}

std::shared_ptr<const ServedWeights> WeightsSlot::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

int64_t WeightsSlot::publishes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return publishes_;
}

}  // namespace tandem::serve
