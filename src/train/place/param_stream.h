// ParamStreamer: --param-device cpu (DeepSpeed's offload_param; ZeRO-Infinity, MegaTrain). A
// GPT's parameters, gradients and optimizer state live in host memory between uses: the fp32
// values in pinned host memory, the optimizer's moments beside them, updated by the host
// optimizer (12 bytes per parameter with AdamW; MegaTrain's homes). The bf16/fp16 compute
// copy of a weight is made while uploading, rounded from the f32 value into a pinned staging
// buffer (two for the blocks, one for the outer part), as the update would round it. A
// block's gradients come down into a transient slab (kGradSlabs of the largest block's f32
// bytes, taken in turn; a slab is reused once the update that consumed it ran) where the
// host updates each part during the backward; they have f32 homes of their own (4 bytes per
// parameter more) where they must outlive it: with --clip-grad-norm or loss scaling (the
// update after the backward), --offload-delay 1 (the next step's update reads them) and
// --grad-accum-steps > 1 (the homes hold the running sums). The outer part's gradients have
// their home always. Under --zero 3 the shards keep their own layout (shard_homes.h). The device holds the outer
// part (embeddings, ln_f, the tied lm_head) for the duration of a step and the blocks in
// flight in a ring of prefetch depth + 2 fixed buffers (slots), allocated once:
//  - forward: use(i) waits (device-side) for block i's upload and starts the uploads of blocks
//    i + 1 .. i + depth not yet in a slot on the upload stream, so the copies overlap block i's
//    compute (a depth above 1 lets a block with little compute hide the upload of a large block
//    after it, as a ResNet's last stages); done(i) frees block i's slot for reuse once the
//    compute stream passed it (an event: the host never blocks);
//  - backward: blocks still in their slot from the forward are not fetched again; the others
//    come back depth ahead in reverse order; each block's gradients go to their host home on the
//    download stream as soon as its backward is enqueued, and its slot is free once they did;
//  - done(outer, backward) waits (host) for the last downloads, so that the optimizer's step
//    reads final gradients and no upload still reads the values it rewrites;
//  - with set_host_update (ZeRO-Offload's overlap), each part is instead updated on the
//    streamer's host-update pipeline (optim::HostUpdatePipeline, the offloaded optimizer's
//    too; its units are the parts) as soon as its gradients reached the host, while the device runs the backward of the
//    parts before it (blocks L - 1 .. 0, then the outer part, whose gradients are final last);
//    a part is uploaded again only once its update ran, and the step ends with
//    finish_updates().
//  - with a delay of 1 (--offload-delay 1, ZeRO-Offload's one-step delayed parameter update),
//    step s computes with the weights before update s - 1, which runs on the update thread
//    during step s: the uploads read one of two upload copies per parameter while the update
//    writes the master and the other copy, and a part's gradients go down only once its
//    previous update read them. The next forward then waits for no update; flush() applies
//    the pending one (before an evaluation, a checkpoint or the end of training).
// Upload: per parameter the tensor its op reads (Parameter::as: the compute copy under
// bf16/fp16 for linear and embedding weights, else the f32 value); gradients f32, zeroed on
// the compute stream before each backward (and before the forward for the outer part, whose
// lm_head gradient the fused loss adds). The kernels and their inputs are those of a resident
// model, so the weights after training are bit-identical to training with every parameter on
// the device (tests/memory/param_stream_test.cpp).
// Gradient accumulation (set_micro_batch, --grad-accum-steps K): the device sums the
// micro-batches' gradients in the part's gradient buffers exactly as a resident model sums them
// in its own. Each part's running sum goes home after every micro-batch's backward (its f32
// home; --zero 3: a whole accumulation home per entry) and, from the second micro-batch on, is
// uploaded back into the buffers before the part's gradients are added to (in place of the
// zeroing), ahead of its compute on the upload stream. The last micro-batch scales the sums by
// the f32 1 / K on the device (the resident average's op) before they go down, and only then
// are the parts' updates queued (and --zero 3's reduce-scatters issued), overlapped with that
// backward: the weights are bit-identical to resident training with the same accumulation.
// --zero 3 (`shard_comm`, every rank of mpirun one streamer; train/place/shard_homes.h): each
// rank keeps only its shard of every part's master values, compute copies, gradients and
// optimizer state. A fetch all-gathers the part into the host stage of its device buffer (the
// training thread waits for it) and uploads from there; a part's gradients go down into the
// stage and are reduce-scattered (averaged) into the rank's shard before its update, which
// updates the shard's pieces (optimizer_params()). The update thread issues every collective,
// gathers and reduce-scatters in the order the training thread queued them, which is the
// same on every rank. Between uses a parameter's tensors are views of a stage (their shapes
// are right, their values not: gather_weights() makes them whole).
// Data parallel over whole host homes (mpirun without --zero 3, set_grad_reduce): every rank
// streams the whole model from homes of its own, as one process does, and the update thread
// replaces each part's host gradients by their mean over the ranks (host all-reduces: each
// large gradient in its home, the part's small ones packed into one) before the part's update
// and checks. The parts come in the backward's order on every
// rank, so the collectives match; the update of a part waits for its all-reduce, the device's
// backward of the parts before it does not. Elementwise means of the same per-rank gradients:
// the weights are bit-identical to a resident data-parallel run's.
// Thread-safety: one thread (the training thread), as Module; the update thread touches only
// the parameters (and optimizer state) of the part it updates, which no other call reads until
// the part's update ran.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/optim/host_update_pipeline.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"
#include "tandem/comm/communicator.h"
#include "train/place/shard_homes.h"
#include "train/place/stream_layout.h"

