#include "train/split/split_runner.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "tandem/amp_ops.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"
#include "tandem/stream_clock.h"

namespace tandem::train {

namespace {

// An event the host completes: accelerators start a step's parts only once the host has issued
// all of them, so a part's stamps time the device's work, not the host's issuing (which on a
// loaded machine can be slower than the device).
class HostGate final : public EventImpl {
 public:
  bool query() const override { return open_.load(std::memory_order_acquire); }
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return query(); });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
  }

 private:
  std::atomic<bool> open_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace

struct SplitRunner::Replica {
  Device device;
  nn::ModulePtr model;
  std::vector<nn::Parameter*> params;
  std::vector<Tensor> buffers;  // f32 state that is not a parameter (BatchNorm running statistics)
  nn::CrossEntropyLoss loss;
  Stream compute, copy;
  Tensor metrics;  // [4] f32: the replica's own accumulator (replicas 1..)
  Tensor scaler_state;  // [4] f32: the loss scaler's state, sent with the weights (replicas 1..)
  Tensor scaled_grad;   // the scaled loss gradient in the compute dtype, reused
  Event synced;    // the last broadcast of replica 0's weights into this one
  std::string name;
};

static std::vector<Tensor> float_buffers(nn::Module& m) {
  std::vector<Tensor> out;
  for (const nn::NamedTensor& t : m.state_dict())
    if (!t.is_parameter && t.tensor.dtype() == DType::f32) out.push_back(t.tensor);
  return out;
}

SplitRunner::SplitRunner(const SplitPlan& plan, nn::ModulePtr model, const std::function<nn::ModulePtr()>& make_replica,
                         float label_smoothing, int64_t batch_size, const optim::LossScaler* scaler)
    : automatic_(plan.automatic), batch_size_(batch_size), scaler_(scaler) {
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    auto rep = std::make_unique<Replica>();
    rep->device = plan.devices[d].device;
    rep->name = rep->device.str();
    rep->model = d == 0 ? model : make_replica();
    if (d > 0 && !rep->device.is_host()) rep->model->to(rep->device);
    rep->params = rep->model->parameters();
    rep->buffers = float_buffers(*rep->model);
    rep->loss = nn::CrossEntropyLoss(label_smoothing);
    Runtime& rt = rep->device.is_host() ? runtime(DeviceKind::cpu) : runtime_for(rep->device);
    rep->compute = rt.current_stream(rep->device.index);
    rep->copy = rep->device.is_host() ? rep->compute : rt.new_stream(rep->device.index);
    if (!rep->device.is_host()) rep->copy.set_label("split h2d copies");
    if (d > 0) {
      rep->metrics = Tensor::empty({4}, DType::f32, rep->device);
      ops::zero_(rep->metrics);
      if (scaler_) rep->scaler_state = Tensor::empty({4}, DType::f32, rep->device);
    }
    replicas_.push_back(std::move(rep));
  }
  for (size_t d = 0; d < replicas_.size(); ++d)
    if (!replicas_[d]->device.is_host()) order_.push_back(d);
  for (size_t d = 0; d < replicas_.size(); ++d)
    if (replicas_[d]->device.is_host()) order_.push_back(d);
  std::vector<std::string> names;
  for (const auto& rep : replicas_) names.push_back(rep->name);
  const std::vector<double> equal(replicas_.size(), 1.0);
  if (automatic_) {
    balancer_ = std::make_unique<SplitBalancer>(partition_at_least_one(batch_size, equal));
  } else {
    parts_ = partition_batch(batch_size, plan.weights, names);
  }
  epoch_samples_.assign(replicas_.size(), 0);
  epoch_busy_.assign(replicas_.size(), 0.0);
  broadcast();  // replica 0's weights (e.g. loaded by --init) to the others before the first step
}

SplitRunner::~SplitRunner() {
  try {
    end_epoch();
  } catch (...) {
    // A failed step's error is the one reported; its queued work has run by now.
  }
  for (const auto& rep : replicas_)
    if (!rep->device.is_host()) {
      try {
        rep->compute.synchronize();
        rep->copy.synchronize();
      } catch (...) {
      }
    }
}

void SplitRunner::attach(data::Loader& loader) { loader.set_consumer_slots(kSplitLead + 3); }

void SplitRunner::begin_epoch() {
  epoch_samples_.assign(replicas_.size(), 0);
  epoch_busy_.assign(replicas_.size(), 0.0);
}

// Moves the current batch (if any) to the held ones, with the copies that read it.
void SplitRunner::retire_current() {
  batch_.clear();
  if (current_.valid()) held_.push_back({std::move(current_), std::move(current_copies_)});
  current_ = data::Batch();
  current_copies_.clear();
}

