// Trainer: the step loop for one model on one device. It owns the model, the optimizer,
// the learning-rate schedule, the training and test loaders, and evaluation.
// Each step: batch (from loader workers) -> forward -> loss -> backward -> optimizer step.
// Devices (TrainConfig::device): "cpu"; "virt[:N][?speed=..&bw=..&latency_us=..&memory_mb=..]"
// (configure_virt applies the options; with "tflops=..&compute=none" nothing is computed and the
// run plans throughput only: see Trainer::planning_note); "cuda[:N]" where this build and machine have it. On
// a device the model, its gradients and the optimizer state live there (Module::to before
// the optimizer is built), batches come from pinned loader slots through a DevicePrefetcher
// (copy stream, 2 batches ahead), and evaluation runs there too. No per-step host
// synchronisation: each step's loss and correct count are added to a metrics tensor on the
// device (ops::softmax_cross_entropy_accumulate), which is copied asynchronously into pinned
// memory every TrainConfig::log_interval steps (K); the host reads a copy once its event
// completed, so a NaN/inf loss stops the run within 2K steps of the step that made it, and
// the progress callback runs per read-back. After issuing a read-back the host waits for the
// one issued K steps earlier: the loop's only wait on the device inside the epoch, which keeps
// it K to 2K steps ahead of a slower device. The prefetcher's device ring and the loader's
// pinned slots are sized for that lead (2K batches more, at most 256 MiB each) so that they
// never make the loop wait (docs/design.md). The host also waits at the end of an epoch.
// Thread-safety: one Trainer is driven by one thread; loader workers are internal.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"
#include "tandem/data/dataset.h"
#include "tandem/data/field.h"
#include "tandem/nn/module.h"
#include "tandem/profile/summary.h"
#include "tandem/safetensors.h"
#include "tandem/train/config.h"
#include "tandem/train/model_card.h"
#include "tandem/train/online_samples.h"

