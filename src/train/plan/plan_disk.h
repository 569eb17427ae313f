// The memory plan's disk tier (--optimizer-state-device disk): what the offloaded optimizer's
// files hold and the window of them in pageable host memory.
#pragma once

#include "tandem/nn/module.h"
#include "tandem/train/memory_plan.h"

namespace tandem::train {

/// Adds to `p` the disk tier of `model`'s offloaded optimizer: its buckets as
/// optim::plan_offload_buckets cuts them (--bucket-cap-mb), each starting on a disk unit
/// (storage::DiskStore::kUnitAlign), the f32 master copy (on_disk.parameters) and the moments
/// or momentum (on_disk.optimizer_state) in files, and in_window_units largest buckets of both
/// in pageable host memory (host_pageable, disk_window).
void plan_disk_tier(nn::Module& model, const PlanInputs& in, bool adam, bool momentum, MemoryPlan& p);

}  // namespace tandem::train