namespace tandem::storage {
class DiskStore;
struct DiskStoreOptions;
}  // namespace tandem::storage

namespace tandem::train {

class ParamStreamer final : public nn::ParamStream {
 public:
  /// Blocks uploaded ahead of the one computing (--param-prefetch): at least 1, at most
  /// kMaxPrefetchDepth. The slots are one per block in flight: the one computing, `depth`
  /// arriving, the one whose gradients are leaving (depth + 2, and at most one per block).
  static constexpr int kMaxPrefetchDepth = 8;
  static int slots_for(int64_t blocks, int prefetch_depth);
  /// The blocks actually uploaded ahead with `slots` slots: the depth, but no more than the
  /// slots leave besides the one computing (at least 1).
  static int64_t ahead_for(int64_t slots, int64_t prefetch_depth) {
    return std::min<int64_t>(prefetch_depth, std::max<int64_t>(1, slots - 1));
  }

  /// Moves every parameter of the layout's parts (on the host, compute copies made) and the
  /// module buffers beside them into pinned host memory (pinned_allocator(), so
  /// --max-pinned-gb counts it), allocates the outer part's and the slots' device memory on
  /// `device` (an accelerator) and installs itself on the model (layout.install), which must
  /// outlive it. Blocks of equal shapes (a GPT's) get slots of fixed tensors; blocks that
  /// differ (a ResNet's stages) share slots of the largest block's bytes, each fetch laying
  /// its tensors out in them; slots_for(blocks, prefetch_depth) of them. Throws
  /// Error(invalid_argument) for a host device, a parameter away from the host or a depth
  /// outside [1, kMaxPrefetchDepth], Error(out_of_memory) from the allocators.
  /// `device_parts` (--optimizer-split, device_parts_for_split): the first that many parts in
  /// the order outer, block 0, block 1, ... are not streamed: their values, compute copies,
  /// gradients and module buffers move to `device` for good, and with set_host_update their
  /// update runs there (on the compute stream, at finish_updates), the rest on the host.
  /// `shard_comm` (--zero 3; null: not sharded): the ranks the host state is sharded over
  /// (host buffers: mpi_world()); every rank constructs its streamer from the same initial
  /// values. Throws Error(invalid_argument) for it with device_parts > 0.
  ParamStreamer(StreamLayout layout, Device device, int prefetch_depth = 1, int device_parts = 0,
                comm::CommunicatorPtr shard_comm = nullptr);
  /// The layout of `model`'s declared blocks (stream_layout; throws as it for a model
  /// without blocks).
  ParamStreamer(nn::Module& model, Device device, int prefetch_depth = 1, int device_parts = 0,
                comm::CommunicatorPtr shard_comm = nullptr);
  ParamStreamer(const ParamStreamer&) = delete;
  ParamStreamer& operator=(const ParamStreamer&) = delete;
  /// Uninstalls itself and waits for the copies in flight (their errors are not raised).
  ~ParamStreamer() override;

