// The internals of OffloadOptimizer shared by offload.cpp (construction, step, flush) and
// offload_state.cpp (saving and restoring the host state): the flat host buffers and the
// per-bucket D2H / CPU update / H2D hooks of its host-update pipeline (HostUpdatePipeline,
// tandem/optim/host_update_pipeline.h: the update thread, the delay rule, the per-bucket
// bookkeeping and the waits; see tandem/optim/offload.h for the schedule and its guarantees).
// Thread-safety: as described per member below; the training thread's unless said otherwise.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <unordered_map>

#include "tandem/amp_ops.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/optim/host_update_pipeline.h"
#include "tandem/optim/kernels.h"
#include "tandem/pinned.h"
#include "tandem/optim/offload.h"
#include "tandem/optim/optimizer.h"
#include "tandem/profile/profiler.h"
#include "tandem/profile/stream_span.h"
#include "tandem/shard_range.h"
#include "tandem/storage/disk_store.h"

namespace tandem::optim {

constexpr const char* kOp = "offload";
namespace prof = tandem::profile;
using profile::StreamSpan;

// The stream the model's ops run on for the calling thread.
inline Stream compute_stream_of(Device device) { return runtime_for(device).current_stream(device.index); }

inline float* f32(const Tensor& t) { return static_cast<float*>(t.raw_data()); }
inline uint16_t* u16(const Tensor& t) { return static_cast<uint16_t*>(t.raw_data()); }

struct OffloadOptimizer::Impl {
  // Configuration.
  int num_threads = 1;
  std::function<void(int, int64_t)> before_update;
  std::function<void(int, const Tensor&)> reduce_grads;
  // ZeRO-1 (OffloadOptions::shard_*): this rank updates block shard_rank of each bucket; the
  // state buffers and block_grads hold the blocks only (bucket k's at begin_k / N).
  int shard_rank = 0, shard_world_size = 1;
  std::function<void(int, const Tensor&, const Tensor&)> reduce_scatter_grads;
  std::function<void(int, const Tensor&, const Tensor&)> all_gather_params;
  Tensor block_grads;

