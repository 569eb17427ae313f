// Building a split run (--devices): the flags a split run accepts, its devices and its
// thread budget. Used by build_run (run_builder.cpp).
// Thread-safety: called by the thread that builds the run.
#pragma once

#include <string>

#include "tandem/train/config.h"
#include "train/split/split_plan.h"

namespace tandem::train {

/// Parses --devices and --split (parse_split) and prepares each device (configure_device:
/// virt options, a cuda device that must exist). Under mpirun each rank splits its own share
/// of the batch over its devices. Throws Error(invalid_argument) naming the flag for what
/// parse_split refuses; Error(not_available) for a device this build or machine lacks, naming
/// --devices.
SplitPlan prepare_split(const TrainConfig& cfg);

/// planning_note() of the first device of `plan` that does not compute, "" when all do.
/// Throws Error(invalid_argument) when some compute and others do not (the combined
/// gradients would mix computed and uncomputed values).
std::string split_planning(const SplitPlan& plan);

/// The compute threads of the run: --threads when given; else every available core, less
/// one per loader worker when the cpu is one of the split's devices (its compute then shares
/// the cores with the workers, which must not starve), at least 1.
int compute_threads(const TrainConfig& cfg, const SplitPlan* plan);

}  // namespace tandem::train