  void use(int part, nn::StreamPass pass) override;
  void done(int part, nn::StreamPass pass) override;

  /// The coming passes are micro-batch `k` (0-based) of `count` of a step (--grad-accum-steps;
  /// the default 0 of 1): the backward of a micro-batch before the last adds to the parts'
  /// running gradient sums and queues no update; the last one scales the sums by 1 / count,
  /// and queues the updates as a single micro-batch does. Call before the micro-batch's
  /// forward, every micro-batch. The first call with count > 1 under --zero 3 allocates the
  /// whole accumulation homes (pinned, f32; accum_bytes()). Throws Error(internal) for k
  /// outside [0, count), Error(out_of_memory) from the pinned allocator.
  void set_micro_batch(int64_t k, int64_t count);
  /// Pinned bytes of --zero 3's accumulation homes (0 until set_micro_batch(k, count > 1), and
  /// without shards, where the gradient homes hold the sums).
  int64_t accum_bytes() const { return accum_bytes_; }

  /// Transient buffers (not sharded): the block gradient slabs taken in turn (at most that
  /// many, one per streamed block) and the pinned staging buffers the blocks' compute copies
  /// are rounded into before their upload (at most that many; the outer part has its own).
  static constexpr int kGradSlabs = 3;
  static constexpr int kStagings = 2;
  /// Bytes of a slab or staging buffer holding tensors of `bytes` each, laid out at 256-byte
  /// boundaries.
  static int64_t laid_out_bytes(const std::vector<int64_t>& bytes);
  /// Pinned bytes now: the f32 values and compute copies' homes (delay 1: the upload copies),
  /// the gradients' homes and slabs, and the staging buffers.
  struct HostBytes {
    int64_t values = 0, gradients = 0, staging = 0;
  };
  HostBytes host_bytes() const;

