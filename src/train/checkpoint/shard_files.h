// Sharded checkpoints (--checkpoint-format sharded): each rank writes the part of the state it
// holds, in parallel, into a folder "step-<global step, 10 digits>.shards" of the checkpoint
// folder:
//   "rank-<r>-of-<W>.safetensors": rank r's shard, a checkpoint file (checkpoint_file.h: a
//     CRC-32 per tensor) whose tensors are flat ranges of the state's tensors, named
//     "<name>@<first element>", and whose state is {"rank": r, "world_size": W, "global_step":
//     G, "pieces": {"<tensor name in the file>": {"name": "<state tensor>", "begin": first
//     element, "shape": [the whole tensor's shape]}}};
//   "manifest.json": {"format": "tandem-sharded-checkpoint", "format_version": 1,
//     "world_size": W, "state": the run's state (as a whole checkpoint's; rank 0's),
//     "shards": ["rank-0-of-W.safetensors", ...], "tensors": {"<state tensor>": {"dtype":
//     safetensors dtype, "shape": [...], "pieces": [{"shard": r, "key": "<name in the
//     file>", "begin": first element, "end": one past the last}]}}}: every tensor's global
//     shape and each shard's element ranges of it (the pieces cover every element).
// Atomic over the ranks: every rank writes its shard (itself atomically) into
// "step-<G>.shards.tmp"; rank 0 waits until all W shards are there, checks that they cover
// every tensor, writes the manifest and renames the folder into place; only then does
// latest.json name it. A folder without the ".tmp" suffix is complete; a killed rank at any
// moment leaves the previous checkpoint as latest.json named it.
// Thread-safety: reentrant; one writer per folder and rank.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "train/checkpoint/checkpoint_file.h"

namespace tandem::train::checkpoint {

inline constexpr const char* kShardSuffix = ".shards";
inline constexpr const char* kShardManifest = "manifest.json";

/// "rank-<rank>-of-<world>.safetensors".
std::string shard_file_name(int rank, int world);

/// Writes rank `rank`'s shard of checkpoint `name` ("step-<G>.shards") into `dir`: `tensors`
/// (flat host tensors, named as `pieces`' keys) with `pieces` ({"<key>": {"name", "begin",
/// "shape"}}). Rank 0 then waits (at most `timeout_s` seconds) for the other ranks' shards,
/// writes the manifest with `state` and renames the folder into place. A rank that fails
/// leaves "rank-<r>.failed" (its message) in the temporary folder, which makes rank 0 fail at
/// once. Throws Error(io) naming the file and the system's reason, Error(format) naming a
/// tensor no shard covers, Error(timeout) naming the ranks whose shards did not come.
void write_shard(const std::string& dir, const std::string& name, int rank, int world, const nlohmann::json& state,
                 const nlohmann::json& pieces, const NamedTensors& tensors, double timeout_s);

/// Whether `path` is a sharded checkpoint folder (it holds a manifest).
bool is_sharded_checkpoint(const std::string& path);

/// The manifest of the sharded checkpoint `path`, checked: the format and its version, every
/// tensor's shape and dtype, pieces within it that cover every element. Throws Error(io) when
/// it cannot be read, Error(format, "[checkpoint] <path>: <failed check>").
nlohmann::json read_shard_manifest(const std::string& path);

/// Reads a sharded checkpoint whole (every shard verified by its CRC-32s), as a whole
/// checkpoint's file would hold it: at any world size the run cuts its own shards from it.
/// Throws as read_shard_manifest and read_checkpoint_file.
CheckpointFile read_sharded_checkpoint(const std::string& path);

/// The safetensors header of a shard `path` (the JSON object before the data: every tensor's
/// dtype, shape and data_offsets, and "__metadata__"), without reading the data. Throws
/// Error(io) when it cannot be read, Error(format) for a file that is no safetensors file.
nlohmann::json read_shard_header(const std::string& path);

/// Removes `path` and, for a folder, everything in it (best effort: errors are ignored).
void remove_tree(const std::string& path);

}  // namespace tandem::train::checkpoint
