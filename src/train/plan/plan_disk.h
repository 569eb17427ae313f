// The memory plan's disk tier (--optimizer-state-device disk): what the offloaded optimizer's
// files hold and the window of them in pageable host memory.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/train/memory_plan.h"

namespace tandem::train {

/// Adds to `p` the disk tier of `model`'s offloaded optimizer: its buckets as
/// optim::plan_offload_buckets cuts them (--bucket-cap-mb), each starting on a disk unit
/// (storage::DiskStore::kUnitAlign), the f32 master copy (on_disk.parameters) and the moments
/// or momentum (on_disk.optimizer_state) in files, and in_window_units largest buckets of both
/// in pageable host memory (host_pageable, disk_window).
void plan_disk_tier(nn::Module& model, const PlanInputs& in, bool adam, bool momentum, MemoryPlan& p);

/// Adds to `p` the disk tier of a streamed home (train::ParamStreamer::set_disk_tier): one unit
/// per streamed part (`parts`: each part's parameter elements; empty parts are not streamed),
/// each tensor padded to 16 elements and each unit starting on kUnitAlign, the f32 master
/// values (on_disk.parameters; when `copies`, some parameter uploads a compute copy) and the
/// moments or momentum (on_disk.optimizer_state) in files, and in_window_units largest parts
/// of both in pageable host memory (host_pageable, disk_window).
void plan_streamed_disk_tier(const std::vector<std::vector<int64_t>>& parts, bool copies, const PlanInputs& in,
                             bool adam, bool momentum, MemoryPlan& p);

}  // namespace tandem::train