  /// Per-part updates during backward: from now on `opt` (an optimizer over the GPT's
  /// parameters, host-side, without a skip gate) updates each part on the streamer's update
  /// thread once its gradients are home, and the training thread calls finish_updates()
  /// instead of opt->step(). The lr must be set before the backward. Call between steps;
  /// nullptr turns it off. Throws Error(invalid_argument) for a parameter `opt` does not hold.
  /// `delay` 1 defers each step's update to the next step (the steps before `delay_warmup` are
  /// not deferred), as OffloadOptimizer's delay: two upload copies per parameter are made from
  /// the homes (pinned: the compute copy rounded twice, or twice the f32 value for parameters
  /// uploaded in f32). Throws Error(invalid_argument) for a delay other than 0 or 1.
  /// `transient_grads` (the training run's choice): without a delay, sharding, accumulation or
  /// the checks (set_checks), a block's gradients come down into one of kGradSlabs slabs, which
  /// its update consumes; a parameter's grad then holds its gradients only until the update ran
  /// (later blocks reuse the slab). false: every block keeps gradient homes of its own,
  /// readable after the step.
  void set_host_update(optim::Optimizer* opt, int delay = 0, int64_t delay_warmup = 0, bool transient_grads = false);
  bool updates_in_backward() const { return opt_ != nullptr && !hold_; }
  /// --zero 3 with --clip-grad-norm or dynamic loss scaling: after set_host_update(opt) (delay
  /// 0), `hold` true keeps the update thread reduce-scattering each part's gradients into this
  /// rank's shard as the backward passes it, but updates nothing there: the step ends with
  /// finish_reductions(), check_shards() (loss scaling; a step it skips ends there),
  /// clip_shards() and opt->step() on the calling thread (the verdict and the global norm need
  /// every shard's gradients first). Throws Error(invalid_argument) when not sharded, without
  /// host updates or with a delay.
  void set_hold_updates(bool hold);
  bool holds_updates() const { return hold_; }
  /// Holding: waits until every part's gradients of this step were reduce-scattered (the
  /// pipeline's step ends without an update); rethrows an error of the update thread. A no-op
  /// when not holding or when nothing was queued since the last call.
  void finish_reductions();
  /// Sharded, a collective (every rank, after finish_reductions()): the global L2 norm of the
  /// gradients of `order`'s parameters (the model's, in its order; those with requires_grad)
  /// from every rank's shards, the same bits on every rank, written to `total_norm` ([1] f32,
  /// host); the shards' gradients are then scaled by min(1, max_norm / (norm + 1e-6)) in f32,
  /// as ops::clip_grad_norm_. One rank: ops::clip_grad_norm_ itself over the whole gradients,
  /// the unsharded bits.
  void clip_shards(double max_norm, const std::vector<nn::Parameter*>& order, const Tensor& total_norm);
  /// Sharded, a collective (every rank, after finish_reductions()), dynamic loss scaling: the
  /// shards' gradients unscaled by `scale` (the scaler's host_scale()) and checked for inf/NaN,
  /// the ranks' flags summed (ShardedHomes::unscale_check): whether any rank's shard held one,
  /// the same verdict on every rank. True: the caller skips the step (no clip, no opt->step()).
  /// On one rank the unsharded checks' bits (set_checks's unscale, element by element).
  bool check_shards(float scale);
  /// The checks of a step, after set_host_update (optim::OffloadOptions' checks, for the
  /// parts): clipping of the global L2 norm at `clip` (> 0; ops::clip_grad_norm_ over the host
  /// gradients in the optimizer's parameter order) and, with `scaler`, the unscale by its
  /// host_scale() and the inf/NaN check of each part's host gradients, a step with one skipped
  /// (last_step_skipped(); no finish_parts). With `speculate` each part is still updated once
  /// its gradients are home, keeping what the update overwrites (Optimizer::save_part), and one
  /// task after the step's parts restores and updates them again when the checks say so;
  /// without, the updates wait for the checks. The same bits either way. The blocks' gradients
  /// then keep homes of their own (no transient slabs: the checks read them after the
  /// backward). Call between steps; throws Error(invalid_argument) when sharded or with device
  /// parts.
  void set_checks(double clip, const optim::LossScaler* scaler, bool speculate = true);
  bool checked() const { return clip_ > 0 || scaler_ != nullptr; }
  bool last_step_skipped() const { return skipped_; }
  int delay() const { return pipeline_ ? pipeline_->delay() : 0; }
  /// Ends the optimizer's step (Optimizer::finish_parts). Without a deferred update it first
  /// waits until every part's update of this step ran; a deferred one keeps running into the
  /// next step. Rethrows the first error an update threw (the step then ends without
  /// finish_parts; the parameters may be partly updated).
  void finish_updates();
  /// Waits until every queued update ran, so that the homes hold the newest weights and the
  /// next pass computes with them (a pending delayed update applied, as OffloadOptimizer::
  /// flush). Rethrows an update's error. A no-op without host updates.
  void flush();
  /// Waits until every queued update ran (the homes and the optimizer's state final) without
  /// applying a pending delayed update: the next step computes with the same weights as it
  /// would have (checkpoints). Rethrows an update's error.
  void wait_updates();
  /// Whether the next step computes with the weights before the last update (delay 1, a
  /// deferred update not flushed): then pending_weights() are those weights, one tensor per
  /// parameter as its op reads it (the compute copy under bf16/fp16 for linear and embedding
  /// weights, else the f32 value), named as the parameter. Valid until the next step.
  bool update_pending() const { return delay() == 1 && next_read_ != write_; }
  std::vector<nn::NamedTensor> pending_weights() const;
  /// The homes were written from outside (a checkpoint loaded into the parameters): the
  /// upload copies of a delayed update are made anew from them, and with `pending` (a
  /// checkpoint's pending_weights(), every parameter's) the next step computes with those, the
  /// homes' update published for the step after, as in the run that saved them. Call between
  /// steps. Throws Error(invalid_argument) naming a tensor missing from `pending` or of another
  /// shape or dtype, or for `pending` without a delay.
  void reload_homes(const std::vector<nn::NamedTensor>& pending = {});
  /// Pinned bytes of the upload copies a delay of 1 adds (0 without).
  int64_t delay_copy_bytes() const { return delay_copy_bytes_; }