  // The disk tier (OffloadOptions::disk_dir): master and state_flats are views of its flats,
  // one unit per bucket. Declared before them: it outlives every view.
  std::unique_ptr<storage::DiskStore> disk;
  std::vector<nn::Parameter*> params;
  Device device;
  std::vector<OffloadBucket> buckets;
  std::vector<int64_t> offset;  // per parameter; -1 when not updated here
  std::vector<int> bucket_of;   // per parameter; -1 when not updated here
  std::unordered_map<const nn::Parameter*, size_t> index_of;
  Tensor master, grads[2];  // flat pinned host buffers
  // The maths: an ordinary optimizer (make_optimizer) over pieces[0], one stand-in per
  // parameter whose value, gradient and compute copy are views into the flat buffers (the
  // parameter's range, or its part of this rank's block when sharded); pieces[1] are the same
  // with the gradients of grads[1] (delay 1), passed to update_part in their place. Its state
  // slots live in state_flats, one flat pinned buffer per slot key (the scalar step counters
  // excepted), at state_at[i] for parameter i (set_state_home). Non-members' pieces are empty
  // and never updated.
  std::vector<nn::Parameter> pieces[2];
  std::unique_ptr<Optimizer> inner;  // after pieces: destroyed before them
  std::vector<int64_t> state_at;
  std::vector<std::pair<std::string, Tensor>> state_flats;
  std::vector<std::vector<size_t>> bucket_members;                // per bucket: members with elements here
  std::vector<std::vector<nn::Parameter*>> bucket_pieces[2];      // their pieces, per grads buffer
  // Builds the above once the flat buffers exist (offload_maths.cpp); `names` as the
  // optimizer names the parameters. Throws make_optimizer's errors.
  void build_maths(const std::string& name, const OptimizerOptions& options, const std::vector<std::string>& names);
  // Low-precision transfers (OffloadOptions::transfer_dtype bf16 or f16; `lp`): every gradient
  // is rounded on the device into dev_grads (one op per parameter, amp_scale by 1), comes down
  // into grads_lp and is widened into grads; the kernels write the low-precision copy of each
  // parameter that has one (narrow_up) into params_lp, which goes up into its `compute`
  // tensor. The other parameters go up in f32 as without. Flat, the f32 buffers' layout.
  DType lp = DType::f32;
  bool low() const { return lp != DType::f32; }
  std::vector<char> narrow_up;  // per parameter
  Tensor grads_lp[2], params_lp, dev_grads, unit_scale;
  // Bytes the per-step copies have moved (gradients down, parameters up).
  std::atomic<uint64_t> bytes_down{0}, bytes_up{0};
  size_t grad_bytes(size_t i) const { return static_cast<size_t>(numel(i)) * dtype_size(lp); }
  size_t param_bytes(size_t i) const { return narrow_up[i] ? grad_bytes(i) : bytes(i); }
  bool sharded() const { return shard_world_size > 1; }
  // Bucket k's block of this rank: [lo, hi) of the flat buffers, and where it starts in the
  // block-sized buffers (state, block_grads); the whole bucket when not sharded.
  struct Block {
    int64_t lo, hi, base;
  };
  void check_unsharded(const char* what) const {
    TD_CHECK(!sharded(), ErrorCode::not_available, kOp,
             "{} of an optimizer sharded over {} ranks (ZeRO-1): this rank holds 1/{} of the state", what,
             shard_world_size, shard_world_size);
  }
  // This rank's block of a bucket range of n elements (the shard rule, 16-element lines).
  ShardRange block_range(int64_t n) const { return shard_range(n, shard_rank, shard_world_size, 16); }
  Block block_of(int k) const {
    const OffloadBucket& b = buckets[static_cast<size_t>(k)];
    if (!sharded()) return {b.begin, b.end, b.begin};
    const ShardRange r = block_range(b.end - b.begin);
    return {b.begin + r.offset, b.begin + r.end(), b.begin / shard_world_size};
  }
  // Parameter i's elements this rank updates: [first, first + second) of the parameter (second
  // 0: none here; the whole parameter when not sharded).
  std::pair<int64_t, int64_t> piece_range(size_t i) const {
    if (offset[i] < 0 || !pieces[0][i].requires_grad) return {0, 0};
    const Block blk = block_of(bucket_of[i]);
    const int64_t a = std::max(offset[i], blk.lo), b = std::min(offset[i] + numel(i), blk.hi);
    return {a - offset[i], std::max<int64_t>(0, b - a)};
  }
  Stream d2h, h2d;

  // The step's checks (OffloadOptions::loss_scale, clip_grad_norm, speculate; offload_checks.cpp).
  Tensor loss_scale;           // the scaler's state on the device, or undefined
  Tensor scale_host[2];        // [4] f32 pinned: the state as it came down with a slot's gradients
  double clip = 0;
  bool speculate = true;
  std::vector<char> found;     // per bucket: an inf/NaN in its gradients this step (update thread)
  std::atomic<bool> skipped{false};
  std::atomic<float> grad_norm{NAN};
  bool checked() const { return loss_scale.defined() || clip > 0; }
  // Update thread, before a bucket's update: the host unscale and inf/NaN check of its
  // gradients (slot `slot`).
  void unscale_bucket(int k, int slot);
  // Update thread, after the step's buckets: the checks, and the restores and updates again
  // they ask for; returns the buckets whose master range changed.
  std::vector<int> check_step(int slot, double lr, int64_t step);

  // Training-thread state of the step being computed (the pipeline keeps which buckets were
  // queued: launched).
  std::vector<char> param_ready;
  std::vector<int> ready_left;
  nn::Module* attached = nullptr;
  // Gradient accumulation (set_micro_batch): the hook launches nothing while `hold`; launched
  // buckets' gradients are scaled by grad_scale first when `scale_grads`.
  bool hold = false, scale_grads = false;
  float grad_scale = 1.0f;

  // The buckets' host-update pipeline: its units are the buckets, its hooks update_bucket()
  // and upload(). Started last, stopped first.
  std::unique_ptr<HostUpdatePipeline> pipeline;

  int64_t numel(size_t i) const { return params[i]->value.numel(); }
  size_t bytes(size_t i) const { return params[i]->value.nbytes(); }
  bool launched(size_t k) const { return pipeline->queued_in_step(static_cast<int>(k)); }