namespace tandem::train {

struct MemoryPlan;  // tandem/train/memory_plan.h

/// One device's part of a split run (--devices) over an epoch or the whole run.
struct DeviceShare {
  std::string device;        // "virt:0", "cpu", "cuda:0"
  int64_t samples = 0;       // training samples it ran
  double sample_share = 0;   // samples / all devices' samples, [0, 1]
  double busy_seconds = 0;   // its compute stream's time on forward, loss and backward, seconds
  double busy_share = 0;     // busy_seconds / the epoch's (run's) training seconds, [0, 1]
};

struct EpochStats {
  int epoch = 0;               // 1-based
  double train_loss = 0;       // mean over the epoch's samples
  double train_accuracy = 0;   // fraction in [0, 1], on augmented training batches
  double test_loss = 0;        // mean over the test set
  double test_accuracy = 0;    // fraction in [0, 1]
  double samples_per_s = 0;    // training samples (images) per second of step loop (evaluation excluded)
  double tokens_per_s = 0;     // samples_per_s x token ids per sample (data::tokens_per_sample; 0 for images)
  double seconds = 0;          // wall time of the epoch's training loop, in seconds
  double lr = 0;               // learning rate at the epoch's last step
  bool computed = true;        // false on a device that does not compute (planning_note in
                               // tandem/device.h): the loss and accuracy fields are NaN then
  // With a loss scaler (--loss-scale dynamic, the default for fp16): the scale at the epoch's
  // last read-back and the steps skipped this epoch for inf/NaN gradients.
  bool loss_scaled = false;
  double loss_scale = 0;
  int64_t skipped_steps = 0;
  size_t pinned_peak_bytes = 0;  // high-water mark of the pinned pool's reserved bytes at the
                                 // epoch's end (process-wide; levels off after warm-up)
  // Host bytes handed out to tensors at the epoch's end (process-wide): the pinned pool's and
  // the pageable allocator's (host_allocator()); what the memory plan's host state is measured by.
  size_t pinned_allocated_bytes = 0, pageable_allocated_bytes = 0;
  // --skip-corrupt: the samples skipped this epoch, training set then test set, each
  // "sample <index>: <error naming the file>" (data::Loader::skipped_samples()).
  std::vector<std::string> skipped_train, skipped_test;
  std::vector<DeviceShare> split;  // --devices: each device's part of the epoch (empty otherwise)
};

struct TrainResult {
  std::vector<EpochStats> epochs;
  double best_test_accuracy = 0;
  int best_epoch = 0;
  double wall_seconds = 0;     // whole fit(), evaluation included
  double samples_per_s = 0;    // training samples (images) / training-loop seconds, all epochs
  double tokens_per_s = 0;     // samples_per_s x token ids per sample (0 for images)
  bool token_data = false;     // a language model on token shards (its test_loss is the val_loss)
  int num_workers = 0;         // loader workers at the end (the autotuner's choice when auto)
  int prefetch_factor = 0;     // batches in flight per worker at the end
  int prefetch_depth = 0;      // batches copied to the device ahead at the end (0 on cpu)
  std::string autotune;        // the autotuner's choice and why ("" unless a knob was auto)
  std::string dataset_format;  // data::format_name of --data ("packed", "folder", ...), "" for sets in memory
  std::string planning;        // Trainer::planning_note(): "" when results were computed
  std::string disk;            // the disk tier's figures after training ("" without one)
  int stopped_by = 0;          // SIGINT or SIGTERM when a StopSignals stop ended fit() early, else 0
  int resumed_epoch = 0;       // the epoch a resumed run began in (--resume), else 0
  int checkpoints = 0;         // checkpoints written by this run (--checkpoint-dir)
  double checkpoint_pause_max_ms = 0, checkpoint_pause_mean_ms = 0;  // the step loop's pause per checkpoint
  // Distributed runs (world_size > 1): the gradient all-reduces of this rank.
  int world_size = 1, rank = 0;
  std::string comm_kind = "gradient all-reduce";  // what comm_seconds_per_step counts
  double comm_seconds_per_step = 0;  // communication time of the all-reduces per step, seconds
  double comm_hidden_share = NAN;    // share of it done before backward ended (NaN: not measured)
  double comm_skew_seconds_per_step = 0;  // waiting for the slowest rank per step, seconds (not in the above)
  double wire_bytes_per_step = 0;    // bytes this rank put into the all-reduces per step
  double wire_share = 0;             // wire_bytes_per_step over the gradients' f32 bytes
  // Split runs (--devices): each device's part over all epochs, the parts of every step (in
  // order, one entry per device) and how often --split auto moved them.
  std::vector<DeviceShare> split;
  std::vector<std::vector<int64_t>> split_parts;
  int64_t split_moves = 0;
};

/// One checkpoint handed to the background writer.
struct CheckpointReport {
  std::string path;          // the file being written (checkpoint_dir/step-<global step>.safetensors)
  int epoch = 0;             // 1-based epoch it was taken in
  int64_t step = 0;          // steps done in that epoch (steps_in_epoch at an epoch's end)
  int64_t steps_in_epoch = 0;
  int64_t global_step = 0;   // steps done in all
  double pause_ms = 0;       // how long the step loop stood still for it (snapshot + hand-over)
  bool stop = false;         // taken because of a stop signal (written before fit() returns)
};

struct EvalResult {
  double loss = 0;        // mean cross-entropy (NaN on a device that does not compute)
  double accuracy = 0;    // fraction in [0, 1] (NaN on a device that does not compute)
  int64_t correct = 0;
  int64_t samples = 0;    // every test sample exactly once
};

/// One metrics read-back window (every TrainConfig::log_interval steps and at the epoch's end).
/// samples_per_s and data_wait_share are measured on the host between two arrivals of
/// read-backs (windows that arrive together share one figure).
struct WindowStats {
  int epoch = 0;               // 1-based
  int64_t step = 0;            // last step of the window, 1-based within the epoch
  int64_t global_step = 0;     // last step of the window counted over the whole run, 1-based
  double loss = 0;             // mean loss of the window's samples
  double accuracy = 0;         // fraction in [0, 1] of the window's samples
  double lr = 0;               // learning rate of the window's last step
  int64_t samples = 0;         // samples in the window
  double samples_per_s = 0;    // training samples (images) per second of wall time
  double tokens_per_s = 0;     // samples_per_s x token ids per sample (0 for images)
  double data_wait_share = 0;  // share of wall time the training thread waited for batches, [0, 1]
};

/// One --eval-interval evaluation on the validation (test) split.
struct EvalPoint {
  int epoch = 0;            // 1-based epoch it was taken in (1 before the first step)
  int64_t global_step = 0;  // optimizer steps done before it (0: before the first)
  double loss = 0;          // mean cross-entropy per loss row (per token for a language model)
  double accuracy = 0;      // fraction in [0, 1]
  int64_t samples = 0;      // loss rows counted
};

struct TrainCallbacks {
  std::function<void(int epoch, int64_t steps)> on_epoch_begin;
  /// After each metrics read-back (every TrainConfig::log_interval steps and at the epoch's
  /// end): steps done this epoch, the mean loss of the steps read back, samples done this epoch.
  std::function<void(int64_t step, double loss, int64_t samples)> on_step;
  std::function<void(const EpochStats&)> on_epoch_end;
  /// After each metrics read-back, with the window's figures (--metrics-file, --tensorboard).
  std::function<void(const WindowStats&)> on_window;
  /// After each checkpoint was snapshotted and handed to the writer (training thread).
  std::function<void(const CheckpointReport&)> on_checkpoint;
  /// After every training step, with the steps done in all (the schedule's clock), on the
  /// training thread between two steps: where Trainer::capture_weights() may be called.
  std::function<void(int64_t global_step)> on_step_done;
  /// With TrainConfig::eval_interval > 0: after each evaluation (before the first step and
  /// every eval_interval optimizer steps), on the training thread.
  std::function<void(const EvalPoint&)> on_eval;
};

/// A copy of the model's state_dict (parameters and buffers) taken between two steps
/// (Trainer::capture_weights): host tensors at once, device tensors by asynchronous copies
/// into pinned buffers that the next step's work waits for. Immutable once wait() returned.
/// Thread-safety: wait() and tensors() from any thread once capture_weights() returned.
class WeightCopy {
 public:
  virtual ~WeightCopy() = default;
  /// Blocks until the copies completed; rethrows a device error of the copies.
  virtual void wait() const = 0;
  /// Host tensors in state_dict order and names, valid after wait().
  virtual const NamedTensors& tensors() const = 0;
};

class Trainer {
 public:
  /// Validates the configuration, opens the train and test splits of cfg.data_dir
  /// (data::open_dataset), builds the model for the training set's sample shape [C, H, W] and
  /// classes (nn::make_model), and the optimizer. Throws Error(invalid_argument) for bad flags,
  /// for a model that cannot take the samples (naming it and its minimum), or when the two splits
  /// differ in sample shape or classes (naming both); Error(io/format) for dataset problems;
  /// Error(not_available) for devices this build or machine lacks.
  explicit Trainer(const TrainConfig& cfg);
  /// Trains on given datasets instead of cfg.data_dir (e.g. a synthetic or deliberately slow
  /// one); a null pointer opens that split from cfg.data_dir. The model is sized from the
  /// training set; the test set must have the same dims() and num_classes(), else
  /// Error(invalid_argument) naming both, and at least one sample (Error(invalid_argument)).
  /// With `comm` of several ranks (mpirun: comm::mpi_world(); threads: comm::LocalGroup) the
  /// run is data parallel: see build_run (src/train/run_builder.h); every rank must construct
  /// its Trainer and call the same methods in the same order. Error(distributed) when the
  /// ranks' flags or models differ (every rank throws) or a peer fails.
  Trainer(const TrainConfig& cfg, std::shared_ptr<const data::Dataset> train_set,
          std::shared_ptr<const data::Dataset> test_set, comm::CommunicatorPtr comm = nullptr);
  ~Trainer();

