// The parameter home of a run: the one object that owns where the parameters, their gradients
// and the optimizer's state live and how a step updates them. The trainer, the step loop, the
// checkpoints and the banner call it without asking which home it is (as ggml's scheduler never
// asks where a weight lives: its buffer says). Homes:
//  - resident (resident_home.cpp): parameters and state beside the compute, the optimizer on
//    the device's stream; data parallel with a GradReducer, ZeRO-1 with a ZeroOptimizer;
//  - host master (host_master_home.cpp): --optimizer-device cpu, an OffloadOptimizer keeps f32
//    master weights and moments in host memory and updates them on its update thread;
//  - streamed (streamed_home.cpp): --param-device cpu, a ParamStreamer keeps the parameters in
//    pinned host memory and streams the blocks to the device; --zero 3 shards its homes.
// make_param_home (make_home.h) builds the home a TrainConfig asks for.
// Thread-safety: one thread (the one that drives the Run) calls a home.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/error.h"
#include "tandem/nn/module.h"
#include "tandem/optim/optimizer.h"
#include "tandem/stream.h"
#include "tandem/train/trainer.h"
#include "train/dist/grad_reducer.h"

namespace tandem::train {

struct Run;

/// What a checkpoint saves of a home: the optimizer's state (named as Optimizer::state names
/// it; "optim." is prefixed by the checkpoint) and a streamed home's pending delayed update
/// ("stream."). `gathered`: the state tensors are fresh gathered copies that must stay alive
/// until the snapshot copied them (the checkpoint keeps the snapshot's event).
struct HomeCheckpoint {
  std::vector<nn::NamedTensor> optimizer_state;
  std::vector<nn::NamedTensor> pending;
  bool gathered = false;
};

/// Sharded checkpoints (checkpoint/shard_files.h): a range of one tensor of the run's state
/// that only this rank holds. `name` as a whole checkpoint names the tensor ("model.<state
/// name>", "optim.<parameter>.<slot>"); `tensor` (contiguous, on the host or the compute
/// device) holds its elements [begin, begin + numel) in row-major order (a step counter: the
/// whole scalar, begin 0).
struct StateSlice {
  std::string name;
  int64_t begin = 0;
  Tensor tensor;
};

/// This rank's part of the state: `owned` slices (this rank alone holds those elements; every
/// element of a sharded tensor is owned by exactly one rank, a step counter by several),
/// `replicated` tensors that every rank holds alike, named with their prefix ("optim.",
/// "stream."; the writer cuts each into one range per rank), and whether the model's
/// parameters are sharded too (then in `owned`: no rank holds them whole between steps).
struct ShardState {
  std::vector<StateSlice> owned;
  std::vector<nn::NamedTensor> replicated;
  bool params_sharded = false;
};

/// A home's communication figures for the run's result: the collectives' totals and what they
/// were (`kind`, "" for the default all-reduce wording), and the share hidden behind compute
/// (negative: not measured).
struct HomeComm {
  CommFigures figures;
  std::string kind;
  double hidden_share = -1;
};

class ParamHome {
 public:
  virtual ~ParamHome() = default;
  ParamHome(const ParamHome&) = delete;
  ParamHome& operator=(const ParamHome&) = delete;

  /// The update's maths (for the loss scaler's gated step, the batch split and the checkpoint's
  /// step count). The home owns it.
  optim::Optimizer& optimizer() const { return *optimizer_; }

  // --- a step ---
  /// Before a step's first micro-batch: the learning rate of the step, and the gradients zeroed
  /// where they accumulate (a streamed home zeroes them in their device slots itself).
  virtual void begin_step(double lr);
  /// Before micro-batch `k` (0-based) of the step's `count` (--grad-accum-steps; after
  /// begin_step for k == 0): the gradients of a backward before the last one are not final, so
  /// a home whose hooks take them during backward (the reducer's all-reduce, the offloaded
  /// optimizer's copies) takes nothing then (DDP's no_sync): they accumulate on the device.
  /// The base keeps `count` for average_micro_batches; an override calls it first.
  virtual void begin_micro_batch(int64_t k, int64_t count);
  /// After the step's last micro-batch, before unscaling, clipping and the update: the summed
  /// gradients become their mean over the micro-batches. The base scales every gradient of the
  /// optimizer's parameters by the f32 1 / count on the device (ops::scale_; nothing for count
  /// 1); a home whose hook scaled each bucket before it left the device does nothing.
  virtual void average_micro_batches();
  /// After each micro-batch's backward: the last gradient buckets launched (data parallel);
  /// nothing for homes whose reduction is driven elsewhere.
  virtual void backward_done() {}
  /// --clip-grad-norm, after unscaling: the gradients of `params` (the model's, in its order)
  /// scaled to a global L2 norm of at most `max_norm`, the norm written to `total_norm` ([1]
  /// f32 on grad_device()). The default is ops::clip_grad_norm_ over those with requires_grad
  /// and a gradient; a sharded home clips its shards by the norm over every rank's (a
  /// collective).
  virtual void clip_grad_norm(const std::vector<nn::Parameter*>& params, double max_norm, const Tensor& total_norm);
  /// The step's update from the gradients as they stand (averaged over micro-batches, unscaled,
  /// clipped); the default is optimizer().step().
  virtual void update();
  /// Where the gradients live when the optimizer reads them: the device for parameters on the
  /// device, the host for streamed homes (clip_grad_norm's [1] f32 norm goes there).
  virtual Device grad_device(Device compute) const { return compute; }
  /// Whether the update runs while backward goes on (a host update thread): then clipping and
  /// loss scaling, which need every gradient first, turn that off (set_sync_update).
  virtual bool updates_in_backward() const { return false; }
  /// Whether update() checks the gradients itself (the loss scaler's inf/NaN check and unscale,
  /// clipping), on the host, after host updates that ran speculatively during backward; the
  /// step then skips the device's checks and asks step_skipped() for the scaler's verdict.
  virtual bool checks_updates() const { return false; }
  /// With checks_updates(): whether the last update() found an inf/NaN gradient and skipped.
  virtual bool step_skipped() const { return false; }
  /// Whether a loss scaler's skip is decided on the host (the device's check read back) rather
  /// than gated on the device: an update that ends in collectives (ZeRO-1).
  virtual bool gates_on_host() const { return false; }