bool SplitRunner::next(data::Loader& loader) {
  retire_current();
  release_slots(false);
  while (static_cast<int>(held_.size()) > kSplitLead + 1) release_slots(true);
  if (!loader.next(current_)) return false;
  batch_ = data::FieldBatch(loader.fields(), current_.fields);
  return true;
}

int64_t SplitRunner::batch_samples() const { return current_.size(); }

void SplitRunner::release_slots(bool wait_oldest) {
  if (wait_oldest && !held_.empty()) {
    profile::ScopedSpan span(profile::Stage::wait_device, "wait for split copies");
    for (const Event& e : held_.front().copies) e.synchronize();
  }
  while (!held_.empty() && std::all_of(held_.front().copies.begin(), held_.front().copies.end(),
                                       [](const Event& e) { return e.query(); }))
    held_.pop_front();
}

bool SplitRunner::has_cpu() const {
  return std::any_of(replicas_.begin(), replicas_.end(), [](const auto& r) { return r->device.is_host(); });
}

Stream SplitRunner::compute_stream() const { return replicas_[0]->compute; }

// A host function on `stream` that stamps the time it ran: the end of the work before it.
// The device's own busy clock where it keeps one (virt: modelled time, so the split follows
// the modelled speeds exactly), else the host clock when the work before the stamp has run.
std::shared_ptr<SplitRunner::Stamp> SplitRunner::stamp(const Stream& stream) {
  auto s = std::make_shared<Stamp>();
  stream.enqueue_host([s, stream] {
    const double busy = stream_busy_seconds(stream);
    s->ns.store(std::isfinite(busy) ? static_cast<int64_t>(busy * 1e9) : profile::now_ns(), std::memory_order_release);
  });
  return s;
}

void SplitRunner::run_part(Replica& rep, size_t d, int64_t n, int64_t offset, Timing& t) {
  if (d > 0 && micro_ == 0) {  // the step's first micro-batch: the weights sent, the sums restarted
    if (rep.device.is_host()) {
      profile::ScopedSpan span(profile::Stage::wait_device, "wait for split weights");
      rep.synced.synchronize();  // the cpu replica computes on this thread
    } else {
      rep.compute.wait(rep.synced);
    }
    rep.model->zero_grad();
    ops::zero_(rep.metrics);
  }
  // The device's part of the fields the step uses: the input (images) and the target (labels).
  const Tensor& input = batch_.get(data::FieldRole::input);
  const Tensor& target = batch_.get(data::FieldRole::target);
  Tensor x = input.narrow(0, offset, n), y = target.narrow(0, offset, n);
  if (!rep.device.is_host()) {
    profile::ScopedSpan span(profile::Stage::h2d, "split h2d");
    x = x.to(rep.device, rep.copy);
    y = y.to(rep.device, rep.copy);
    const Event copied = rep.copy.record();
    rep.compute.wait(copied);
    for (const Tensor* h : {&input, &target})
      if (pinned_allocator().owns(h->storage()->data())) record_pinned_use(*h, copied);
    current_copies_.push_back(copied);
  }
  if (!rep.device.is_host()) rep.compute.wait(gate_);
  t.begin[d].push_back(stamp(rep.compute));
  const Tensor& metrics = d == 0 ? metrics_ : rep.metrics;
  if (rep.model->fuses_loss()) {  // a language model: fused classifier + cross-entropy, scaled in the op
    {
      profile::ScopedSpan span(profile::Stage::forward, "forward");
      rep.model->loss_forward(x, y, metrics, !scaler_ ? Tensor() : d == 0 ? scaler_->state() : rep.scaler_state);
    }
    profile::ScopedSpan span(profile::Stage::backward, "backward");
    rep.model->loss_backward();
  } else {
    run_image_part(rep, x, y, metrics, d);
  }
  if (grad_hook_) grad_hook_(d, rep.params);
  t.end[d].push_back(stamp(rep.compute));
  t.done[d] = rep.compute.record();
}

