// The step loop: one epoch of training steps over a Run's training feed. Each step: batch ->
// forward -> loss (accumulated on the device, no host read-back) -> backward -> optimizer step;
// every TrainConfig::log_interval steps the metrics are read back asynchronously
// (metrics_readback.h) and folded into the epoch's figures.
// Thread-safety: one thread drives a Run.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tandem/train/trainer.h"
#include "train/run_builder.h"

namespace tandem::train {

/// What one epoch of training gives: its figures (the test ones left 0) and its sample count.
struct EpochTraining {
  EpochStats stats;      // epoch, lr, seconds, train_loss, train_accuracy, samples_per_s, tokens_per_s
  int64_t samples = 0;   // training samples seen this epoch
};

/// Where an epoch starts when a run resumes in its middle: the first batch, the figures read
/// back before it and the metrics accumulator's values (the steps after the last read-back).
struct EpochStart {
  int64_t first_batch = 0;
  double loss_sum = 0;
  int64_t correct = 0, samples = 0;
  std::vector<float> accumulator;  // [4] or empty (zeros)
  double seconds = 0;              // training seconds of the epoch before it stopped
};

/// The step loop's state after a step, for a checkpoint (checkpoint/checkpointer.h).
struct StepView {
  int epoch = 0;
  int64_t step = 0, steps_in_epoch = 0, global_step = 0;
  int64_t read_through = 0;          // the last step whose window read-back was issued
  const Tensor* accumulator = nullptr;  // the steps after read_through, on the device
  double seconds = 0;                // training seconds of the epoch so far
  std::function<void()> drain;       // waits for every issued read-back and folds it in
};

/// Told of every step and of every read-back the step loop folds in.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void after_step(const StepView& view) = 0;
  /// The epoch's figures through step `last_step` (a read-back window ended there).
  virtual void window_done(int64_t last_step, double loss_sum, int64_t correct, int64_t samples) = 0;
};

/// Trains epoch `epoch` (1-based) of `run`, from `start` when given (a resumed run), telling
/// `observer` (when given) of each step; `global_step` (steps done before, the schedule's
/// clock) advances by the epoch's steps. Calls cb.on_epoch_begin and cb.on_step, not
/// on_epoch_end. Throws Error(numerical) naming the epoch, the steps and the lr of a read-back
/// window whose loss is NaN or infinite, Error(invalid_argument) for labels outside the model's
/// classes, Error(out_of_memory) naming the step and epoch.
EpochTraining train_epoch(Run& run, int epoch, int64_t& global_step, const TrainCallbacks& cb,
                          const EpochStart* start = nullptr, StepObserver* observer = nullptr);

}  // namespace tandem::train