  /// Trains cfg.epochs epochs, evaluating after each; with cfg.resume, from where the
  /// checkpoint stopped (the banner of describe() says which). With cfg.checkpoint_dir it
  /// writes checkpoints (src/train/checkpoint/) in the background and waits for the last one
  /// before returning; a write failure (a full disk) throws Error(io) naming the file, the
  /// folder still naming the last complete checkpoint. Under StopSignals a stop signal ends
  /// it after the current step (TrainResult::stopped_by). Throws Error(numerical) naming the
  /// epoch and the steps of the read-back window when the loss becomes NaN or infinite, and
  /// Error(invalid_argument) for labels outside the model's classes (nothing is saved then);
  /// neither on a device that does not compute (planning_note()), whose figures are NaN.
  TrainResult fit(const TrainCallbacks& callbacks = {});
  /// Evaluates the current model on the test set (eval mode, running statistics); in a
  /// distributed run each rank evaluates its shard and every rank returns the whole set's
  /// figures (each test sample counted once).
  EvalResult evaluate();
  /// Writes the model's state_dict (parameters and buffers) as safetensors, atomically (device
  /// tensors are copied back to the host first).
  void save_weights(const std::string& path);
  /// One line: model, parameter count, device, optimizer, schedule, threads, workers.
  std::string describe() const;
  /// planning_note(device) of the run's device: "" when its ops compute their results; else
  /// the line to print (loss and accuracy are then NaN, and no loss or label check runs).
  const std::string& planning_note() const;
  /// The memory plan counted before the run allocated anything (tandem/train/memory_plan.h);
  /// null for runs that are not planned yet (--devices, --place).
  const MemoryPlan* memory_plan() const;
  nn::Module& model();
  /// The fields of the training batches (data::Loader::fields: images and labels for image
  /// data sets); data::image_input() and data::tokens_per_sample() say how to count throughput.
  const std::vector<data::Field>& fields() const;
  /// The model's name, input and classes, the test set's sample shape and class names, and the
  /// evaluation transform (what an inference service of this run needs).
  ModelCard model_card() const;
  /// A copy of the model's current weights (see WeightCopy). Call on the thread that drives
  /// fit(), between steps (TrainCallbacks::on_step_done, on_epoch_end) or outside fit(). Never
  /// waits for the device; the device waits for the copy before the next step's work. With an
  /// offloaded optimizer the copy holds the weights the last completed update left. With
  /// --zero 3 (no rank holds the whole weights between steps) it first all-gathers them from
  /// the shards (the master values, bit for bit): a collective, which every rank calls at the
  /// same points. Throws Error(out_of_memory) when the pinned pool cannot hold the copy, and
  /// what the gather throws (Error(distributed)).
  std::shared_ptr<const WeightCopy> capture_weights();
  /// Mixes samples drawn from `source` into every training batch, the share
  /// TrainConfig::online_mix (> 0, else Error(invalid_argument)); call before fit().
  void set_online_source(std::shared_ptr<OnlineSampleSource> source);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The profiler summary's settings for a finished run: the loader and prefetch values in
/// force at its end (the autotuner's choice), the batch size and the available cores.
profile::SummaryOptions summary_options(const TrainConfig& cfg, const TrainResult& result);

/// "virt:0 62.5% (busy 97%), virt:1 37.5% (busy 95%)": each device's share of the samples and
/// the share of the training time its compute stream was busy.
std::string format_shares(const std::vector<DeviceShare>& shares);

/// Loads cfg.weights into cfg.model and evaluates it on the test set of cfg.data_dir.
/// Throws Error(format) when a tensor is missing or has the wrong shape or dtype (naming it);
/// Error(invalid_argument) when the file records (save_weights does) another model, or a
/// sample shape or class count other than the test set's, naming both.
EvalResult evaluate_weights(const TrainConfig& cfg);

/// Copies tensors from a state dict (as read by load_safetensors) into a module's state,
/// by name; every entry of the module must be present with the same shape.
void load_state(nn::Module& module, const std::vector<std::pair<std::string, Tensor>>& state,
                const std::string& source);

}  // namespace tandem::train