// Forward, the loss into `metrics` and backward of a model whose logits leave it (the loss
// scaler's state: replica 0's own, the others' copies).
void SplitRunner::run_image_part(Replica& rep, const Tensor& x, const Tensor& y, const Tensor& metrics, size_t d) {
  DType logits_dtype = DType::f32;
  {
    profile::ScopedSpan span(profile::Stage::forward, "forward");
    Tensor logits = rep.model->forward(x);
    logits_dtype = logits.dtype();
    rep.loss.forward_accumulate(logits, y, metrics);
  }
  {
    profile::ScopedSpan span(profile::Stage::backward, "backward");
    if (scaler_) {
      const Tensor g32 = rep.loss.backward_f32();
      if (!rep.scaled_grad.defined() || rep.scaled_grad.shape() != g32.shape())
        rep.scaled_grad = Tensor::empty(g32.shape(), logits_dtype, rep.device);
      ops::amp_scale(g32, d == 0 ? scaler_->state() : rep.scaler_state, rep.scaled_grad);
      rep.model->backward(rep.scaled_grad);
    } else {
      rep.model->backward(rep.loss.backward());
    }
  }
}

void SplitRunner::combine(const Timing& t, const Tensor& metrics) {
  Replica& r0 = *replicas_[0];
  const double total = static_cast<double>(std::accumulate(t.samples.begin(), t.samples.end(), int64_t{0}));
  profile::ScopedSpan span(profile::Stage::optimizer, "combine gradients");
  for (nn::Parameter* p : r0.params) ops::scale_(p->grad, static_cast<float>(static_cast<double>(t.samples[0]) / total));
  for (size_t d = 1; d < replicas_.size(); ++d) {
    Replica& rep = *replicas_[d];
    const float w = static_cast<float>(static_cast<double>(t.samples[d]) / total);
    std::vector<Tensor> grads;
    Tensor m;
    if (!r0.device.is_host()) {
      // On the first device's stream, after the replica's backward (device-side wait).
      r0.compute.wait(t.done[d]);
      for (nn::Parameter* p : rep.params) grads.push_back(p->grad.to(r0.device, r0.compute));
      m = rep.metrics.to(r0.device, r0.compute);
    } else {
      // The optimizer runs on this thread: it waits for the replica's gradients.
      rep.copy.wait(t.done[d]);
      for (nn::Parameter* p : rep.params) grads.push_back(p->grad.to(r0.device, rep.copy));
      m = rep.metrics.to(r0.device, rep.copy);
      profile::ScopedSpan wait(profile::Stage::wait_device, "wait for split gradients");
      rep.copy.record().synchronize();
    }
    for (size_t i = 0; i < grads.size(); ++i) ops::add_(r0.params[i]->grad, grads[i], w);
    ops::add_(metrics, m);
  }
}

void SplitRunner::broadcast() {
  Replica& r0 = *replicas_[0];
  for (size_t d = 1; d < replicas_.size(); ++d) {
    Replica& rep = *replicas_[d];
    // Ordered after the optimizer: on its stream, or (cpu optimizer, which has run) the replica's copy stream.
    const Stream& s = r0.device.is_host() ? rep.copy : r0.compute;
    Runtime& rt = runtime_for(r0.device.is_host() ? rep.device : r0.device);
    auto send = [&](const Tensor& src, const Tensor& dst) {
      rt.copy_async(dst.raw_data(), rep.device, src.raw_data(), r0.device, src.nbytes(), s);
    };
    for (size_t i = 0; i < rep.params.size(); ++i) {
      send(r0.params[i]->value, rep.params[i]->value);
      // The low-precision copy the optimizer rewrote (mixed precision): the replica's forward reads it.
      if (r0.params[i]->compute.defined()) send(r0.params[i]->compute, rep.params[i]->compute);
    }
    if (scaler_) send(scaler_->state(), rep.scaler_state);
    for (size_t i = 0; i < rep.buffers.size(); ++i) send(r0.buffers[i], rep.buffers[i]);
    rep.synced = s.record();
    for (nn::Parameter* p : rep.params) p->value.storage()->set_pending_write(rep.synced);
    for (const Tensor& b : rep.buffers) b.storage()->set_pending_write(rep.synced);
    for (nn::Parameter* p : rep.params)
      if (p->compute.defined()) p->compute.storage()->set_pending_write(rep.synced);
    if (scaler_) rep.scaler_state.storage()->set_pending_write(rep.synced);
  }
}

void SplitRunner::begin_step(optim::Optimizer& optimizer, double lr, const Tensor& metrics) {
  step_parts_ = automatic_ ? balancer_->parts() : parts_;
  const size_t n = replicas_.size();
  step_ = Timing();
  step_.samples.assign(n, 0);
  step_.begin.resize(n);
  step_.end.resize(n);
  step_.done.resize(n);
  micro_ = 0;
  optimizer.set_lr(lr);
  Replica& r0 = *replicas_[0];
  if (r0.device.is_host())  // replica 0's buffers and weights are still being sent to the others
    for (size_t d = 1; d < replicas_.size(); ++d) replicas_[d]->synced.synchronize();
  optimizer.zero_grad();
  metrics_ = metrics;
}

