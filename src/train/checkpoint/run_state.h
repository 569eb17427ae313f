// The "state" object of a checkpoint (checkpoint_file.h): where the run stopped and what it
// needs to go on exactly.
//   epoch, step            1-based epoch and the steps done in it (0: the epoch starts)
//   steps_in_epoch         the loader's batches per epoch (must match on resume)
//   global_step            steps done in all: the schedule's clock and the optimizer's count
//   data_order             {seed, shuffle, batch_size, epoch_index, first_batch}: the loader's
//                          order is a pure function of (seed, epoch), batch b its positions
//                          [b * batch_size, (b + 1) * batch_size)
//   tally                  {loss_sum, correct, samples} of the epoch's steps read back so far
//                          (the steps after them are in the tensor "metrics.accumulator")
//   epoch_seconds          training seconds of the epoch before the checkpoint
//   epochs                 the figures of the finished epochs; best_test_accuracy, best_epoch
//   optimizer              {name, step_count, device, upload_pending}: upload_pending, an
//                          offloaded optimizer (delay 1) whose last update is not on the
//                          device yet (its master copy is in the "optim.*.master" tensors)
//   pipeline               {num_workers, prefetch_factor, prefetch_depth, autotune}
//   flags                  run_flags.h
//   run_config             the resolved configuration as a TOML run file (TrainConfig::run_config)
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/train/trainer.h"

namespace tandem::train::checkpoint {

/// Throws Error(format) naming `path` for a malformed entry.
EpochStats stats_from_json(const nlohmann::json& j, const std::string& path);

/// Reads `key` of `state` as T; throws Error(format, "[checkpoint] <path>: state lacks <key>").
template <typename T>
T state_value(const nlohmann::json& state, const char* key, const std::string& path);

}  // namespace tandem::train::checkpoint
