// OffloadOptimizer: the optimizer of parameters that live on a device (virt, cuda; cpu works
// too) runs on the CPU, ZeRO-Offload style (Ren et al. 2021, "ZeRO-Offload: Democratizing
// Billion-Scale Model Training", sections 4-5; DeepSpeed's CPU Adam is the reference).
//
// Host state, in flat buffers from the pinned pool (tandem/pinned.h), one contiguous range per
// parameter (ranges start on 64-byte boundaries):
//   master   fp32 copy of the parameters (the values the optimizer updates)      4 B/param
//   grads    fp32 gradients copied back from the device; two buffers with delay 1 4 or 8 B/param
//   state    the optimizer's slots: exp_avg + exp_avg_sq (adam, adamw; 8 B/param, or 4 with
//            bf16 moments) or momentum_buffer (sgd with momentum; 4 B/param)
//   with transfer_dtype bf16/f16 also: the low-precision gradients as they came down (2 or 4
//            B/param) and the parameters' low-precision copies that go up (2 B/param)
// The parameters are partitioned into buckets of whole parameters in REVERSE registration order
// (bucket 0 holds the last parameters, whose gradients backward produces first); a bucket is
// closed when adding the next parameter would pass bucket_cap_mb of fp32 gradient, and a
// parameter larger than the cap gets a bucket of its own.
//
// Pipeline of one step (streams and events of tandem/stream.h; three streams on the device:
// the compute stream ops run on, a D2H and an H2D copy stream; one host update thread, that of
// the buckets' host-update pipeline, tandem/optim/host_update_pipeline.h):
//  1. During backward (attach() installs a grad-ready hook on the model), once every parameter
//     of bucket k has its final gradient: an event E[k] is recorded on the compute stream, the
//     D2H stream waits for it and copies the bucket's gradients into the host grads, event
//     D2H[k] is recorded, and bucket k is queued for the update thread. Buckets whose
//     parameters were not reported (a model without a hook, unused parameters) are launched
//     the same way at step().
//  2. The update thread takes buckets in order: waits (host) for D2H[k], runs the update of the
//     optimizer make_optimizer(name, ..., options) builds (Optimizer::update_part, at the lr
//     captured at launch) over stand-ins of the bucket's parameters that view their ranges of
//     the host buffers (its state slots live in the flat state buffers: set_state_home), then
//     enqueues the copies of the bucket's master range into the device parameters on the H2D
//     stream and records H2D[k]. So bucket k is updated while
//     bucket k+1's gradients are still in flight and the device still runs backward.
//  3. step() returns once the update thread has ENQUEUED the uploads the next forward needs; the
//     compute stream then waits for those H2D events and for the D2H events (so zero_grad is
//     ordered after the copies read the gradients). The device waits; the host does not wait
//     for the copies.
//
// delay = 0: step s (0-based) computes its gradient at the parameters after s updates, exactly
//   as the on-device optimizer: the same optimizer's update on the same fp32 inputs, so the
//   weights are bit-identical (bf16 moments included: OptimizerOptions::moments_dtype).
// delay = 1 (the one-step delayed parameter update, DPU, of the ZeRO-Offload paper, section 5):
//   the CPU update of step s runs while the device computes forward and backward of step s+1
//   (after delay_warmup_steps updates without delay).
//   Its upload of bucket k is gated on E[k] of step s+1 (backward of step s+1 no longer reads
//   those parameters) and step s+1 makes the compute stream wait for it before step s+2's
//   forward. Step s+1's gradients go to the other host grads buffer, so they never overwrite
//   gradients the update of step s still reads. Hence, with M_n the master parameters after n
//   updates (M_{n+1} = update(M_n, g_n)), step s computes its gradient g_s at
//     delay 0: M_s;     delay 1: M_s for s <= W and M_{s-1} for s > W (stale by one step),
//   W = delay_warmup_steps (0: only step 0 computes at fresh parameters).
//   flush() uploads the pending update, so the step after a flush computes at the latest
//   parameters and the delay restarts from there.
//
// Errors: construction throws Error(invalid_argument) for an unknown optimizer name, bad
// hyper-parameters (the make_optimizer rules), bucket_cap_mb <= 0, a delay other than 0 or 1,
// delay_warmup_steps < 0, parameters on several devices, a grad whose shape or device
// differs from its value's, or bf16 moments with shard_world_size > 1.
// An exception on the update thread (a kernel or copy error) is rethrown on the training
// thread at the next step() or flush() and at every call after it. Destruction never hangs:
// it lets the update thread drain its queue (queued jobs skip their work), joins it,
// and waits for the copies in flight before the host buffers go back to the pool.
//
// Membership is fixed at construction: parameters with requires_grad and a defined grad are
// updated, the others are never touched. The master copy is read from the device parameters at
// construction and by load_state(); change the parameters only through this optimizer.
// Gradient accumulation (several backward passes per step): with the hook attached,
// set_micro_batch(k, K) before each backward makes the hook launch nothing before the last one
// (the gradients accumulate on the device) and scales each bucket's summed gradients by 1 / K
// on the compute stream before they come down; without the hook the buckets launch at step(),
// after the last backward, as the caller left the gradients.
//
// Thread-safety: as Optimizer (one training thread calls everything); the update thread is
// internal. step(), flush() and the hook must run on the thread that enqueues the model's ops.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/optim/optimizer.h"

