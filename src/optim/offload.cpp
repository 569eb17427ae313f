// OffloadOptimizer: flat pinned host state, per-bucket D2H / CPU update / H2D through one
// HostUpdatePipeline (see tandem/optim/offload.h for the schedule and its guarantees).
#include "tandem/optim/offload.h"

#include <algorithm>
#include <cmath>

#include "optim/offload_impl.h"

namespace tandem::optim {

OffloadOptimizer::OffloadOptimizer(const std::string& name, std::vector<nn::Parameter*> params,
                                   const OptimizerOptions& o, const OffloadOptions& off)
    : Optimizer(kOp, std::move(params), o.lr), name_(name), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  TD_CHECK_ARG(name == "sgd" || name == "adam" || name == "adamw", kOp,
               "unknown optimizer '{}' (expected sgd, adam or adamw)", name);
  TD_CHECK_ARG(std::isfinite(off.bucket_cap_mb) && off.bucket_cap_mb > 0, kOp,
               "bucket_cap_mb must be a finite value > 0, got {}", off.bucket_cap_mb);
  TD_CHECK_ARG(off.delay == 0 || off.delay == 1, kOp, "delay must be 0 or 1, got {}", off.delay);
  TD_CHECK_ARG(off.delay_warmup_steps >= 0, kOp, "delay_warmup_steps must be >= 0, got {}", off.delay_warmup_steps);
  TD_CHECK_ARG(off.num_threads >= 0, kOp, "num_threads must be >= 0, got {}", off.num_threads);
  TD_CHECK_ARG(o.moments_dtype == DType::f32 || off.shard_world_size == 1, kOp,
               "{} moments with shard_world_size {}: the moments' rounding follows each parameter's elements, "
               "a block that cuts a parameter would round them differently; expected f32 moments or "
               "shard_world_size 1",
               dtype_name(o.moments_dtype), off.shard_world_size);
  m.num_threads = off.num_threads > 0 ? off.num_threads : ops::get_num_threads();
  m.before_update = off.before_update;
  m.params = Optimizer::params();
  TD_CHECK_ARG(off.transfer_dtype == DType::f32 || off.transfer_dtype == DType::bf16 || off.transfer_dtype == DType::f16,
               kOp, "transfer_dtype must be f32, bf16 or f16, got {}", dtype_name(off.transfer_dtype));
  TD_CHECK_ARG(off.transfer_dtype == DType::f32 || off.shard_world_size == 1, kOp,
               "transfer_dtype {} with shard_world_size {}: low-precision transfers are not sharded (ZeRO-1); "
               "expected f32 or shard_world_size 1",
               dtype_name(off.transfer_dtype), off.shard_world_size);
  m.lp = off.transfer_dtype;
  TD_CHECK_ARG(std::isfinite(off.clip_grad_norm) && off.clip_grad_norm >= 0, kOp,
               "clip_grad_norm must be a finite value >= 0, got {}", off.clip_grad_norm);
  TD_CHECK_ARG(!off.loss_scale.defined() || (off.loss_scale.dtype() == DType::f32 &&
                                             off.loss_scale.numel() == ops::kAmpStateSize),
               kOp, "loss_scale: expected a loss scaler's [{}] f32 state", static_cast<int>(ops::kAmpStateSize));
  m.loss_scale = off.loss_scale;
  m.clip = off.clip_grad_norm;
  m.speculate = off.speculate;
  TD_CHECK_ARG(!m.checked() || off.shard_world_size == 1, kOp,
               "clip_grad_norm or loss_scale with shard_world_size {}: no rank holds every gradient of its updates",
               off.shard_world_size);
  m.narrow_up.assign(m.params.size(), 0);