  /// The disk tier (--optimizer-state-device disk; param_stream_disk.cpp): after
  /// set_host_update (delay 0, not sharded) on a streamer whose layout kept the model's values
  /// (StreamLayout::values_to_disk), the f32 master values of the parameters uploaded as
  /// compute copies and the optimizer's state of every streamed part go into a
  /// storage::DiskStore, one unit per part in the order the updates run; the host keeps the
  /// compute copies (pinned, rewritten by each update) and the f32 values uploaded as they are.
  /// Throws Error(invalid_argument) otherwise, the store's errors (Error(io)).
  void set_disk_tier(const storage::DiskStoreOptions& options);
  const storage::DiskStore* disk_store() const { return disk_.get(); }
  /// The disk tier: every part's master values and state in host memory, readable and
  /// writable (checkpoints, saving, restoring) until each part's next update writes it back.
  void disk_all_in();
  /// The disk tier, after a checkpoint was loaded into the master values: the compute copies
  /// rounded from them again.
  void disk_reloaded();

  /// Figures so far: bytes uploaded (values and compute copies) and downloaded (gradients),
  /// and block uploads (a block found still in its slot is not counted).
  int64_t bytes_to_device() const { return to_device_bytes_; }
  int64_t bytes_to_host() const { return to_host_bytes_; }
  int64_t block_fetches() const { return block_fetches_; }
  /// Device bytes of the outer part and of one slot (values or compute copies + gradients).
  int64_t outer_device_bytes() const { return outer_bytes_; }
  /// The layers of the outer part in short (StreamLayout::outer_label): "embedding, ln_f and
  /// lm_head", "stem, classifier"; for the banner.
  const std::string& outer_label() const { return outer_label_; }
  int64_t slot_device_bytes() const { return slot_bytes_; }
  int slots() const { return static_cast<int>(slots_.size()); }
  /// --optimizer-split: the parts at home on the device, their elements and device bytes
  /// (values, compute copies, gradients, module buffers; the optimizer's state comes on top).
  int device_parts() const { return static_cast<int>(std::count(resident_.begin(), resident_.end(), true)); }
  int64_t device_part_elements() const { return resident_elements_; }
  int64_t device_part_bytes() const { return resident_bytes_; }
  int prefetch_depth() const { return depth_; }

  /// --zero 3: whether the host state is sharded, and the shards (null when not).
  bool sharded() const { return shards_ != nullptr; }
  const ShardedHomes* shards() const { return shards_.get(); }
  /// Data parallel over whole host homes (--param-device cpu under mpirun without --zero 3;
  /// every rank a streamer of the whole model, built from the same values): `reduce` replaces
  /// a flat f32 host buffer (contiguous) by its mean over the ranks. It runs on the update
  /// thread for each bucket of a part once the part's gradients are home, before its update
  /// and checks (set_checks' unscale, inf/NaN check and norm read the means). A part's
  /// buckets (grad_reduce_buckets()): each gradient of kReduceInPlaceBytes or more by itself,
  /// in its home; the smaller ones copied into one buffer, reduced once and copied back.
  /// `index` numbers the buckets in the order of the backward (block L - 1's, ..., block 0's,
  /// then the outer part's), the same every step and on every rank, so the ranks' collectives
  /// match; 0 begins a step. Accumulation: the last micro-batch's gradients only (the updates
  /// are queued then). Null: off. Call between steps. Throws Error(invalid_argument) when
  /// sharded or with device parts (--optimizer-split: their gradients stay on the device).
  using GradReduce = std::function<void(int index, const Tensor& grads)>;
  void set_grad_reduce(GradReduce reduce);
  bool reduces_grads() const { return static_cast<bool>(reduce_); }
  static constexpr int64_t kReduceInPlaceBytes = 256 << 10;
  /// The buckets of set_grad_reduce by index: each one's tensors as [offset, numel) ranges of
  /// its buffer (GradCompressor::set_layout; topk selects per tensor).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> grad_reduce_buckets() const;
  /// Sharded, --grad-compression fp16|bf16: the reduce-scatters send that dtype
  /// (ShardedHomes::set_grad_compression). A no-op when not sharded. Call between steps.
  void set_grad_compression(DType dtype) {
    if (shards_) shards_->set_grad_compression(dtype);
  }
  /// What the host optimizer is built over: sharded, this rank's pieces (their flags synced
  /// from the parameters first); else every streamed and device-part parameter (the model's).
  std::vector<nn::Parameter*> optimizer_params(const std::vector<nn::Parameter*>& model_params);
  /// Sharded: a collective (every rank at the same point, between steps): each streamed
  /// parameter's value becomes a whole host tensor of its current f32 values (saving, reading
  /// the weights); the next pass points them at the stages again. A no-op when not sharded.
  void gather_weights();
  /// Sharded, checkpoints: a collective (every rank, between steps): `opt`'s state (built over
  /// optimizer_params()) whole, named as the unsharded optimizer's state() names it.
  std::vector<nn::NamedTensor> gathered_state(const optim::Optimizer& opt) const;
  /// Sharded, resuming: every rank's shards cut anew from the parameters' whole values (after
  /// gather_weights() and a checkpoint loaded into them) and `opt` loaded with its pieces'
  /// share of `state` (gathered_state()'s names). Not a collective. Throws as
  /// Optimizer::load_state, Error(invalid_argument) naming a missing or misshapen tensor.
  void load_sharded(optim::Optimizer& opt, const std::vector<nn::NamedTensor>& state, int64_t step_count);
  /// An evaluation pass without compute: the same uploads (and, sharded, the same collectives)
  /// as the model's eval forward. A rank with fewer evaluation batches than another runs these
  /// so that every rank issues the same collectives.
  void idle_pass();
  /// Pinned bytes of the stages (--zero 3), 0 when not sharded.
  int64_t stage_bytes() const { return stage_bytes_; }
  /// --zero 3's collectives of training steps so far: steps (finish_updates calls), seconds in all-gathers and
  /// reduce-scatters on the update thread, seconds the training thread waited for gathers,
  /// and the bytes this rank sent into them (its shards; the whole gradients). Thread-safe.
  struct ShardComm {
    int64_t steps = 0;
    double seconds = 0, wait_seconds = 0, bytes = 0;
  };
  ShardComm shard_comm() const;

