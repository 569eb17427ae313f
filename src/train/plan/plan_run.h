// The memory plan of a Run being built (tandem/train/memory_plan.h): its inputs read from the
// run's flags, device, data sets and model spec, before the model or any buffer exists.
// Thread-safety: called by the thread that builds the run.
#pragma once

#include "tandem/train/memory_plan.h"
#include "train/run_builder.h"

namespace tandem::train {

/// What plan_memory needs of `r` (device, compute dtype, data sets, cfg), for `world_size`
/// ranks (each takes its share of the samples).
PlanInputs plan_inputs(const Run& r, int world_size);

/// The plan of `r` with its limits (apply_limits): the model built shape-only
/// (nn::make_model_shapes) from r.cfg.model and r.spec. Throws Error(invalid_argument,
/// "[train] --recompute blocks: ...") when the model has no block that recomputes.
MemoryPlan plan_run(const Run& r, int world_size);

/// Throws Error(invalid_argument, "[train] --recompute blocks: model MODEL has no block that
/// recomputes ...") when `blocks` (Module::set_recompute's count) is 0.
void check_recompute_blocks(int64_t blocks, const std::string& model);

}  // namespace tandem::train