void SplitRunner::micro_batch() {
  const int64_t n = batch_samples();
  std::vector<int64_t> parts = step_parts_;
  if (n != batch_size_) {  // a short batch: the same proportions
    const std::vector<double> w(parts.begin(), parts.end());
    parts = partition_at_least_one(n, w);
  }
  std::vector<int64_t> offsets(parts.size(), 0);
  for (size_t d = 1; d < parts.size(); ++d) offsets[d] = offsets[d - 1] + parts[d - 1];
  auto gate = std::make_shared<HostGate>();
  gate_ = Event(gate);
  for (size_t d : order_) {
    if (replicas_[d]->device.is_host()) gate->open();  // the accelerators' parts are all issued
    run_part(*replicas_[d], d, parts[d], offsets[d], step_);
    step_.samples[d] += parts[d];
  }
  gate->open();
  gate_ = Event();
  ++micro_;
}

void SplitRunner::finish_step(const std::function<void()>& update) {
  TD_CHECK(micro_ > 0, ErrorCode::internal, "split", "finish_step() without a micro-batch");
  const Tensor metrics = metrics_;
  metrics_ = Tensor();
  combine(step_, metrics);
  {
    profile::ScopedSpan span(profile::Stage::optimizer, "optimizer");
    update();
  }
  broadcast();
  history_.push_back(step_.samples);
  timings_.push_back(std::move(step_));
  step_ = Timing();
  micro_ = 0;
  fold_timings(false);
}

void SplitRunner::fold_timings(bool wait_all) {
  while (!timings_.empty()) {
    Timing& t = timings_.front();
    const bool ready = std::all_of(t.done.begin(), t.done.end(), [](const Event& e) { return e.query(); });
    if (!ready) {
      if (!wait_all && static_cast<int>(timings_.size()) <= kSplitLead) return;
      profile::ScopedSpan span(profile::Stage::wait_device, "wait for split timings");
      for (const Event& e : t.done) e.synchronize();
    }
    std::vector<double> seconds(t.samples.size(), 0.0);
    for (size_t d = 0; d < seconds.size(); ++d) {
      for (size_t k = 0; k < t.begin[d].size() && k < t.end[d].size(); ++k) {  // the busy time of each micro-batch
        const int64_t b = t.begin[d][k]->ns.load(std::memory_order_acquire);
        const int64_t e = t.end[d][k]->ns.load(std::memory_order_acquire);
        if (b >= 0 && e >= b) seconds[d] += static_cast<double>(e - b) * 1e-9;
      }
      epoch_busy_[d] += seconds[d];
      epoch_samples_[d] += t.samples[d];
    }
    if (balancer_) balancer_->observe(t.samples, seconds);
    timings_.pop_front();
  }
}

void SplitRunner::end_epoch() {
  fold_timings(true);
  retire_current();
  while (!held_.empty()) release_slots(true);
}

std::vector<DeviceShare> SplitRunner::epoch_shares(double epoch_seconds) const {
  const double total = static_cast<double>(std::accumulate(epoch_samples_.begin(), epoch_samples_.end(), int64_t{0}));
  std::vector<DeviceShare> out;
  for (size_t d = 0; d < replicas_.size(); ++d) {
    DeviceShare s;
    s.device = replicas_[d]->name;
    s.samples = epoch_samples_[d];
    s.sample_share = total > 0 ? static_cast<double>(epoch_samples_[d]) / total : 0;
    s.busy_seconds = epoch_busy_[d];
    s.busy_share = epoch_seconds > 0 ? std::min(1.0, epoch_busy_[d] / epoch_seconds) : 0;
    out.push_back(s);
  }
  return out;
}

std::string SplitRunner::describe() const {
  std::string names;
  for (const auto& rep : replicas_) names += (names.empty() ? "" : " + ") + rep->name;
  std::string how;
  if (automatic_) {
    how = "parts by measured speed (--split auto, starting equal)";
  } else {
    std::string p;
    for (int64_t v : parts_) p += (p.empty() ? "" : " + ") + std::to_string(v);
    how = fmt::format("fixed parts {} of each batch", p);
  }
  // Per-device batch statistics matter only to a model with BatchNorm buffers.
  const bool batch_norm = !replicas_[0]->buffers.empty();
  return fmt::format("split: a replica on each of {}, {}; gradients combined on {} weighted by samples, one "
                     "optimizer there, weights sent to the others each step{}",
                     names, how, replicas_[0]->name,
                     batch_norm ? "; BatchNorm statistics per device (no SyncBatchNorm)" : "");
}

}  // namespace tandem::train