 private:
  struct Entry {  // one parameter: its host home and where it computes
    nn::Parameter* param = nullptr;
    // Pinned host. home_compute: --zero 3's stage views only (else the compute copy is made
    // at upload); home_grad: a slab's views while transient (undefined before the first).
    Tensor home_value, home_compute, home_grad;
    Tensor accum;  // --zero 3 with accumulation: the rank's running gradient sum (whole, pinned)
    bool upload_compute = false;                 // the op reads the compute copy
    DType up_dtype = DType::f32;                 // what the op reads: the compute copy's dtype, or f32
    // Delay 1: the two upload copies (in up_dtype) and the stand-in the update thread updates
    // in place of *param.
    Tensor upload[2];
    nn::Parameter shadow;
  };
  struct Buffers {  // the device tensors of one part: the uploaded one and the gradient per entry
    std::vector<Tensor> up, grad, buf;  // buf: per buffer entry
    Tensor flat;  // blocks of unequal shapes: the slot's bytes, which up, grad and buf view
    Event ready;           // the last upload into them
    Event free;            // completes when the last work reading or writing them ran
    int owner = -2;        // slots: the block in it (-2: none)
    bool in_use = false;   // between attach and detach
    int64_t last_use = 0;  // for the choice of the slot to reuse (least recently used)
    ShardStage stage;      // --zero 3: the host buffers the part is gathered and its gradients go into
    Event stage_read;      // the last upload from the stage
    int grad_owner = -2;   // the part whose gradients the stage holds (until its update ran)
  };
  struct BufferEntry {  // a module buffer (BatchNorm's running statistics) and its pinned home
    Tensor* in_module = nullptr;
    Tensor home;
  };
  struct Part {
    std::vector<Entry> entries;
    std::vector<BufferEntry> buffers;
    Event buffers_home;  // the last download of the buffers into their homes
    int slot = -1;  // blocks: the slot it is in while there (-1: not there)
    std::vector<nn::Parameter*> shadows;  // delay 1: &entries[k].shadow
    std::vector<nn::Parameter*> resident;  // --optimizer-split: the part's parameters, on the device
    int shard = -1;  // --zero 3: its index in shards_
    Event grads_home;       // the last download of its gradients (accumulation: the running sum)
    bool grads_up = false;  // accumulation: the running sum is uploaded into its buffers this pass
  };
  // Where part entries' running gradient sums are at home between micro-batches.
  const Tensor& accum_of(const Entry& e) const { return shards_ ? e.accum : e.home_grad; }
  bool last_micro_batch() const { return micro_ == micro_count_ - 1; }
  // What part p's uploads read this pass.
  const Tensor& source(const Entry& e) const {
    // --zero 3: the stage, into which the pass's upload copy was gathered.
    return delay() && !shards_ ? e.upload[read_] : e.upload_compute ? e.home_compute : e.home_value;
  }
  // Rounds e's f32 value into `dst` (its compute dtype), as the update's output copy.
  static void round_value(const Entry& e, void* dst);

