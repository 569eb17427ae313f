#include "train/home/param_home.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/amp_ops.h"
#include "tandem/ops.h"

#include "train/run_builder.h"

namespace tandem::train {

void ParamHome::begin_step(double lr) {
  optimizer_->set_lr(lr);
  optimizer_->zero_grad();
}

void ParamHome::begin_micro_batch(int64_t k, int64_t count) {
  TD_CHECK(count >= 1 && k >= 0 && k < count, ErrorCode::internal, "train", "micro-batch {} of {}", k, count);
  micro_batches_ = count;
}

void ParamHome::average_micro_batches() {
  if (micro_batches_ <= 1) return;
  const float inv = static_cast<float>(1.0 / static_cast<double>(micro_batches_));
  for (nn::Parameter* p : optimizer_->params())
    if (p->requires_grad && p->grad.defined()) ops::scale_(p->grad, inv);
}

void ParamHome::clip_grad_norm(const std::vector<nn::Parameter*>& params, double max_norm, const Tensor& total_norm) {
  std::vector<Tensor> grads;
  for (nn::Parameter* p : params)
    if (p->requires_grad && p->grad.defined()) grads.push_back(p->grad);
  ops::clip_grad_norm_(grads, max_norm, total_norm);
}

void ParamHome::update() { optimizer_->step(); }

HomeCheckpoint ParamHome::checkpoint_state() {
  HomeCheckpoint out;
  out.optimizer_state = optimizer_->state();
  return out;
}

ShardState ParamHome::shard_state() {
  const HomeCheckpoint home = checkpoint_state();
  TD_CHECK(home.pending.empty() && !upload_pending(), ErrorCode::not_available, "checkpoint",
           "a sharded checkpoint with a pending delayed update: expected --offload-delay 0");
  ShardState out;
  for (const nn::NamedTensor& t : home.optimizer_state) out.replicated.push_back({"optim." + t.name, t.tensor, false});
  return out;
}

std::string ParamHome::does_not_fit(const Error& e, const std::vector<nn::NamedTensor>& state) const {
  // The master copy a pending delayed upload carries (OffloadOptimizer::state) fits only the
  // home that wrote it: say so rather than name the first tensor this optimizer does not know.
  const bool master = std::any_of(state.begin(), state.end(), [](const nn::NamedTensor& t) {
    return t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".master") == 0;
  });
  if (master)
    return "it holds a pending delayed update of the offloaded optimizer (--optimizer-device cpu --offload-delay 1), "
           "which this run would drop: expected --optimizer-device cpu";
  return fmt::format("its optimizer state does not fit this run's {}: {}", optimizer_->name(), e.what());
}

void ParamHome::restore(const std::vector<nn::NamedTensor>& state, int64_t step_count,
                        const std::vector<nn::NamedTensor>& pending) {
  if (!pending.empty())
    throw Error(ErrorCode::invalid_argument,
                "it holds a pending delayed update of streamed parameters (--param-device cpu --offload-delay 1), "
                "which this run would drop: expected --param-device cpu");
  try {
    optimizer_->load_state(state, step_count);
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument, does_not_fit(e, state));
  }
}

std::string ParamHome::dist_backend(const Run& r) const { return r.device_comm->backend(); }

std::string ParamHome::describe_dist(const Run& r) const {
  return fmt::format("gradients averaged in the offloaded optimizer's buckets (--bucket-cap-mb {}, the first {} MiB) "
                     "while backward runs",
                     r.cfg.bucket_cap_mb, std::min(1.0, r.cfg.bucket_cap_mb)) +
         (r.cfg.grad_compression != "none" ? fmt::format(", compressed as {}", r.cfg.grad_compression) : "");
}

}  // namespace tandem::train
