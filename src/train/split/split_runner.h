// SplitRunner: one training step's batch split between devices (--devices, --split).
//
// A replica of the model lives on each device; replica 0 (the Run's model, on the first
// device) holds the one optimizer. Per step:
//  1. The loader collates the whole batch into one pinned slot; device d's part is the
//     contiguous range of samples [o_d, o_d + n_d) of that slot (its own pinned region),
//     copied to the device on d's own copy stream; d's compute stream waits for the copy's
//     event (the host does not). A cpu device reads its part in place.
//  2. Each replica runs forward, loss (mean over its n_d samples, metrics added into its own
//     accumulator) and backward on its compute stream; accelerators are issued first, the cpu
//     replica (whose ops run on the training thread) last, so they all compute at once.
//  3. On the first device, after waiting (device-side) for each replica's backward, the
//     gradients are combined weighted by samples: g = sum_d (n_d / N) g_d, which is the
//     gradient of the mean loss over the whole batch, so the step equals one device's step on
//     the whole batch up to the order of the float additions.
//     With a loss scaler (--precision fp16, --loss-scale dynamic) each replica multiplies its
//     loss gradient by the scale (the scaler's state, copied to its device with the weights)
//     before rounding it to the compute dtype, so the combined gradient is the scaled
//     gradient of the whole batch: an inf/NaN on any device reaches it (the weights are > 0).
//  4. The update (`update`: the single-device step's, train_step in step_loop.cpp) runs
//     there on the combined gradient: unscaled once, clipped (--clip-grad-norm), the
//     optimizer step gated on the inf/NaN check, the scale's rule. A skipped step leaves
//     replica 0's weights as they were, so every replica skips it.
//     The updated parameters (their low-precision copies included) and replica 0's float buffers
//     (BatchNorm running statistics, as DDP's broadcast_buffers) are copied to every other
//     replica, whose next step waits (device-side; the host, for a cpu replica) for them.
// Gradient accumulation (--grad-accum-steps K): steps 1 and 2 run once per micro-batch, each
// replica's gradients (and metrics) summing over the K micro-batches on its own device; steps
// 3 and 4 run once per optimizer step: the sums are combined weighted by each device's share
// of the step's samples and the update first takes their mean over the K micro-batches, so the
// step equals one device's K micro-batches up to the order of the float additions.
// A language model (Module::fuses_loss: token windows [n_d, T] in, its fused classifier +
// cross-entropy, the mean over the part's tokens) is split by windows the same way; every
// window has T tokens, so weighting by windows weights by tokens.
// BatchNorm's batch statistics are those of each device's part (as DDP without
// SyncBatchNorm), so with BatchNorm the step is not exactly the one-device step.
// Timing: the compute stream of each device stamps the start and end of its part (a host
// function enqueued on the stream); an accelerator starts its part only once the host has
// issued every accelerator's part (a host-completed event), so the stamps time the device. With --split auto the SplitBalancer turns the stamps of
// each step into the parts of a later one; the host runs at most kSplitLead steps ahead of
// the devices so that the measurements are fresh.
// Thread-safety: driven by the training thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/field_batch.h"
#include "tandem/data/loader.h"
#include "tandem/nn/cross_entropy_loss.h"
#include "tandem/nn/module.h"
#include "tandem/optim/loss_scaler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/stream.h"
#include "tandem/train/trainer.h"
#include "train/split/split_balancer.h"
#include "train/split/split_plan.h"

namespace tandem::train {

/// Steps the training thread may issue beyond the last one whose timings it has read.
inline constexpr int kSplitLead = 2;

class SplitRunner {
 public:
  /// Builds replicas 1.. of `model` (built by `make_replica`, same seed, so the same initial
  /// weights) on plan.devices[1..]; `model` is replica 0 and must already be on
  /// plan.devices[0]. `make_replica` gives the replica the run's compute dtype (on the host).
  /// `scaler` (null: none) is the run's loss scaler on the first device; its state is sent to
  /// the replicas with the weights. Throws Error(out_of_memory) when a device cannot hold its
  /// replica.
  SplitRunner(const SplitPlan& plan, nn::ModulePtr model, const std::function<nn::ModulePtr()>& make_replica,
              float label_smoothing, int64_t batch_size, const optim::LossScaler* scaler = nullptr);
  ~SplitRunner();
  SplitRunner(const SplitRunner&) = delete;
  SplitRunner& operator=(const SplitRunner&) = delete;