namespace tandem::storage {
class DiskStore;
}  // namespace tandem::storage

namespace tandem::optim {

struct OffloadOptions {
  /// Bucket capacity in MiB (2^20 bytes) of fp32 gradient; > 0 (PyTorch DDP's bucket_cap_mb).
  double bucket_cap_mb = 25.0;
  /// MiB of the first bucket alone; 0 = bucket_cap_mb (distributed runs use 1, as DDP).
  double first_bucket_cap_mb = 0;
  /// Distributed runs: called on the update thread with each bucket's host gradients (a flat
  /// f32 view, alignment padding included) after they arrived and before its update, to
  /// average them over the ranks in place. Buckets come in order 0, 1, ... every step, the
  /// same on every rank.
  std::function<void(int bucket, const Tensor& grads)> reduce_grads;
  /// ZeRO-1 over the ranks of a distributed run (ZeRO-Offload's layout, Ren et al. 2021,
  /// section 4.2): with shard_world_size N > 1 every bucket's flat range is padded to a multiple
  /// of 16 N elements and cut into N equal blocks (shard_range of tandem/shard_range.h, align
  /// 16: the shard rule of every layout); this optimizer updates block shard_rank of
  /// each bucket and keeps optimizer state (moments, momentum) for those blocks only, 1/N of it
  /// (the master copy and the gradient buffers stay whole: the gradients arrive whole from the
  /// device and the whole parameters go back to it). Both functions are called on the update
  /// thread, buckets in order 0, 1, ... every step, the same on every rank, and replace
  /// reduce_grads:
  ///   reduce_scatter_grads(bucket, grads, block): `block` ([grads.numel() / N] f32, host) must
  ///     become the mean over the ranks of block shard_rank of `grads` (the bucket's range);
  ///   all_gather_params(bucket, block, params): `params` (the bucket's master range) must become
  ///     the ranks' blocks one after another, rank 0 first (`block` holds this rank's, updated).
  /// Element-wise kernels: each element gets exactly the update the unsharded optimizer gives
  /// it, so the weights are bit-identical to shard_world_size 1. state() throws
  /// Error(not_available) when sharded (no rank holds the whole state); load_state() takes the
  /// whole state and keeps this rank's blocks of it (no ".master" entries then).
  int shard_rank = 0, shard_world_size = 1;
  std::function<void(int bucket, const Tensor& grads, const Tensor& block)> reduce_scatter_grads;
  std::function<void(int bucket, const Tensor& block, const Tensor& params)> all_gather_params;
  /// 0: the update of step s is uploaded before step s+1's forward; 1: one step delayed (DPU).
  int delay = 0;
  /// With delay 1: the first this many updates are not delayed (the paper starts DPU after a
  /// few dozen warm-up iterations, when the gradients no longer change fast); >= 0.
  int64_t delay_warmup_steps = 0;
  /// OpenMP threads of the update thread's kernels; 0 = the constructing thread's
  /// ops::get_num_threads().
  int num_threads = 0;
  /// Called on the update thread before each bucket's kernels with the bucket and the 1-based
  /// step number (instrumentation and tests; an exception it throws fails the optimizer).
  std::function<void(int bucket, int64_t step)> before_update;
  /// The dtype gradients come down and parameters go up in: f32, or the model's compute dtype
  /// (bf16, f16) in a mixed-precision run. With bf16/f16 each gradient (f32 on the device) is
  /// rounded to it on the compute stream (nearest even; amp_scale by 1, one op per parameter)
  /// into a device buffer, copied down in half the bytes and widened to f32 on the host
  /// (widen_to_f32, exact); the f32 kernels update the f32 master copy and moments on the host
  /// and write each parameter's rounded copy, which goes up into its Parameter::compute (the
  /// tensor the forward reads); parameters without a compute copy (biases, batch-norm) go up
  /// in f32 into their value. The device's f32 values of the parameters with a copy are not
  /// updated per step: flush() and write_master_values() write the master copy into them.
  /// Every member parameter's compute copy, if any, must have this dtype. Not with
  /// shard_world_size > 1.
  DType transfer_dtype = DType::f32;
  /// The disk tier (tandem/storage/disk_store.h; "" = none): the f32 master copy and the
  /// optimizer's state slots live in files under this folder instead of pinned memory, one
  /// unit per bucket: the update thread reads a bucket's state before its update (and the
  /// next buckets' ahead of theirs), and writes it back behind the bucket's upload; host memory
  /// holds disk_read_ahead + 3 buckets of it at most. Each bucket starts on a multiple of
  /// DiskStore::kUnitAlign elements. The folder is checked first (check_offload_dir: Error
  /// (invalid_argument) naming --offload-dir). Weights are bit-identical to the pinned state.
  /// Only with delay 0 and shard_world_size 1. state(), load_state(), master_params() bring
  /// the whole state into host memory until each bucket's next update writes it back.
  std::string disk_dir;
  int disk_read_ahead = 2;
  int disk_queue_depth = 8;
  size_t disk_request_bytes = 1 << 20;
  /// Planning: a modelled drive of these GB/s (storage::DiskStoreOptions::model_*; 0: none).
  double disk_model_read_gbps = 0, disk_model_write_gbps = 0;
  /// The checks of a step that clipping and dynamic loss scaling make before an update
  /// (torch.nn.utils.clip_grad_norm_, GradScaler), on the host's gradients:
  ///  - loss_scale: a LossScaler's state (tandem/amp_ops.h, [4] f32 on the parameters'
  ///    device; undefined: no scaling). Its scale is copied down with each bucket's gradients
  ///    (in stream order: the scale the step's loss gradient used); the host checks every
  ///    gradient for inf/NaN and multiplies it by the f32 1 / scale (amp_unscale_check_'s
  ///    maths). A step with an inf/NaN is skipped: no parameter, moment or step count changes
  ///    (last_step_skipped(); Optimizer::step_count() does not advance).
  ///  - clip_grad_norm > 0: then ops::clip_grad_norm_ over the host gradients of every member
  ///    in parameter order (the global L2 norm; the gradients times min(1, max / (norm +
  ///    1e-6))).
  /// With `speculate` (SuperOffload's speculation, then validation) each bucket is still
  /// updated as soon as its gradients arrive, keeping what the update overwrites
  /// (Optimizer::save_part); after the step's last bucket one task on the update thread runs
  /// the checks and, when they skip the step or clipping scales the gradients, restores the
  /// buckets (Optimizer::restore_part) and updates them again from the clipped gradients, and
  /// uploads them again. Without it every update waits for the checks (the synchronous
  /// reference). Both give the same bits. With delay 1 the checks of step s run before the
  /// uploads of update s; a skipped step's restored values go up in their place. Not with
  /// shard_world_size > 1 (no rank holds every gradient of the step's updates).
  Tensor loss_scale;
  double clip_grad_norm = 0;
  bool speculate = true;
};

/// Bytes the per-step copies of an offloaded optimizer move: gradients down, parameters up.
struct OffloadTransfer {
  uint64_t to_host = 0, to_device = 0;
};

/// How an offloaded optimizer runs (OffloadOptimizer::layout(); the banner's figures): its
/// gradient buckets, the update's delay (0, or 1 for the one-step delayed update), the dtype
/// gradients come down and parameters go up in, the bytes one step's copies move, the host
/// memory (bytes) of the flat buffers, and whether the state is sharded over
/// OffloadOptions::shard_world_size > 1 ranks (ZeRO-1).
struct OffloadLayout {
  bool sharded = false;
  int buckets = 0;
  int delay = 0;
  DType transfer_dtype = DType::f32;
  OffloadTransfer per_step;
  size_t host_bytes = 0;
  /// The disk tier: the files' bytes and the store's description ("" without one).
  uint64_t disk_bytes = 0;
  std::string disk;
};

/// One bucket: the parameters it holds and its range of the flat host buffers, in elements.
struct OffloadBucket {
  std::vector<size_t> params;  // indices into Optimizer::params(), in flat-buffer order
  int64_t begin = 0, end = 0;  // [begin, end) of the flat buffers
};

/// Partitions parameters of `numels` elements (registration order) into buckets of whole
/// parameters in reverse registration order, each holding at most `cap_bytes` of fp32 unless a
/// single parameter is larger; ranges follow one another in bucket order, each parameter's
/// range starting on a multiple of 16 elements. Throws Error(invalid_argument) for cap_bytes
/// == 0 or a negative numel.
/// `first_cap_bytes` (0 = cap_bytes) caps the first bucket alone, as PyTorch DDP's 1 MiB first
/// bucket: the gradients of the last layers start travelling early.
std::vector<OffloadBucket> plan_offload_buckets(const std::vector<int64_t>& numels, size_t cap_bytes,
                                                size_t first_cap_bytes = 0);
/// A bucket capacity in MiB as bytes: at least 1, at most 2^62 (any model fits one bucket).
size_t bucket_cap_bytes(double mib);

class OffloadOptimizer final : public Optimizer {
 public:
  /// `name`: "sgd", "adam" or "adamw", with `options` read as make_optimizer reads them.
  /// Copies the parameters to the host master buffer (waits for the copies) and starts the
  /// update thread. Throws as described at the top of this header and Error(out_of_memory)
  /// when the pinned pool cannot hold the host state.
  OffloadOptimizer(const std::string& name, std::vector<nn::Parameter*> params,
                   const OptimizerOptions& options = {}, const OffloadOptions& offload = {});
  /// Detaches from the model, drains and joins the update thread, waits for the copies.
  ~OffloadOptimizer() override;