  // Members: parameters that get gradients, all on one device.
  std::vector<size_t> members;
  std::vector<int64_t> numels;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const nn::Parameter& p = *m.params[i];
    if (!p.requires_grad || !p.grad.defined()) continue;
    TD_CHECK_ARG(p.grad.dtype() == DType::f32 && p.grad.is_contiguous() && p.grad.shape() == p.value.shape() &&
                     p.grad.device() == p.value.device(),
                 kOp, "parameter '{}': expected a contiguous f32 grad of shape {} on {}, got {} {} on {}",
                 param_name(i), shape_str(p.value.shape()), p.value.device().str(), dtype_name(p.grad.dtype()),
                 shape_str(p.grad.shape()), p.grad.device().str());
    TD_CHECK_ARG(!p.compute.defined() || p.compute.dtype() == m.lp, kOp,
                 "parameter '{}' has a {} compute copy: expected transfer_dtype {} (its copy is what goes up)",
                 param_name(i), p.compute.defined() ? dtype_name(p.compute.dtype()) : "", dtype_name(m.lp));
    m.narrow_up[i] = p.compute.defined() ? 1 : 0;
    if (members.empty()) m.device = p.value.device();
    TD_CHECK_ARG(p.value.device() == m.device, kOp, "parameter '{}' is on {}, expected {} like '{}'",
                 param_name(i), p.value.device().str(), m.device.str(), param_name(members.front()));
    members.push_back(i);
    numels.push_back(p.value.numel());
  }
  TD_CHECK_ARG(std::isfinite(off.first_bucket_cap_mb) && off.first_bucket_cap_mb >= 0, kOp,
               "first_bucket_cap_mb must be a finite value >= 0, got {}", off.first_bucket_cap_mb);
  m.buckets = plan_offload_buckets(numels, bucket_cap_bytes(off.bucket_cap_mb),
                                   off.first_bucket_cap_mb > 0 ? bucket_cap_bytes(off.first_bucket_cap_mb) : 0);
  m.reduce_grads = off.reduce_grads;
  TD_CHECK_ARG(off.shard_world_size >= 1 && off.shard_rank >= 0 && off.shard_rank < off.shard_world_size, kOp,
               "shard_rank {} of shard_world_size {}: expected 0 <= shard_rank < shard_world_size", off.shard_rank,
               off.shard_world_size);
  TD_CHECK_ARG(off.shard_world_size == 1 || (off.reduce_scatter_grads && off.all_gather_params), kOp,
               "shard_world_size {}: expected reduce_scatter_grads and all_gather_params", off.shard_world_size);
  m.shard_rank = off.shard_rank;
  m.shard_world_size = off.shard_world_size;
  m.reduce_scatter_grads = off.reduce_scatter_grads;
  m.all_gather_params = off.all_gather_params;
  const bool on_disk = !off.disk_dir.empty();
  TD_CHECK_ARG(!on_disk || (off.delay == 0 && off.shard_world_size == 1), kOp,
               "the disk tier with delay {} and shard_world_size {}: expected delay 0 and one shard",
               off.delay, off.shard_world_size);
  const int64_t unit_align = on_disk ? storage::DiskStore::kUnitAlign : 16;
  m.offset.assign(m.params.size(), -1);
  m.bucket_of.assign(m.params.size(), -1);
  {
    // plan_offload_buckets numbers parameters by position in `members`; recompute offsets.
    // Each bucket's range is padded as shard_range cuts it (align 16): N blocks of whole lines.
    int64_t offset = 0;
    for (size_t k = 0; k < m.buckets.size(); ++k) {
      offset = (offset + unit_align - 1) / unit_align * unit_align;  // disk units start on whole pages
      m.buckets[k].begin = offset;
      for (size_t& idx : m.buckets[k].params) {
        idx = members[idx];
        m.offset[idx] = offset;
        m.bucket_of[idx] = static_cast<int>(k);
        m.index_of[m.params[idx]] = idx;
        offset += (m.numel(idx) + 15) / 16 * 16;
      }
      offset = m.buckets[k].begin + m.block_range(offset - m.buckets[k].begin).padded;
      m.buckets[k].end = offset;
    }
  }
  const int64_t total = m.buckets.empty() ? 0 : m.buckets.back().end;
  const int64_t state_total = total / m.shard_world_size;  // the blocks of this rank
  auto flat = [](int64_t n) {
    Tensor t = pinned_empty({n});
    t.fill(0.0);
    return t;
  };
  if (on_disk) {
    const auto keys = make_optimizer(name, {}, o)->state_keys();
    uint64_t need = static_cast<uint64_t>(total) * 4 + 4096;
    for (const auto& [key, dtype] : keys)
      if (dtype != DType::i64) need += static_cast<uint64_t>(total) * dtype_size(dtype) + 4096;
    storage::check_offload_dir(off.disk_dir, need);
    storage::DiskStoreOptions so;
    so.dir = off.disk_dir;
    so.read_ahead = off.disk_read_ahead;
    so.queue_depth = off.disk_queue_depth;
    so.request_bytes = off.disk_request_bytes;
    so.model_read_gbps = off.disk_model_read_gbps;
    so.model_write_gbps = off.disk_model_write_gbps;
    m.disk = std::make_unique<storage::DiskStore>(so);
    m.master = m.disk->add_flat(total, DType::f32, "master");
  } else {
    m.master = flat(total);
  }
  m.grads[0] = flat(total);
  if (off.delay == 1) m.grads[1] = flat(total);
  if (m.sharded()) m.block_grads = flat(state_total);
  if (m.low()) {
    auto flat_lp = [&](int64_t n) {
      Tensor t = pinned_empty({n}, m.lp);
      t.fill(0.0);
      return t;
    };
    m.grads_lp[0] = flat_lp(total);
    if (off.delay == 1) m.grads_lp[1] = flat_lp(total);
    m.params_lp = flat_lp(total);
    // The rounding op: amp_scale with a scale of 1 (exact) on the parameters' device.
    Tensor unit = Tensor::zeros({ops::kAmpStateSize});
    unit.data<float>()[ops::kScale] = 1.0f;
    if (m.device.is_host()) {
      m.unit_scale = unit;
      m.dev_grads = Tensor::empty({total}, m.lp);
    } else {
      const Stream s = compute_stream_of(m.device);
      m.unit_scale = unit.to(m.device, s);
      m.dev_grads = Tensor::empty({total}, m.lp, m.device);
      s.synchronize();
    }
  }
  {
    std::vector<std::string> names;
    for (size_t i = 0; i < m.params.size(); ++i) names.push_back(param_name(i));
    m.build_maths(name, o, names);
  }
  // One flat buffer per state slot of the optimizer (this rank's blocks), allocated up front.
  for (const auto& [key, dtype] : m.inner->state_keys()) {
    if (dtype == DType::i64) continue;  // the step counters: host scalars
    if (m.disk) {
      m.state_flats.emplace_back(key, m.disk->add_flat(state_total, dtype, key));
      continue;
    }
    Tensor t = pinned_empty({state_total}, dtype);
    t.fill(0.0);
    m.state_flats.emplace_back(key, t);
  }
  if (m.disk) {
    std::vector<std::pair<int64_t, int64_t>> units;
    for (const OffloadBucket& b : m.buckets) units.emplace_back(b.begin, b.end);
    m.disk->set_units(units);
  }

  const size_t nb = m.buckets.size();
  m.found.assign(nb, 0);
  if (m.loss_scale.defined())
    for (Tensor& t : m.scale_host) t = pinned_empty({ops::kAmpStateSize});
  m.param_ready.assign(m.params.size(), 0);
  m.ready_left.assign(nb, 0);
  m.reset_step_state();

  Runtime& rt = runtime_for(m.device);
  m.d2h = rt.new_stream(m.device.index);
  m.h2d = rt.new_stream(m.device.index);
  m.d2h.set_label("offload gradients d2h");
  m.h2d.set_label("offload parameters h2d");
  m.read_master();
  HostUpdateOptions pipe;
  pipe.thread_name = "cpu optimizer";
  pipe.num_threads = m.num_threads;
  pipe.units = static_cast<int>(nb);
  pipe.delay = off.delay;
  pipe.delay_warmup_steps = off.delay_warmup_steps;
  pipe.keep_errors = true;  // an update thread's error fails the optimizer for good
  HostUpdateHooks hooks;
  hooks.update = [&m](const HostUpdate& u) { m.update_bucket(u); };
  hooks.upload = [&m](int k, const Event& gate, int64_t) { return m.upload(k, gate); };
  m.pipeline = std::make_unique<HostUpdatePipeline>(std::move(pipe), std::move(hooks));
}