  // Copies every parameter's device value into the master buffer and waits (with the disk
  // tier one bucket at a time, each written back after its copies).
  void read_master() {
    Runtime& rt = runtime_for(device);
    for (size_t k = 0; k < buckets.size(); ++k) {
      if (disk) disk->acquire(static_cast<int>(k));
      for (size_t i : buckets[k].params) {
        const Tensor& v = params[i]->value;
        d2h.wait(v.storage()->pending_write());
        rt.copy_async(f32(master) + offset[i], Device{}, v.raw_data(), device, bytes(i), d2h);
      }
      if (disk) {
        d2h.synchronize();
        disk->release(static_cast<int>(k));
      }
    }
    d2h.synchronize();
  }

  // Training thread: the gradients of bucket k are final; copy them back and queue the update.
  void launch(int k, int64_t step, double lr) {
    const Stream compute = compute_stream_of(device);
    if (scale_grads)  // the mean over the step's micro-batches, before the gradients leave
      for (size_t i : buckets[static_cast<size_t>(k)].params) ops::scale_(params[i]->grad, grad_scale);
    if (low())  // rounded on the compute stream, after the ops that wrote the gradients
      for (size_t i : buckets[static_cast<size_t>(k)].params)
        ops::amp_scale(params[i]->grad, unit_scale, dev_grads.narrow(0, offset[i], numel(i)));
    const Event ready = compute.record();
    const int slot = pipeline->delay() == 1 ? static_cast<int>(step % 2) : 0;
    d2h.wait(ready);
    StreamSpan span(d2h, device.str() + " d2h", prof::Stage::d2h, "grads bucket");
    Runtime& rt = runtime_for(device);
    uint64_t moved = 0;
    if (loss_scale.defined())  // the scale this step's loss gradient used
      rt.copy_async(scale_host[slot].raw_data(), Device{}, loss_scale.raw_data(), device, loss_scale.nbytes(), d2h);
    for (size_t i : buckets[static_cast<size_t>(k)].params) {
      if (low()) {
        rt.copy_async(u16(grads_lp[slot]) + offset[i], Device{}, u16(dev_grads) + offset[i], device, grad_bytes(i), d2h);
      } else {
        rt.copy_async(f32(grads[slot]) + offset[i], Device{}, params[i]->grad.raw_data(), device, bytes(i), d2h);
      }
      moved += grad_bytes(i);
    }
    bytes_down += moved;
    span.end();
    // A delayed upload of the bucket's previous update waits for `ready`: backward no longer
    // reads those parameters.
    pipeline->queue(HostUpdate{k, step, lr, slot, d2h.record()}, ready);
  }

  void on_grads_ready(const std::vector<nn::Parameter*>& ps, int64_t step, double lr) {
    if (hold) return;  // an earlier micro-batch: the gradients go on accumulating on the device
    for (const nn::Parameter* p : ps) {
      const auto it = index_of.find(p);
      if (it == index_of.end() || param_ready[it->second]) continue;
      param_ready[it->second] = 1;
      const int k = bucket_of[it->second];
      if (--ready_left[static_cast<size_t>(k)] == 0 && !launched(static_cast<size_t>(k))) launch(k, step, lr);
    }
  }

  void reset_step_state() {
    std::fill(param_ready.begin(), param_ready.end(), 0);
    for (size_t k = 0; k < buckets.size(); ++k) ready_left[k] = static_cast<int>(buckets[k].params.size());
  }

  // Training thread: the compute stream (and later users of the parameters) wait for the
  // uploads, and zero_grad waits for the gradient copies.
  void order_compute_after_copies(bool host_wait) {
    const Stream compute = compute_stream_of(device);
    for (size_t k = 0; k < buckets.size(); ++k) {
      const Event h = pipeline->upload_event(static_cast<int>(k));
      if (host_wait) h.synchronize();
      if (!h.query()) {
        compute.wait(h);
        for (size_t i : buckets[k].params)
          (narrow_up[i] ? params[i]->compute : params[i]->value).storage()->set_pending_write(h);
      }
      const Event& d = pipeline->grads_event(static_cast<int>(k));
      if (!d.query()) compute.wait(d);
    }
  }