  const char* name() const override { return name_.c_str(); }

  /// Installs a grad-ready hook on `module` (the model whose parameters this optimizer holds)
  /// so buckets launch during backward. The module must outlive the attachment; the
  /// destructor and detach() remove the hook.
  void attach(nn::Module& module);
  /// Removes the hook; buckets then launch at step().
  void detach();
  /// Whether a hook is installed (attach() without detach() since).
  bool attached() const;
  /// Gradient accumulation with the hook attached: the next backward is micro-batch `k`
  /// (0-based) of the step's `count` (>= 1). Before the last one (k < count - 1) the hook
  /// launches nothing: the gradients accumulate on the device. From the last one on (its
  /// backward, then step()) each bucket's gradients are scaled in place by 1 / count on the
  /// compute stream (ops::scale_ by the f32 1 / count, nothing for count 1) before they are
  /// rounded or copied down: the mean over the micro-batches, the same op an on-device
  /// update's caller applies, so delay 0 stays bit-identical to it. Stays in force until the
  /// next call (count 1: every backward launches, unscaled). Throws Error(invalid_argument)
  /// unless 0 <= k < count, and between a backward that launched buckets and its step().
  void set_micro_batch(int64_t k, int64_t count);

  /// Applies the pending delayed update (delay 1), waits (host) until every update issued so
  /// far has been uploaded, and orders the compute stream after the uploads. Call it between
  /// steps, before evaluation, saving, state() and at the end of training. Rethrows an
  /// error of the update thread; throws Error(invalid_argument) between a backward that
  /// launched buckets and its step(). With low-precision transfers it then writes the master
  /// copy into the device values too (write_master_values()).
  void flush();
  /// Waits (host) until the update thread has run every update issued so far, so that the
  /// host state (master copy, moments) is final, WITHOUT applying the pending delayed update:
  /// unlike flush() it leaves the math of the following steps unchanged (checkpoints). Copies
  /// of earlier uploads may still be in flight (they only read the host state). Rethrows an
  /// error of the update thread; throws Error(invalid_argument) between a backward that
  /// launched buckets and its step().
  void finish_host_updates();
  /// Low-precision transfers (OffloadOptions::transfer_dtype bf16/f16): after
  /// finish_host_updates(), copies the f32 master copy into the device values of the
  /// parameters that go up in low precision and waits, so that the model's state (a
  /// checkpoint) holds the master weights; a no-op in f32. Throws Error(not_available) while a
  /// delayed upload is pending (the device's copies are one update behind the master copy).
  void write_master_values();
  /// With OffloadOptions::loss_scale: whether the last step() found an inf/NaN gradient and was
  /// skipped (read after step() returned: the check ran then).
  bool last_step_skipped() const;
  /// With the checks of OffloadOptions: the global L2 norm of the last checked step's (unscaled)
  /// gradients, as clip_grad_norm_ computed it (NaN before a check, and without clipping).
  float last_grad_norm() const;
  /// Whether the last update waits for its upload (delay 1 after the warm-up, until the next
  /// step or flush()): the device parameters are then those of update step_count() - 1.
  bool upload_pending() const;

