// The run's flags in a checkpoint, and the check that a resumed run does the same math.
// Flags that change the weights or the per-epoch figures (model, data, batch, optimizer and
// its hyper-parameters, schedule, epochs, seed, augmentation, --log-interval, the compute
// threads (oneDNN's sums depend on them; 0 is recorded as the core count) ...) must match;
// those that only change speed or where things run (--device, --optimizer-device,
// --num-workers, --prefetch-factor, --bucket-cap-mb, --eval-batch-size, outputs) may differ:
// the cpu, virt and offloaded (delay 0) optimizers give the same weights bit for bit.
// Thread-safety: reentrant.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tandem/train/config.h"

namespace tandem::train::checkpoint {

/// Every flag of `cfg` as {"--flag": value}.
nlohmann::json flags_json(const TrainConfig& cfg);

/// Compares the math-changing flags recorded in `saved` (flags_json of the checkpointed run)
/// with `now`. A difference throws Error(invalid_argument, "[train] --resume <path>: --lr 0.01
/// differs from the checkpoint's 0.002 ...; pass --force to resume anyway"); with `force` it
/// returns the differences, one "--flag: now X, checkpoint Y" line each, for a warning.
std::string check_resume_flags(const nlohmann::json& saved, const TrainConfig& now, bool force,
                               const std::string& path);

}  // namespace tandem::train::checkpoint