  // Update thread (the upload hook): enqueue the copies of bucket k's master range into the
  // device parameters; returns their event.
  Event upload(int k, const Event& gate) {
    h2d.wait(gate);
    StreamSpan span(h2d, device.str() + " h2d", prof::Stage::h2d, "params bucket");
    Runtime& rt = runtime_for(device);
    uint64_t moved = 0;
    for (size_t i : buckets[static_cast<size_t>(k)].params) {
      if (narrow_up[i]) {
        rt.copy_async(params[i]->compute.raw_data(), device, u16(params_lp) + offset[i], Device{}, param_bytes(i), h2d);
      } else {
        rt.copy_async(params[i]->value.raw_data(), device, f32(master) + offset[i], Device{}, bytes(i), h2d);
      }
      moved += param_bytes(i);
    }
    bytes_up += moved;
    span.end();
    const Event done = h2d.record();
    if (disk) disk->release(k, done);  // written back behind the upload, its pages kept until both ended
    return done;
  }

  // Update thread: the optimizer's update of bucket k's pieces (this rank's block of them when
  // sharded) from the gradients of the update's grads buffer, at its lr.
  void run_kernels(const HostUpdate& job) {
    const auto k = static_cast<size_t>(job.unit);
    const int slot = sharded() ? 0 : job.slot;
    const std::vector<nn::Parameter*>& as = bucket_pieces[slot][k];
    for (size_t j = 0; j < as.size(); ++j) as[j]->decay = params[bucket_members[k][j]]->decay;
    inner->update_part(bucket_members[k], job.lr, as);
  }

  // Update thread (the update hook; the pipeline waited for the gradients and the bucket's last
  // upload, and uploads after it): widen, reduce, update, gather.
  void update_bucket(const HostUpdate& job) {
    const OffloadBucket& b = buckets[static_cast<size_t>(job.unit)];
    if (disk) {  // the bucket's master copy and state back from disk (the next ones start reading)
      const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
      disk->acquire(job.unit);
      if (t0 >= 0) prof::Profiler::global().record(prof::Stage::other, "wait for disk", t0, prof::now_ns());
    }
    if (low()) widen_to_f32(u16(grads_lp[job.slot]) + b.begin, lp, f32(grads[job.slot]) + b.begin, b.end - b.begin);
    const Block blk = block_of(job.unit);
    const Tensor block = sharded() ? block_grads.narrow(0, blk.base, blk.hi - blk.lo) : Tensor();
    if (sharded()) {
      reduce_scatter_grads(job.unit, grads[job.slot].narrow(0, b.begin, b.end - b.begin), block);
    } else if (reduce_grads) {
      reduce_grads(job.unit, grads[job.slot].narrow(0, b.begin, b.end - b.begin));
    }
    if (loss_scale.defined()) unscale_bucket(job.unit, job.slot);
    if (checked() && !speculate) return;  // the synchronous reference: check_step updates
    if (before_update) before_update(job.unit, job.step);
    const int64_t t0 = prof::Profiler::global().enabled() ? prof::now_ns() : -1;
    if (checked()) {
      const auto k = static_cast<size_t>(job.unit);
      inner->save_part(bucket_members[k], bucket_pieces[sharded() ? 0 : job.slot][k]);
    }
    run_kernels(job);
    if (t0 >= 0) prof::Profiler::global().record(prof::Stage::optimizer, "cpu update bucket", t0, prof::now_ns());
    if (sharded()) {  // the block's gradients are spent: it carries the updated parameters out
      std::copy(f32(master) + blk.lo, f32(master) + blk.hi, f32(block));
      all_gather_params(job.unit, block, master.narrow(0, b.begin, b.end - b.begin));
    }
  }

  // Training thread, low precision: copies the master copy of every parameter that goes up in
  // low precision into its f32 value on the device and waits (the values are not uploaded per
  // step; saving and f32 readers see the master weights after this).
  void write_values() {
    if (!low()) return;
    Runtime& rt = runtime_for(device);
    for (size_t k = 0; k < buckets.size(); ++k) {
      if (disk) disk->acquire(static_cast<int>(k));
      for (size_t i : buckets[k].params)
        if (narrow_up[i])
          rt.copy_async(params[i]->value.raw_data(), device, f32(master) + offset[i], Device{}, bytes(i), h2d);
      if (disk) {
        h2d.synchronize();
        disk->release(static_cast<int>(k));
      }
    }
    h2d.synchronize();
  }
};

}  // namespace tandem::optim