  /// Views into the flat host buffers, named "<parameter>.exp_avg", ".exp_avg_sq" (adam,
  /// adamw; f32, or bf16 with bf16 moments; writing into them changes the state) or
  /// ".momentum_buffer" (sgd with momentum), and the i64 scalar "<parameter>.step" (adam,
  /// adamw) holding step_count() (the optimizer's per-parameter count: every member is
  /// updated at every step); the optimizer's state() (Optimizer::state); with
  /// upload_pending() also "<parameter>.master", the master copy the pending upload carries
  /// (the device parameters are one update behind it). Only for parameters that have had an
  /// update. Throws Error(invalid_argument) while updates are in flight (call flush() or
  /// finish_host_updates() first).
  std::vector<nn::NamedTensor> state() const override;
  /// Flushes, then copies state saved by state() (or by the on-device optimizer of the same
  /// name) into the host buffers and re-reads the master copy from the device parameters.
  /// "<parameter>.step" entries must all equal `step_count` (one count for all parameters;
  /// a member without one gets step_count). Moments in the other of f32 / bf16 are converted
  /// as Optimizer::load_state converts them.
  /// With ".master" entries (one per parameter, step_count >= 1) the master copy is taken
  /// from them instead and their upload is pending again: the next step computes at the
  /// device parameters (restore those first: update step_count - 1) and then uploads the
  /// master copy, exactly as the saved run would have continued.
  /// Throws Error(invalid_argument) for an unknown name, a shape/dtype mismatch or ".master"
  /// entries for only some parameters, leaving the state unchanged.
  void load_state(const std::vector<nn::NamedTensor>& state, int64_t step_count) override;

