#include "train/place/param_stream.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"

// ParamStreamer's host updates: the hooks of its HostUpdatePipeline (tandem/optim/
// host_update_pipeline.h: the thread, the delay rule, the per-part bookkeeping and the waits),
// the delayed update's copies and (--zero 3) the collectives the thread issues for the streamer.
namespace tandem::train {

void ParamStreamer::set_host_update(optim::Optimizer* opt, int delay, int64_t delay_warmup, bool transient_grads) {
  TD_CHECK_ARG(delay == 0 || delay == 1, "train", "--offload-delay: expected 0 or 1, got {}", delay);
  TD_CHECK_ARG(delay_warmup >= 0, "train", "--offload-delay-warmup: expected steps >= 0, got {}", delay_warmup);
  TD_CHECK_ARG(delay == 0 || !opt || resident_elements_ == 0, "train",
               "--optimizer-split with --offload-delay 1: not supported (the device's parts would be updated "
               "a step ahead of the host's); expected --offload-delay 0");
  stop_updates();
  opt_ = nullptr;
  indices_.clear();
  device_indices_.clear();
  delay_copy_bytes_ = 0;
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
    part(p).shadows.clear();
    for (Entry& e : part(p).entries) e.upload[0] = e.upload[1] = Tensor();
  }
  if (!opt) return;
  std::unordered_map<const nn::Parameter*, size_t> index;
  for (size_t i = 0; i < opt->params().size(); ++i) index[opt->params()[i]] = i;
  indices_.resize(blocks_.size() + 1);
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
    if (shards_) {  // --zero 3: the optimizer holds this rank's pieces
      for (const nn::Parameter* q : shards_->pieces(part(p).shard)) {
        const auto it = index.find(q);
        TD_CHECK_ARG(it != index.end(), "train", "--zero 3: the optimizer does not hold shard piece {}", q->name);
        indices_[slot_of(p)].push_back(it->second);
      }
      continue;
    }
    for (const Entry& e : part(p).entries) {
      const auto it = index.find(e.param);
      TD_CHECK_ARG(it != index.end(), "train", "--param-device cpu: the optimizer does not hold parameter {}",
                   e.param->name);
      indices_[slot_of(p)].push_back(it->second);
    }
  }
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
    for (const nn::Parameter* q : part(p).resident) {
      const auto it = index.find(q);
      TD_CHECK_ARG(it != index.end(), "train", "--param-device cpu: the optimizer does not hold parameter {}", q->name);
      device_indices_.push_back(it->second);
    }
  // --zero 3: the gradient shards in one slab that each part's update consumes, or kept per
  // part where they outlive it (the held updates of the checks, the delay).
  if (shards_) shards_->bind_grads(transient_grads && delay == 0);
  if (delay == 1 && shards_) {  // --zero 3: the copies of this rank's shards (ShardedHomes::enable_delay)
    delay_copy_bytes_ = shards_->enable_delay();
  } else if (delay == 1) {
    ensure_grad_homes();  // the next step's update reads them
    for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
      for (Entry& e : part(p).entries) {
        // Two copies of what the op reads, which the update rewrites while this step's uploads
        // go on: the compute copy rounded from the value, or the f32 value.
        for (Tensor& u : e.upload) {
          if (e.upload_compute) {
            u = pinned_empty(e.home_value.shape(), e.up_dtype);
            round_value(e, u.raw_data());
          } else {
            u = pinned_copy(e.home_value);
          }
          delay_copy_bytes_ += static_cast<int64_t>(u.nbytes());
        }
        e.shadow = *e.param;
        e.shadow.value = e.home_value;
        e.shadow.grad = e.home_grad;
        e.shadow.compute = Tensor();
        part(p).shadows.push_back(&e.shadow);
      }
  }
  read_ = next_read_ = write_ = 0;
  write_chosen_ = false;
  opt_ = opt;
  slabs_ = transient_grads;
  update_stage_.assign(blocks_.size() + 1, nullptr);
  optim::HostUpdateOptions options;
  options.thread_name = "host update";
  options.units = static_cast<int>(blocks_.size() + 1);
  options.delay = delay;
  options.delay_warmup_steps = delay_warmup;
  options.keep_errors = false;  // an update's error ends its step; the next step runs again
  optim::HostUpdateHooks hooks;
  hooks.update = [this](const optim::HostUpdate& u) { host_update(u); };
  pipeline_ = std::make_unique<optim::HostUpdatePipeline>(std::move(options), std::move(hooks));
}

