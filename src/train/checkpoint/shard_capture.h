// What one rank puts into its shard of a sharded checkpoint (shard_files.h): the parts of the
// run's state it holds alone (ParamHome::shard_state), its 1/N range of each tensor every rank
// holds alike (the model's weights and buffers unless the home shards them, a replicated
// optimizer's state), and on rank 0 the metrics accumulator and the loss scaler's state.
// Thread-safety: the training thread.
#pragma once

#include <nlohmann/json.hpp>

#include "tandem/safetensors.h"
#include "train/run_builder.h"

namespace tandem::train::checkpoint {

struct ShardSources {
  NamedTensors tensors;   // flat contiguous ranges (host or the device), named "<name>@<begin>"
  nlohmann::json pieces;  // {"<name>@<begin>": {"name", "begin", "shape"}}: write_shard's
};

/// This rank's shard of the run's state now (after the step's work is enqueued; the snapshot
/// then copies the tensors). `accumulator`: the metrics accumulator (rank 0 writes it).
/// Throws what ParamHome::shard_state throws.
ShardSources shard_sources(Run& r, const Tensor& accumulator);

/// What `tandem checkpoint consolidate` needs to write a weights file as --save writes it:
/// {"model": name, "metadata": {the model's config metadata}, "tied": [[alias, source], ...]}.
nlohmann::json weights_record(const Run& r);

}  // namespace tandem::train::checkpoint