  /// One slot of a parameter's state over a range of its elements: `name` as state() names
  /// the whole tensor ("<parameter>.exp_avg", ".step"), `tensor` a contiguous flat host view
  /// of its elements [begin, begin + numel) (the i64 step counters: the scalar, begin 0).
  struct StateSlice {
    std::string name;
    int64_t begin = 0;
    Tensor tensor;
  };
  /// The state this rank holds, sharded (ZeRO-1: its block of every bucket) or not (whole
  /// parameters): the parts a sharded checkpoint writes. No ".master" entries. Empty before
  /// the first step. Throws Error(invalid_argument) while updates are in flight (call
  /// finish_host_updates() first), Error(not_available) while a delayed upload is pending.
  std::vector<StateSlice> state_slices() const;

  /// Sharded with shard_world_size > 1; buckets, delay, transfer dtype, bytes per step and
  /// host bytes as the accessors below give them.
  OffloadLayout layout() const;

  const std::vector<OffloadBucket>& buckets() const;
  /// Buckets whose gradient copies the current step has issued so far (during backward, through
  /// the hook); step() launches the rest and resets it to 0.
  int launched_buckets() const;
  int delay() const;
  /// The flat fp32 master parameters (a host view, all buckets in bucket order); read it after
  /// flush().
  Tensor master_params() const;
  /// Bytes of host memory the flat buffers hold (with the disk tier: the pinned ones and the
  /// store's window).
  size_t host_bytes() const;
  /// The disk tier's store (null without one): its figures (bytes read and written).
  const storage::DiskStore* disk_store() const;
  /// OffloadOptions::transfer_dtype.
  DType transfer_dtype() const;
  /// The bytes one step's copies move: every member's gradient in transfer_dtype down; up, the
  /// parameters with a compute copy in transfer_dtype and the others in f32.
  OffloadTransfer bytes_per_step() const;
  /// The bytes the per-step copies have moved since construction (flush()'s uploads of a
  /// pending update included; the master copy's reads and write_master_values() not).
  /// Thread-safety: may be read while the update thread runs.
  OffloadTransfer bytes_moved() const;
  /// The slots of the optimizer that does the maths (make_optimizer(name, ..., options)).
  std::vector<std::pair<std::string, DType>> state_keys() const override;

 protected:
  void update_all() override;
  void update(size_t index, nn::Parameter& p) override;

 private:
  // flush() without writing the master copy into the device values (load_state()).
  void flush_uploads();
  struct Impl;
  std::string name_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::optim