void ParamStreamer::stop_updates() noexcept {
  if (!pipeline_) return;
  pipeline_->stop();  // the queued jobs skip their work
  pipeline_.reset();
}

void ParamStreamer::queue_update(int p, Event grads_home, const ShardStage* stage) {
  update_stage_[slot_of(p)] = stage;
  pipeline_->queue(optim::HostUpdate{static_cast<int>(slot_of(p)), opt_->step_count() + 1, opt_->lr(), write_,
                                     std::move(grads_home)});
}

void ParamStreamer::wait_updated(int p) {
  if (opt_) pipeline_->wait_unit(static_cast<int>(slot_of(p)), "wait for the host update");
}

void ParamStreamer::host_update(const optim::HostUpdate& u) {
  const int p = part_of(u.unit);
  if (shards_) {  // --zero 3: the ranks' mean into this rank's shard first
    profile::ScopedSpan span(profile::Stage::comm,
                             p == nn::kOuterPart ? "reduce-scatter: outer" : "reduce-scatter: block");
    const int64_t t0 = profile::now_ns();
    shards_->reduce_grads(part(p).shard, *update_stage_[static_cast<size_t>(u.unit)]);
    std::lock_guard<std::mutex> lock(figures_mu_);
    comm_figures_.seconds += 1e-9 * static_cast<double>(profile::now_ns() - t0);
    comm_figures_.bytes += static_cast<double>(shards_->reduce_bytes(part(p).shard));
  }
  if (reduce_) reduce_unit(u.unit);  // data parallel: the ranks' mean, before the update and the checks
  if (hold_) return;  // clipping: the caller updates once every shard's gradients are in
  profile::ScopedSpan span(profile::Stage::optimizer, p == nn::kOuterPart ? "host update: outer" : "host update: block");
  if (checked()) {  // not sharded (set_checks)
    update_unit(u);
  } else if (delay() && shards_) {  // the shards' stand-ins write upload copy u.slot, which the gathers do not read now
    opt_->update_part(indices_[static_cast<size_t>(u.unit)], u.lr, shards_->stand_ins(part(p).shard, u.slot));
    shards_->publish(part(p).shard, u.slot);
  } else if (delay()) {  // on the stand-ins: the training thread may be pointing the parameters elsewhere
    Part& pt = part(p);
    for (Entry& e : pt.entries) e.shadow.compute = e.upload_compute ? e.upload[u.slot] : Tensor();
    opt_->update_part(indices_[static_cast<size_t>(u.unit)], u.lr, pt.shadows);
    for (Entry& e : pt.entries)
      if (!e.upload_compute) e.upload[u.slot].copy_from(e.home_value);
  } else {
    disk_acquire(u.unit);  // the disk tier: the part's master values and state back from disk
    opt_->update_part(indices_[static_cast<size_t>(u.unit)]);
    disk_release(u.unit);
  }
}

