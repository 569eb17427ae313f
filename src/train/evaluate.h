// Evaluation: loss and accuracy of a model over every sample of a feed, in eval mode
// (BatchNorm running statistics, no dropout), on the feed's device.
// Thread-safety: one thread.
#pragma once

#include <cstdint>

#include "tandem/device.h"
#include "tandem/nn/module.h"
#include "tandem/train/trainer.h"
#include "train/batch_feed.h"

namespace tandem::train {

/// Mean cross-entropy and accuracy of `model` over one pass of `feed` (images [B, C, H, W] f32,
/// labels [B] i64 on `device`); metrics read back every `interval` batches (the same throttle
/// as training: the host waits only for the read-back issued `interval` batches earlier).
/// Throws Error(invalid_argument) for labels outside the model's classes, Error(numerical) for
/// a non-finite mean loss; on a device that does not compute (planning_note) neither: the loss
/// and accuracy are NaN and `samples` the host's count.
EvalResult run_eval(nn::Module& model, BatchFeed& feed, Device device, int64_t interval);

}  // namespace tandem::train