  /// Declares the slots this runner holds to the loader (kSplitLead + 2 batches in flight).
  void attach(data::Loader& loader);
  /// Resets the epoch's figures.
  void begin_epoch();
  /// Takes the next batch from `loader` (false at the epoch's end); releases the slots whose
  /// copies completed.
  bool next(data::Loader& loader);
  /// The current batch's samples.
  int64_t batch_samples() const;
  /// The current batch as the loader filled it, in host memory (pinned slots): valid until the
  /// next next(); written before micro_batch() cuts and copies its parts (--online-mix).
  const data::FieldBatch& host_batch() const { return batch_; }
  /// One step of one or more micro-batches (--grad-accum-steps): begin_step, then
  /// micro_batch() once per micro-batch (the current batch each time; next() between them),
  /// then finish_step.
  /// begin_step: sets `optimizer`'s (built on replica 0's parameters) learning rate to `lr`,
  /// zeroes replica 0's gradients and takes the step's parts (--split, or the balancer's);
  /// the step's loss and counts will be added into `metrics` ([4] f32 on the first device;
  /// MetricsReadback's accumulator).
  void begin_step(optim::Optimizer& optimizer, double lr, const Tensor& metrics);
  /// Forward and backward of the current batch's parts, each replica's gradients accumulating
  /// over the step's micro-batches (the other replicas zero theirs in the first one); a short
  /// batch is split in the step's proportions.
  void micro_batch();
  /// Combines the replicas' summed gradients on the first device, weighted by each device's
  /// share of the step's samples (exact when every micro-batch is split in the same
  /// proportions: always but for an epoch's short last batch); `update` then turns replica 0's
  /// combined sums into the update (the mean over the micro-batches, unscale, clip, the
  /// optimizer step), and the weights go to the other replicas.
  void finish_step(const std::function<void()>& update);
  /// For tests: called on the training thread after replica `device`'s backward of each
  /// micro-batch was issued, with its parameters (their gradients are complete in its compute
  /// stream's order).
  using GradHook = std::function<void(size_t device, const std::vector<nn::Parameter*>& params)>;
  void set_grad_hook(GradHook hook) { grad_hook_ = std::move(hook); }
  /// Waits for the issued steps, folds in their timings and returns every held slot.
  void end_epoch();
  /// Sends replica 0's weights, buffers and the scaler's state to the other replicas (after
  /// they were restored from a checkpoint); their next step waits for the copies.
  void sync_replicas() { broadcast(); }
  /// The first device's compute stream (the one the metrics read-back and the optimizer use).
  Stream compute_stream() const;
  /// The epoch's shares: samples and busy time per device (busy share = busy seconds /
  /// `epoch_seconds`).
  std::vector<DeviceShare> epoch_shares(double epoch_seconds) const;
  /// The samples each device took in each step of the run (summed over its micro-batches), in
  /// order.
  const std::vector<std::vector<int64_t>>& history() const { return history_; }
  /// "virt:0 + virt:1, split auto (starts equal)" for the banner.
  std::string describe() const;
  int64_t moves() const { return balancer_ ? balancer_->moves() : 0; }
  /// Whether the cpu is one of the devices (its compute shares the cores with the loader).
  bool has_cpu() const;

 private:
  struct Replica;
  struct Stamp {
    std::atomic<int64_t> ns{-1};
  };
  struct Timing {
    std::vector<int64_t> samples;  // per device, over the step's micro-batches
    std::vector<std::vector<std::shared_ptr<Stamp>>> begin, end;  // per device, per micro-batch
    std::vector<Event> done;  // per device: its last backward finished (recorded after its last `end`)
  };
  struct Held {
    data::Batch batch;
    std::vector<Event> copies;
  };

  static std::shared_ptr<Stamp> stamp(const Stream& stream);
  void run_part(Replica& rep, size_t d, int64_t n, int64_t offset, Timing& t);
  void run_image_part(Replica& rep, const Tensor& x, const Tensor& y, const Tensor& metrics, size_t d);
  void combine(const Timing& t, const Tensor& metrics);
  void broadcast();
  void fold_timings(bool wait_all);
  void release_slots(bool wait_oldest);
  void retire_current();

  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<size_t> order_;  // issue order: accelerators first, then the cpu
  std::vector<int64_t> parts_;  // fixed parts (--split W1,W2,...)
  std::unique_ptr<SplitBalancer> balancer_;  // --split auto
  bool automatic_ = true;
  int64_t batch_size_ = 0;
  std::deque<Timing> timings_;
  std::deque<Held> held_;
  data::Batch current_;
  data::FieldBatch batch_;             // current_'s fields: the step picks its tensors by role
  std::vector<Event> current_copies_;  // the copies that read current_
  Tensor metrics_;                     // the step's accumulator, from begin_step to finish_step
  Event gate_;                         // opened once the micro-batch's accelerator parts are issued
  Timing step_;                        // the step's, from begin_step to finish_step
  std::vector<int64_t> step_parts_;    // the step's parts of a whole batch
  int64_t micro_ = 0;                  // micro-batches of the step run so far
  std::vector<int64_t> epoch_samples_;
  std::vector<double> epoch_busy_;
  std::vector<std::vector<int64_t>> history_;
  const optim::LossScaler* scaler_ = nullptr;
  GradHook grad_hook_;
};

}  // namespace tandem::train
