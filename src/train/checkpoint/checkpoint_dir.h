// A checkpoint folder: files "step-<global step, 10 digits>.safetensors" (checkpoint_file.h)
// or sharded checkpoints, folders "step-<global step>.shards" (shard_files.h),
// and the manifest "latest.json" ({"format_version": 1, "checkpoint": "<file name>",
// "epoch": E, "step": S, "global_step": G}), written after the checkpoint it names is
// complete and on disk, so it always names a complete checkpoint. Older checkpoints beyond
// the newest `keep` are removed after the manifest moved on.
// Thread-safety: one writer per folder (the checkpoint writer thread); reading is reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_file.h"

namespace tandem::train::checkpoint {

inline constexpr const char* kManifestName = "latest.json";

/// "step-0000000123.safetensors".
std::string checkpoint_file_name(int64_t global_step);
/// "step-0000000123.shards" (shard_files.h).
std::string sharded_checkpoint_name(int64_t global_step);

/// Creates `dir` when missing (its parent must exist) and removes temporary files that
/// processes no longer alive left there ("<name>.tmp-<pid>", e.g. after kill -9) and sharded
/// checkpoint folders never completed ("<name>.shards.tmp"; call it before the run's ranks
/// write any). Throws
/// Error(io) naming the folder.
void prepare_checkpoint_dir(const std::string& dir);

/// Writes the manifest naming `file_name` (in `dir`) atomically, then removes all but the
/// newest `keep` checkpoint files (never the one named). Throws Error(io) naming the file.
void publish_checkpoint(const std::string& dir, const std::string& file_name, const nlohmann::json& state, int keep);

/// Reads a checkpoint file, or a sharded checkpoint folder whole (shard_files.h). Throws as
/// read_checkpoint_file and read_sharded_checkpoint.
CheckpointFile read_any_checkpoint(const std::string& path);

/// The checkpoint files and sharded checkpoint folders in `dir`, newest (highest global step)
/// first.
std::vector<std::string> list_checkpoints(const std::string& dir);

struct Located {
  std::string path;      // the checkpoint that verified
  CheckpointFile file;   // its contents
  std::string fallback;  // "" or why newer ones were passed over, one line each
};

/// Opens the checkpoint `target` names: a file, or a folder (its manifest's checkpoint;
/// when that one or the manifest fails, the newest checkpoint of the folder that verifies,
/// saying which failed and why in `fallback`). Throws the file's Error for a bad file, and
/// Error(io/format) naming the folder when none of its checkpoints verifies (each failure
/// listed).
Located locate_checkpoint(const std::string& target);

}  // namespace tandem::train::checkpoint