  Part& part(int p) { return p == nn::kOuterPart ? outer_ : blocks_[static_cast<size_t>(p)]; }
  Buffers& buffers_of(int p) {
    return p == nn::kOuterPart ? outer_buf_ : slots_[static_cast<size_t>(part(p).slot)];
  }
  void fetch(int p);                    // uploads part p into its buffers (outer) or a slot
  void attach(int p, bool with_grads);  // the parameters read the device tensors
  void upload_grads(int p);  // accumulation: part p's running sum into its buffers (upload stream)
  // Whether a block's gradients go into a slab (the update consumes them during the backward).
  bool transient_grads() const {
    return slabs_ && opt_ && delay() == 0 && micro_count_ == 1 && !shards_ && !checked();
  }
  void ensure_grad_homes();   // every block entry's own f32 gradient home (pinned, zeroed)
  void take_slab(int p);      // block p's gradient homes: views of the next slab, once free
  // Uploads of part p from its homes into b (the compute copies rounded into a staging buffer).
  void upload_values(int p, const Part& pt, Buffers& b);
  // Back to the homes: the gradients downloaded first with grads_home, the buffers with
  // buffers_home (after a training pass, which updates BatchNorm's running statistics).
  void detach(int p, bool grads_home, bool buffers_home);
  int64_t lay_out(const Part& part, Buffers* b) const;  // unequal blocks: bytes (and views into b)
  void invalidate();  // no buffer holds current values any more (the homes may change)
  void wait_copies() noexcept;
  void gather_into(int p, Buffers& b);  // --zero 3: the part's values into b's stage (the homes view it)
  void shard_views(int p, const Buffers& b, bool grads);  // the part's homes: views of b's stage
  // The pipeline's unit of part p (blocks, then outer), and back.
  size_t slot_of(int p) const { return p == nn::kOuterPart ? blocks_.size() : static_cast<size_t>(p); }
  int part_of(int unit) const { return static_cast<size_t>(unit) == blocks_.size() ? nn::kOuterPart : unit; }
  // Queues part p's update: it waits (host) for its gradients' downloads (`grads_home`); --zero 3:
  // `stage` holds the gradients to reduce-scatter.
  void queue_update(int p, Event grads_home, const ShardStage* stage);
  void wait_updated(int p);  // until part p's queued update ran
  void host_update(const optim::HostUpdate& u);  // the pipeline's update hook (the update thread)
  void wait_all_updates();  // every queued update ran; rethrows the first error
  // set_checks: the parameters the update of unit `unit` updates in place of opt_'s (delay 1:
  // the shadows, their compute copies those of upload copy `slot`); update, copies and checks.
  std::vector<nn::Parameter*> stand_ins(int unit, int slot);
  void update_unit(const optim::HostUpdate& u);
  std::vector<int> check_step(int slot, double lr);  // the update thread, after the step's parts
  double clip_ = 0;
  const optim::LossScaler* scaler_ = nullptr;
  bool speculate_ = true;
  struct ReduceBucket {  // set_grad_reduce: one collective of a part
    int index = 0;
    std::vector<size_t> entries;  // the part's entries, in the buffer's order
    bool packed = false;          // copied into reduce_pack_ (else the one entry's home)
    int64_t numel = 0;
  };
  std::vector<std::vector<ReduceBucket>> plan_reduce() const;  // per unit
  void reduce_unit(int unit);  // set_grad_reduce: the unit's gradients averaged over the ranks (update thread)
  GradReduce reduce_;
  std::vector<std::vector<ReduceBucket>> reduce_buckets_;  // per unit
  Tensor reduce_pack_;  // the small gradients of the part being reduced (update thread)
  std::vector<char> found_;          // per unit: an inf/NaN in its gradients (update thread)
  std::vector<Tensor> check_grads_;  // the host gradients, in opt_'s parameter order
  std::atomic<bool> skipped_{false};
  int check_threads_ = 1;  // the training thread's OpenMP threads (the norm's reduction)
  void stop_updates() noexcept;
  // The disk tier: the unit of the pipeline's unit `unit` in memory for its update, and back.
  void disk_acquire(int unit);
  void disk_release(int unit);