std::vector<std::vector<ParamStreamer::ReduceBucket>> ParamStreamer::plan_reduce() const {
  std::vector<std::vector<ReduceBucket>> plan(blocks_.size() + 1);
  int index = 0;  // the backward's order: blocks L - 1 .. 0, then the outer part
  for (int p = static_cast<int>(blocks_.size()) - 1; p >= nn::kOuterPart; --p) {
    const std::vector<Entry>& entries = (p == nn::kOuterPart ? outer_ : blocks_[static_cast<size_t>(p)]).entries;
    std::vector<ReduceBucket>& unit = plan[slot_of(p)];
    ReduceBucket small;
    small.packed = true;
    for (size_t k = 0; k < entries.size(); ++k) {
      const int64_t n = entries[k].home_value.numel();
      if (4 * n >= kReduceInPlaceBytes) {
        unit.push_back(ReduceBucket{index++, {k}, false, n});
      } else {
        small.entries.push_back(k);
        small.numel += n;
      }
    }
    if (!small.entries.empty()) {
      small.index = index++;
      unit.push_back(std::move(small));
    }
  }
  return plan;
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> ParamStreamer::grad_reduce_buckets() const {
  const std::vector<std::vector<ReduceBucket>> plan = plan_reduce();
  size_t buckets = 0;
  for (const std::vector<ReduceBucket>& unit : plan) buckets += unit.size();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> out(buckets);
  for (size_t unit = 0; unit < plan.size(); ++unit) {
    const int p = part_of(static_cast<int>(unit));
    const std::vector<Entry>& entries = (p == nn::kOuterPart ? outer_ : blocks_[static_cast<size_t>(p)]).entries;
    for (const ReduceBucket& b : plan[unit]) {
      int64_t off = 0;
      for (size_t k : b.entries) {
        const int64_t n = entries[k].home_value.numel();
        out[static_cast<size_t>(b.index)].emplace_back(off, n);
        off += n;
      }
    }
  }
  return out;
}

void ParamStreamer::set_grad_reduce(GradReduce reduce) {
  TD_CHECK_ARG(!reduce || (!shards_ && resident_elements_ == 0), "train",
               "--param-device cpu under mpirun: the host all-reduce of whole gradients is not with --zero 3 (its "
               "shards reduce-scatter) or --optimizer-split (the device's parts keep their gradients there)");
  TD_CHECK_ARG(!pipeline_ || pipeline_->in_flight() == 0, "train", "set_grad_reduce between steps only");
  reduce_buckets_ = plan_reduce();
  int64_t pack = 0;
  for (const std::vector<ReduceBucket>& unit : reduce_buckets_)
    for (const ReduceBucket& b : unit)
      if (b.packed) pack = std::max(pack, b.numel);
  reduce_pack_ = pack > 0 && reduce ? Tensor::empty({pack}, DType::f32) : Tensor();
  reduce_ = std::move(reduce);
}

void ParamStreamer::reduce_unit(int unit) {
  const Part& pt = part(part_of(unit));
  for (const ReduceBucket& b : reduce_buckets_[static_cast<size_t>(unit)]) {
    if (!b.packed) {  // a large gradient in its home
      reduce_(b.index, pt.entries[b.entries[0]].home_grad);
      continue;
    }
    float* pack = reduce_pack_.data<float>();
    int64_t off = 0;
    for (size_t k : b.entries) {
      const Tensor& g = pt.entries[k].home_grad;
      std::memcpy(pack + off, g.raw_data(), g.nbytes());
      off += g.numel();
    }
    reduce_(b.index, reduce_pack_.narrow(0, 0, b.numel));
    off = 0;
    for (size_t k : b.entries) {
      const Tensor& g = pt.entries[k].home_grad;
      std::memcpy(g.raw_data(), pack + off, g.nbytes());
      off += g.numel();
    }
  }
}

void ParamStreamer::set_checks(double clip, const optim::LossScaler* scaler, bool speculate) {
  TD_CHECK_ARG(clip == 0 || opt_, "train", "--clip-grad-norm with --param-device cpu: expected the host update");
  TD_CHECK_ARG(!checked() || pipeline_->in_flight() == 0, "train", "set_checks between steps only");
  TD_CHECK_ARG((clip == 0 && !scaler) || (!shards_ && resident_elements_ == 0), "train",
               "--clip-grad-norm and loss scaling with --param-device cpu: not with --zero 3 or --optimizer-split "
               "(no rank or side holds every gradient)");
  // The checks read the blocks' gradients after the backward: homes of their own, not slabs.
  if (clip > 0 || scaler) ensure_grad_homes();
  clip_ = clip;
  scaler_ = scaler;
  speculate_ = speculate;
  check_threads_ = ops::get_num_threads();  // the norm's reduction splits as the device op's
  found_.assign(blocks_.size() + 1, 0);
  std::vector<Tensor> by_index(opt_ ? opt_->params().size() : 0);
  for (size_t unit = 0; unit < indices_.size(); ++unit) {
    const Part& pt = part(part_of(static_cast<int>(unit)));
    for (size_t k = 0; k < pt.entries.size() && k < indices_[unit].size(); ++k)
      by_index[indices_[unit][k]] = pt.entries[k].home_grad;
  }
  check_grads_.clear();
  for (const Tensor& g : by_index)
    if (g.defined()) check_grads_.push_back(g);
}

std::vector<nn::Parameter*> ParamStreamer::stand_ins(int unit, int slot) {
  if (!delay()) {
    std::vector<nn::Parameter*> out;
    for (size_t i : indices_[static_cast<size_t>(unit)]) out.push_back(opt_->params()[i]);
    return out;
  }
  Part& pt = part(part_of(unit));
  for (Entry& e : pt.entries) e.shadow.compute = e.upload_compute ? e.upload[slot] : Tensor();
  return pt.shadows;
}

// With checks: the host unscale and inf/NaN check of the part's gradients, then (speculative)
// its update, keeping what it overwrites.
void ParamStreamer::update_unit(const optim::HostUpdate& u) {
  Part& pt = part(part_of(u.unit));
  if (scaler_) {  // amp_unscale_check_'s maths on the host's gradients
    bool bad = false;
    for (Entry& e : pt.entries)
      bad = optim::unscale_check_host(e.home_grad.data<float>(), e.home_grad.numel(), scaler_->host_scale()) || bad;
    found_[static_cast<size_t>(u.unit)] = bad ? 1 : 0;
  }
  if (!speculate_) return;  // check_step updates
  const std::vector<size_t>& idx = indices_[static_cast<size_t>(u.unit)];
  const std::vector<nn::Parameter*> as = stand_ins(u.unit, u.slot);
  opt_->save_part(idx, as);
  opt_->update_part(idx, u.lr, as);
  if (delay())
    for (Entry& e : pt.entries)
      if (!e.upload_compute) e.upload[u.slot].copy_from(e.home_value);
}

// The update thread, after the step's parts: the checks; a skipped step's parts restored, a
// clipped one's restored and updated again from the clipped gradients (or, not speculative,
// the updates themselves).
std::vector<int> ParamStreamer::check_step(int slot, double lr) {
  // The host update's work too (the profile's host optimizer time): the norm and any rollback.
  profile::ScopedSpan span(profile::Stage::optimizer, "host update: check");
  bool inf = false;
  for (char& f : found_) {
    inf = inf || f != 0;
    f = 0;
  }
  bool bites = false;
  if (!inf && clip_ > 0) {
    const int threads = ops::get_num_threads();
    ops::set_num_threads(check_threads_);
    Tensor norm = Tensor::empty({1});
    ops::clip_grad_norm_(check_grads_, clip_, norm);
    ops::set_num_threads(threads);
    bites = static_cast<float>(clip_) / (norm.data<float>()[0] + 1e-6f) < 1.0f;  // it scaled the gradients
  }
  skipped_ = inf;
  if (speculate_ && !inf && !bites) return {};  // the speculative updates stand
  for (size_t unit = 0; unit < indices_.size(); ++unit) {
    const std::vector<size_t>& idx = indices_[unit];
    const std::vector<nn::Parameter*> as = stand_ins(static_cast<int>(unit), slot);
    if (speculate_) opt_->restore_part(idx, as);
    if (!inf) opt_->update_part(idx, lr, as);
    if (!delay()) continue;
    // The upload copy of the update: a skipped one's are the last update's (the values stand).
    for (Entry& e : part(part_of(static_cast<int>(unit))).entries)
      if (!e.upload_compute) {
        e.upload[slot].copy_from(e.home_value);
      } else if (inf) {
        e.upload[slot].copy_from(e.upload[slot ^ 1]);
      }
  }
  return {};
}

void ParamStreamer::wait_all_updates() { pipeline_->wait_updates("host update: wait"); }

ParamStreamer::ShardComm ParamStreamer::shard_comm() const {
  std::lock_guard<std::mutex> lock(figures_mu_);
  return comm_figures_;
}

void ParamStreamer::finish_updates() {
  if (shards_) {
    std::lock_guard<std::mutex> lock(figures_mu_);
    ++comm_figures_.steps;
  }
  // The pipeline's delay rule: a deferred update keeps running into the next step, else the
  // step waits for every part's update; both rethrow an update's error.
  const int64_t step = opt_->step_count() + 1;
  if (checked()) {  // after the step's parts, on the update thread; the scaler needs the verdict now
    pipeline_->queue_check([this, slot = write_, lr = opt_->lr()] { return check_step(slot, lr); }, step);
    if (scaler_) pipeline_->wait_updates("host update: wait for the checks");
  }
  const bool counted = !(scaler_ && skipped_);  // a skipped step is not one of the optimizer's
  write_chosen_ = false;
  pipeline_->finish_step(step, "host update: wait");
  if (pipeline_->delay_of(step) == 1) {
    if (counted) opt_->finish_parts();
    next_read_ = write_ ^ 1;  // the previous update's copy: this one is still running
    return;
  }
  // --optimizer-split: the device's parts, on the compute stream (their gradients are final
  // once the backward is enqueued); ordered after the host updates by this thread.
  if (!device_indices_.empty()) {
    profile::ScopedSpan span(profile::Stage::optimizer, "device update: split");
    opt_->update_part(device_indices_);
  }
  if (counted) opt_->finish_parts();
  next_read_ = write_;
}

void ParamStreamer::set_hold_updates(bool hold) {
  TD_CHECK_ARG(!hold || (shards_ && opt_ && delay() == 0), "train",
               "holding the host updates: expected --zero 3 with host updates and no --offload-delay");
  if (hold && !hold_) shards_->bind_grads(false);  // the held updates read every part's shard after the backward
  hold_ = hold;
}

void ParamStreamer::finish_reductions() {
  if (!hold_ || pipeline_->queued_in_step_count() == 0) return;
  if (shards_) {
    std::lock_guard<std::mutex> lock(figures_mu_);
    ++comm_figures_.steps;
  }
  pipeline_->finish_step(opt_->step_count() + 1, "reduce-scatter: wait");
}

void ParamStreamer::clip_shards(double max_norm, const std::vector<nn::Parameter*>& order, const Tensor& total_norm) {
  TD_CHECK(shards_ != nullptr, ErrorCode::internal, "train", "clip_shards on a streamer that is not sharded");
  profile::ScopedSpan span(profile::Stage::optimizer, "clip: shards");
  shards_->clip_grads(max_norm, order, total_norm);
}

bool ParamStreamer::check_shards(float scale) {
  TD_CHECK(shards_ != nullptr, ErrorCode::internal, "train", "check_shards on a streamer that is not sharded");
  profile::ScopedSpan span(profile::Stage::optimizer, "loss scaling: check shards");
  return shards_->unscale_check(scale);
}

void ParamStreamer::flush() {
  if (!opt_) return;
  wait_all_updates();
  next_read_ = write_;
  invalidate();
}

void ParamStreamer::wait_updates() {
  if (opt_) wait_all_updates();
}

std::vector<nn::NamedTensor> ParamStreamer::pending_weights() const {
  std::vector<nn::NamedTensor> out;
  if (!update_pending()) return out;
  TD_CHECK_ARG(!shards_, "train",
               "--zero 3 --offload-delay 1: a checkpoint with a pending delayed update is not supported yet (its "
               "upload copies are sharded; gathering them is not written); expected --offload-delay 0");
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
    for (const Entry& e : (p == nn::kOuterPart ? outer_ : blocks_[static_cast<size_t>(p)]).entries)
      out.push_back({e.param->name, e.upload[next_read_], true});
  return out;
}

void ParamStreamer::reload_homes(const std::vector<nn::NamedTensor>& pending) {
  TD_CHECK_ARG(pending.empty() || delay() == 1, "train",
               "the checkpoint holds a pending delayed update (--offload-delay 1): expected --offload-delay 1");
  if (!shards_)  // the compute copies a restore made (set_compute_dtype): each upload rounds its own
    for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
      for (Entry& e : part(p).entries)
        if (e.upload_compute) e.param->compute = Tensor();
  if (!delay()) return;
  TD_CHECK_ARG(!shards_, "train",
               "--zero 3 --offload-delay 1 with --resume: not supported yet (the upload copies are sharded; cutting "
               "them from a checkpoint is not written); expected --offload-delay 0");
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const nn::NamedTensor& t : pending) by_name[t.name] = &t.tensor;
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
    for (Entry& e : part(p).entries) {
      // upload[1]: the homes' values, as the saved run's last update published them;
      // upload[0]: the pending weights (without: the homes' too).
      for (Tensor* u : {&e.upload[1], pending.empty() ? &e.upload[0] : nullptr}) {
        if (!u) continue;
        if (e.upload_compute) {
          round_value(e, u->raw_data());
        } else {
          u->copy_from(e.home_value);
        }
      }
      if (pending.empty()) continue;
      const auto it = by_name.find(e.param->name);
      TD_CHECK_ARG(it != by_name.end(), "train", "the checkpoint's pending weights lack parameter {}", e.param->name);
      TD_CHECK_ARG(it->second->shape() == e.home_value.shape() && it->second->dtype() == e.up_dtype, "train",
                   "the checkpoint's pending weight {} is {} {}, expected {} {}", e.param->name,
                   dtype_name(it->second->dtype()), shape_str(it->second->shape()), dtype_name(e.up_dtype),
                   shape_str(e.home_value.shape()));
      e.upload[0].copy_from(*it->second);
    }
  read_ = next_read_ = 0;
  write_ = pending.empty() ? 0 : 1;  // the saved run's last update wrote the copy read after the next step
  write_chosen_ = false;
  invalidate();
}