OffloadOptimizer::~OffloadOptimizer() {
  Impl& m = *impl_;
  detach();
  m.pipeline->stop();  // the queued jobs skip their work
  // The copies in flight read or write the host buffers: let them finish before the buffers
  // go back to the pool. Their errors have nobody left to report to.
  for (Stream* s : {&m.d2h, &m.h2d}) {
    try {
      if (*s) s->synchronize();
    } catch (...) {
    }
  }
}

void OffloadOptimizer::attach(nn::Module& module) {
  detach();
  Impl& m = *impl_;
  module.set_grad_ready_hook([this](const std::vector<nn::Parameter*>& ps) {
    impl_->on_grads_ready(ps, step_count() + 1, lr());
  });
  m.attached = &module;
}

void OffloadOptimizer::detach() {
  if (impl_->attached) impl_->attached->set_grad_ready_hook({});
  impl_->attached = nullptr;
}

bool OffloadOptimizer::attached() const { return impl_->attached != nullptr; }

void OffloadOptimizer::set_micro_batch(int64_t k, int64_t count) {
  Impl& m = *impl_;
  TD_CHECK_ARG(count >= 1 && k >= 0 && k < count, kOp, "micro-batch {} of {}: expected 0 <= k < count", k, count);
  TD_CHECK_ARG(m.pipeline->queued_in_step_count() == 0, kOp,
               "set_micro_batch() called between a backward() that launched gradient copies and its step()");
  m.hold = k < count - 1;
  m.scale_grads = count > 1;
  m.grad_scale = static_cast<float>(1.0 / static_cast<double>(count));
}

