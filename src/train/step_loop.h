// The step loop: one epoch of training steps over a Run's training feed. Each step: batch ->
// forward -> loss (accumulated on the device, no host read-back) -> backward -> optimizer step;
// every TrainConfig::log_interval steps the metrics are read back asynchronously
// (metrics_readback.h) and folded into the epoch's figures.
// Thread-safety: one thread drives a Run.
#pragma once

#include <cstdint>

#include "tandem/train/trainer.h"
#include "train/run_builder.h"

namespace tandem::train {

/// What one epoch of training gives: its figures (the test ones left 0) and its sample count.
struct EpochTraining {
  EpochStats stats;      // epoch, lr, seconds, train_loss, train_accuracy, images_per_s
  int64_t samples = 0;   // training samples seen this epoch
};

/// Trains epoch `epoch` (1-based) of `run`; `global_step` (steps done before, the schedule's
/// clock) advances by the epoch's steps. Calls cb.on_epoch_begin and cb.on_step, not
/// on_epoch_end. Throws Error(numerical) naming the epoch, the steps and the lr of a read-back
/// window whose loss is NaN or infinite, Error(invalid_argument) for labels outside the model's
/// classes, Error(out_of_memory) naming the step and epoch.
EpochTraining train_epoch(Run& run, int epoch, int64_t& global_step, const TrainCallbacks& cb);

}  // namespace tandem::train