std::vector<nn::Parameter*> ParamStreamer::optimizer_params(const std::vector<nn::Parameter*>& model_params) {
  if (!shards_) return model_params;
  shards_->sync_flags();
  return shards_->all_pieces();
}

void ParamStreamer::gather_into(int p, Buffers& b) {
  b.stage_read.synchronize();  // the stage's last upload ran: the gather rewrites it
  shard_views(p, b, false);
  if (!pipeline_) {  // no update thread: no other collective runs
    profile::ScopedSpan span(profile::Stage::comm, "all-gather");
    shards_->gather(part(p).shard, b.stage);
    return;
  }
  // On the update thread, in order with the updates queued before it; this thread waits.
  const bool counted = !eval_;  // in shard_comm()'s figures (training passes only)
  const int copy = delay() ? read_ : -1;  // --offload-delay 1: the upload copy this pass reads
  const auto gather = [this, p, stage = &b.stage, counted, copy] {
    profile::ScopedSpan span(profile::Stage::comm, p == nn::kOuterPart ? "all-gather: outer" : "all-gather: block");
    const int64_t t0 = profile::now_ns();
    shards_->gather(part(p).shard, *stage, copy);
    std::lock_guard<std::mutex> lock(figures_mu_);
    if (counted) {
      comm_figures_.seconds += 1e-9 * static_cast<double>(profile::now_ns() - t0);
      comm_figures_.bytes += static_cast<double>(shards_->gather_bytes(part(p).shard));
    }
  };
  std::exception_ptr error;
  {
    profile::ScopedSpan span(profile::Stage::wait_device, "wait for the all-gather");
    const int64_t t0 = profile::now_ns();
    try {
      pipeline_->run(gather);
    } catch (...) {
      error = std::current_exception();
    }
    if (counted) {
      std::lock_guard<std::mutex> lock(figures_mu_);
      comm_figures_.wait_seconds += 1e-9 * static_cast<double>(profile::now_ns() - t0);
    }
  }
  if (error) std::rethrow_exception(error);
}