  std::function<void(nn::ParamStream*)> install_;
  std::string outer_label_;
  Device device_;
  bool equal_blocks_ = true;  // slots of fixed tensors shaped as block 0
  int depth_ = 1;
  std::vector<bool> resident_;  // per part (blocks, then outer): at home on the device
  int64_t resident_elements_ = 0, resident_bytes_ = 0;
  std::vector<size_t> device_indices_;  // into opt_->params(): the device parts' parameters
  int cur_ = -1;           // the part computing (the outer part: -1 in forward, L in backward)
  bool backward_ = false;  // this pass runs the blocks in reverse
  bool eval_ = false;      // this pass is an evaluation
  Stream compute_, up_, down_;
  Part outer_;
  std::vector<Part> blocks_;
  Buffers outer_buf_;
  std::vector<Buffers> slots_;
  int64_t clock_ = 0;
  bool outer_valid_ = false;  // the outer part's buffers hold its current values
  int64_t to_device_bytes_ = 0, to_host_bytes_ = 0, block_fetches_ = 0;
  int64_t outer_bytes_ = 0, slot_bytes_ = 0;
  int64_t micro_ = 0, micro_count_ = 1;  // set_micro_batch
  int64_t accum_bytes_ = 0;
  struct Slab {  // a pinned flat buffer of transient homes
    Tensor flat;
    int owner = -2;  // gradient slabs: the block whose gradients it holds (-2: none)
    Event used;      // staging: the last upload from it
  };
  std::vector<Slab> grad_slabs_, stagings_;  // blocks' (allocated at first use)
  Slab outer_staging_;
  size_t next_slab_ = 0, next_staging_ = 0;
  bool grad_homes_ = false;  // the blocks' own gradient homes exist
  bool slabs_ = false;       // set_host_update's transient_grads
  optim::Optimizer* opt_ = nullptr;
  // Delay 1: the upload copy this pass reads, the one the next pass reads, the one this step's
  // (or the last) updates write, and whether this step's updates chose theirs yet.
  int read_ = 0, next_read_ = 0, write_ = 0;
  bool write_chosen_ = false;
  int64_t delay_copy_bytes_ = 0;
  std::vector<std::vector<size_t>> indices_;  // per part (blocks, then outer): into opt_->params()
  // Per unit: the stage the queued update reduce-scatters from (--zero 3), written before it is
  // queued and read by it (a part is queued again only after its update ran: wait_updated).
  std::vector<const ShardStage*> update_stage_;
  std::unique_ptr<ShardedHomes> shards_;  // --zero 3
  bool hold_ = false;  // set_hold_updates: the update thread only reduce-scatters
  mutable std::mutex figures_mu_;
  ShardComm comm_figures_;  // under figures_mu_
  int64_t stage_bytes_ = 0;
  bool kept_values_ = false;  // StreamLayout::values_to_disk: home_value is the model's tensor until set_disk_tier
  nn::ValueSource source_;     // StreamLayout::source (a model built without memory)
  // p's f32 value on the host: the model's own tensor (pinned: a pinned copy of it), or written
  // by source_ into new memory.
  Tensor value_of(const nn::Parameter& p, bool pinned) const;
  // The disk tier (set_disk_tier), and the store's unit of each pipeline unit (-1: none).
  std::shared_ptr<storage::DiskStore> disk_;
  std::vector<int> disk_unit_;
  // With set_host_update: the part updates' pipeline (units: slot_of); its thread also runs
  // --zero 3's collectives in order. Last: stopped first.
  std::unique_ptr<optim::HostUpdatePipeline> pipeline_;
};

}  // namespace tandem::train