  // --- between steps ---
  /// Makes every update issued so far visible in the parameters (a delayed update applied, the
  /// host's uploads waited for): before evaluating or saving weights. The default does
  /// nothing: updates ordered on the device's stream need no host wait.
  virtual void flush() {}
  /// Whole weights in the model on every rank (a collective where the home is sharded): after
  /// training, before saving or reading them; also before a checkpoint's restore.
  virtual void gather_weights() {}
  /// Whether the model's parameters hold only this rank's shard between steps (--zero 3): a
  /// weight snapshot for serving then cannot be taken.
  virtual bool weights_sharded() const { return false; }
  /// Runs `eval` over this rank's `batches` test batches; a home whose every forward is a
  /// collective first agrees on the most batches over the ranks and pads with idle passes.
  virtual EvalResult evaluate(int64_t batches, const std::function<EvalResult()>& eval) { return eval(); }
  /// Waits until the host updates issued so far ran (no delayed update applied), so that every
  /// rank issues its next collectives in one order (the stop-signal agreement). The default
  /// does nothing (no host update).
  virtual void wait_host_updates() {}

  // --- checkpoints ---
  /// Step 1 of a checkpoint, on every rank (a collective where the home is sharded): gathers
  /// what rank 0 writes. Step 2, on the writing rank only: waits for the host updates and
  /// returns the tensors to save. Throws what the gathers and the updates threw. The defaults:
  /// nothing to gather, and the optimizer's state() (its updates ordered on the stream).
  virtual void gather_for_checkpoint(const Stream& stream) {}
  virtual HomeCheckpoint checkpoint_state();
  /// Restores what checkpoint_state saved, after the model's weights were restored (streamed
  /// homes reload their homes from them). `state` are the optimizer's tensors (names without
  /// "optim."), `pending` a streamed home's pending delayed update (names without "stream.").
  /// Throws Error(invalid_argument) whose message (without an "[op] " prefix: the checkpoint
  /// names the file) says what does not fit this run.
  virtual void restore(const std::vector<nn::NamedTensor>& state, int64_t step_count,
                       const std::vector<nn::NamedTensor>& pending);
  /// Sharded checkpoints, on every rank (not a collective: each rank writes its own shard):
  /// waits for the host updates and returns what this rank holds of the optimizer's state
  /// (and, for a sharded home, of the parameters). The default: the optimizer's
  /// checkpoint_state(), replicated. Throws what the updates threw, Error(not_available) for a
  /// pending delayed update (expected --offload-delay 0).
  virtual ShardState shard_state();
  /// Whether the state tensors come from a host update's master copy (delay 1: the device one
  /// update behind): saved with the checkpoint's "optimizer" record. The default: false.
  virtual bool upload_pending() const { return false; }

  // --- describing ---
  /// The banner's words after the optimizer's name and settings ("" beside the parameters).
  virtual std::string describe_optimizer(const Run& r) const { return ""; }
  /// The banner's lines of this home (each starting with "\n"; "" for none).
  virtual std::string describe(const Run& r) const { return ""; }
  /// The distributed line's words after the per-rank samples (the reduction and its shards).
  virtual std::string describe_dist(const Run& r) const;
  /// The communicator's backend the reduction runs on.
  virtual std::string dist_backend(const Run& r) const;
  /// The flag that puts the update on a host thread ("--optimizer-device", "--param-device
  /// cpu"), or nullptr when it runs in the training thread.
  virtual const char* host_update_flag() const { return nullptr; }
  /// One line of figures after training ("" for none): the disk tier's bytes, rates and the
  /// share of its time hidden.
  virtual std::string describe_end(const Run& r) const { return ""; }
  /// The home's communication figures (data parallel runs).
  virtual HomeComm comm_figures(const Run& r) const { return {}; }

 protected:
  explicit ParamHome(std::unique_ptr<optim::Optimizer> optimizer) : optimizer_(std::move(optimizer)) {}
  /// "its optimizer state does not fit this run's NAME: WHAT" for a failed load of `state`
  /// that threw `e`; for a state with an offloaded optimizer's pending master copy, that the
  /// run drops the pending update (expected --optimizer-device cpu).
  std::string does_not_fit(const Error& e, const std::vector<nn::NamedTensor>& state) const;
  std::unique_ptr<optim::Optimizer> optimizer_;
  int64_t micro_batches_ = 1;  // the current step's (begin_micro_batch)
  std::vector<nn::NamedTensor> gathered_;  // the last state gathered for a checkpoint (sharded homes)
};

using ParamHomePtr = std::unique_ptr<ParamHome>;

}  // namespace tandem::train