void ParamStreamer::gather_weights() {
  if (!shards_) return;
  if (opt_) wait_all_updates();  // the update thread is idle: its collectives and these do not interleave
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
    Part& pt = part(p);
    std::vector<Tensor> values = shards_->gather_values(pt.shard);
    for (size_t k = 0; k < pt.entries.size(); ++k) {
      pt.entries[k].param->value = std::move(values[k]);
      // A compute copy between uses is a stage's view, which other parts share: none, so that
      // whoever needs one (set_compute_dtype after loading a checkpoint) makes its own.
      if (pt.entries[k].upload_compute) pt.entries[k].param->compute = Tensor();
    }
  }
}

std::vector<nn::NamedTensor> ParamStreamer::gathered_state(const optim::Optimizer& opt) const {
  std::vector<nn::NamedTensor> out;
  if (!shards_) return out;
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
    std::vector<nn::NamedTensor> part_state =
        shards_->gather_state(p == nn::kOuterPart ? outer_.shard : blocks_[static_cast<size_t>(p)].shard, opt);
    out.insert(out.end(), part_state.begin(), part_state.end());
  }
  return out;
}

void ParamStreamer::load_sharded(optim::Optimizer& opt, const std::vector<nn::NamedTensor>& state, int64_t step_count) {
  TD_CHECK(shards_ != nullptr, ErrorCode::internal, "train", "load_sharded on a streamer that is not sharded");
  if (opt_) wait_all_updates();
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) shards_->reload(part(p).shard);
  opt.load_state(shards_->cut_state(state, opt), step_count);
  invalidate();
}

void ParamStreamer::idle_pass() {
  use(nn::kOuterPart, nn::StreamPass::eval);
  for (int b = 0; b < static_cast<int>(blocks_.size()); ++b) {
    use(b, nn::StreamPass::eval);
    done(b, nn::StreamPass::eval);
  }
  done(nn::kOuterPart, nn::StreamPass::eval);
}

}  // namespace tandem::train