void OffloadOptimizer::update_all() {
  Impl& m = *impl_;
  m.pipeline->check();
  const int64_t step = step_count() + 1;
  for (size_t k = 0; k < m.buckets.size(); ++k)
    if (!m.launched(k)) m.launch(static_cast<int>(k), step, lr());
  // The next forward needs update `step` (delay 0) or `step - 1` (delay 1) uploaded.
  if (m.pipeline->delay_of(step) == 0) {
    // Without delay the update needs this step's gradients: the host waits for the device to
    // finish backward anyway; waiting here first shows that time apart from the CPU update's.
    const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
    for (size_t k = 0; k < m.buckets.size(); ++k) m.pipeline->grads_event(static_cast<int>(k)).synchronize();
    if (t0 >= 0) prof::Profiler::global().record(prof::Stage::wait_device, "wait for backward", t0, prof::now_ns());
  }
  if (m.checked()) {  // after the step's updates, on the update thread
    const int slot = m.pipeline->delay() == 1 ? static_cast<int>(step % 2) : 0;
    m.pipeline->queue_check([&m, slot, step_lr = lr(), step] { return m.check_step(slot, step_lr, step); }, step);
    // The scaler needs the verdict now; a delayed update's clipping is checked on its thread.
    if (m.loss_scale.defined()) m.pipeline->wait_updates("wait for the step's checks");
  }
  m.pipeline->finish_step(step);
  m.order_compute_after_copies(false);
  m.reset_step_state();
  // A skipped step (an inf/NaN gradient) is not counted: Optimizer::step() adds the one taken
  // off here.
  if (m.loss_scale.defined() && m.skipped) set_step_count(step_count() - 1);
}

void OffloadOptimizer::flush() {
  flush_uploads();
  impl_->write_values();
}

void OffloadOptimizer::flush_uploads() {
  Impl& m = *impl_;
  m.pipeline->check();
  TD_CHECK_ARG(m.pipeline->queued_in_step_count() == 0, kOp,
               "flush() called between a backward() that launched gradient copies and its step()");
  if (m.pipeline->upload_pending()) m.pipeline->upload_owed(compute_stream_of(m.device).record(), step_count());
  m.pipeline->wait_idle();
  m.order_compute_after_copies(true);
  m.d2h.synchronize();
  m.h2d.synchronize();
}

void OffloadOptimizer::update(size_t, nn::Parameter&) {
  throw_error(ErrorCode::internal, kOp, "update() called: this optimizer updates whole buckets in update_all()");
}

std::vector<std::pair<std::string, DType>> OffloadOptimizer::state_keys() const { return impl_->inner->state_keys(); }

const std::vector<OffloadBucket>& OffloadOptimizer::buckets() const { return impl_->buckets; }
int OffloadOptimizer::delay() const { return impl_->pipeline->delay(); }
int OffloadOptimizer::launched_buckets() const { return impl_->pipeline->queued_in_step_count(); }
Tensor OffloadOptimizer::master_params() const {
  if (impl_->disk) impl_->disk->acquire_all();
  return impl_->master;
}

size_t OffloadOptimizer::host_bytes() const {
  const Impl& m = *impl_;
  size_t n = m.disk ? m.disk->window_bytes() : m.master.nbytes();
  for (const Tensor* t : {&m.grads[0], &m.grads[1], &m.block_grads, &m.grads_lp[0], &m.grads_lp[1], &m.params_lp})
    if (t->defined()) n += t->nbytes();
  if (!m.disk)
    for (const auto& [key, t] : m.state_flats) n += t.nbytes();
  return n;
}

const storage::DiskStore* OffloadOptimizer::disk_store() const { return impl_->disk.get(); }

DType OffloadOptimizer::transfer_dtype() const { return impl_->lp; }

OffloadTransfer OffloadOptimizer::bytes_per_step() const {
  const Impl& m = *impl_;
  OffloadTransfer t;
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (m.offset[i] < 0) continue;
    t.to_host += m.grad_bytes(i);
    t.to_device += m.param_bytes(i);
  }
  return t;
}

OffloadLayout OffloadOptimizer::layout() const {
  OffloadLayout l;
  l.sharded = impl_->shard_world_size > 1;
  l.buckets = static_cast<int>(impl_->buckets.size());
  l.delay = impl_->pipeline->delay();
  l.transfer_dtype = impl_->lp;
  l.per_step = bytes_per_step();
  l.host_bytes = host_bytes();
  if (impl_->disk) {
    l.disk_bytes = impl_->disk->disk_bytes();
    l.disk = impl_->disk->describe();
  }
  return l;
}

OffloadTransfer OffloadOptimizer::bytes_moved() const { return {impl_->bytes_down.load(), impl_->bytes_up.load()}; }

}  // namespace tandem::optim
