// The resident home: parameters, gradients and optimizer state beside the compute; the update
// runs on the device's stream. Data parallel: a GradReducer averages the gradient buckets while
// backward runs; ZeRO-1 (a ZeroOptimizer) keeps this rank's part of the state.
#include <algorithm>

#include <fmt/format.h>

#include "train/dist/zero_optimizer.h"
#include "train/home/homes.h"
#include "train/run_builder.h"

namespace tandem::train {

namespace {

class ResidentHome final : public ParamHome {
 public:
  // `zero`: the ZeroOptimizer `optimizer` is (ZeRO-1), or null.
  ResidentHome(std::unique_ptr<optim::Optimizer> optimizer, ZeroOptimizer* zero, std::unique_ptr<GradReducer> reducer)
      : ParamHome(std::move(optimizer)), zero_(zero), reducer_(std::move(reducer)) {}

  // Data parallel: only the last micro-batch's backward reduces the (summed) gradients.
  void begin_micro_batch(int64_t k, int64_t count) override {
    ParamHome::begin_micro_batch(k, count);
    if (reducer_) reducer_->set_hold(k < count - 1);
  }

  bool gates_on_host() const override { return zero_ != nullptr; }  // every rank reads the same verdict

  void backward_done() override {
    if (reducer_) reducer_->finish();  // the last buckets; the optimizer waits for all of them
  }

  // ZeRO-1: each parameter's state comes from its owner (every rank takes part; rank 0 keeps it).
  void gather_for_checkpoint(const Stream& stream) override {
    gathered_.clear();
    if (zero_) gathered_ = zero_->gathered_state(stream);
  }
  HomeCheckpoint checkpoint_state() override {
    if (!zero_) return ParamHome::checkpoint_state();
    HomeCheckpoint out;
    out.gathered = true;
    out.optimizer_state = gathered_;
    return out;
  }

  // ZeRO-1: the state of the parameters this rank owns, whole.
  ShardState shard_state() override {
    if (!zero_) return ParamHome::shard_state();
    ShardState out;
    for (const nn::NamedTensor& t : zero_->state())
      out.owned.push_back({"optim." + t.name, 0, t.tensor.view({t.tensor.numel()})});
    return out;
  }

  std::string describe_dist(const Run& r) const override {
    const size_t n = reducer_ ? reducer_->buckets().size() : 0;
    return fmt::format("gradients averaged in {} bucket{} (--bucket-cap-mb {}, the first {} MiB) while backward runs",
                       n, n == 1 ? "" : "s", r.cfg.bucket_cap_mb, std::min(1.0, r.cfg.bucket_cap_mb)) +
           (r.cfg.grad_compression != "none" ? fmt::format(", compressed as {}", r.cfg.grad_compression) : "") +
           describe_zero(r);
  }

  HomeComm comm_figures(const Run& r) const override {
    HomeComm c;
    if (!reducer_) return c;
    c.figures = reducer_->figures();
    if (!r.device.is_host() && c.figures.steps > 0) c.hidden_share = c.figures.seconds > 0 ? c.figures.hidden_seconds / c.figures.seconds : 1.0;
    return c;
  }

 private:
  // ZeRO-1's share of the optimizer state on this rank.
  std::string describe_zero(const Run& r) const {
    if (!zero_) return "";
    int64_t total = 0;
    for (const nn::Parameter* p : r.params) total += p->value.numel();
    const double per = r.cfg.optimizer == "sgd" ? (r.cfg.momentum != 0 ? 4.0 : 0.0) : 8.0;  // state bytes per element
    return fmt::format("\nZeRO-1: this rank holds the optimizer state of {} of {} parameters ({} of {} elements, "
                       "{:.2f} of {:.2f} MiB)",
                       zero_->owned_params(), r.params.size(), zero_->owned_elements(), total,
                       per * static_cast<double>(zero_->owned_elements()) / (1 << 20),
                       per * static_cast<double>(total) / (1 << 20));
  }

  ZeroOptimizer* zero_;  // optimizer_ under ZeRO-1 (null otherwise)
  std::unique_ptr<GradReducer> reducer_;
};

}  // namespace

ParamHomePtr make_resident_home(std::unique_ptr<optim::Optimizer> optimizer, std::unique_ptr<GradReducer> reducer) {
  return std::make_unique<ResidentHome>(std::move(optimizer), nullptr, std::move(reducer));
}

ParamHomePtr make_zero1_home(std::unique_ptr<ZeroOptimizer> optimizer, std::unique_ptr<GradReducer> reducer) {
  ZeroOptimizer* zero = optimizer.get();
  return std::make_unique<ResidentHome>(std::move(optimizer), zero, std::move(reducer));
}

}  // namespace tandem::train
