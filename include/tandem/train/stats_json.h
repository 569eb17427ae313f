// One epoch's figures as JSON, the form both the checkpoint state and the metrics file use:
// {"epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy", "images_per_s",
// "seconds", "lr", "pinned_peak_bytes"} (units as EpochStats; "images_per_s" is
// EpochStats::samples_per_s, named for images as the metrics files have always named it), and
// "tokens_per_s" where it is > 0 (token data), "pinned_allocated_bytes" and
// "pageable_allocated_bytes" where either is > 0.
// Thread-safety: reentrant.
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/train/trainer.h"

namespace tandem::train {

nlohmann::json epoch_stats_json(const EpochStats& s);

}  // namespace tandem::train
