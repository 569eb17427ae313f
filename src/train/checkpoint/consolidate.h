// Consolidating a sharded checkpoint (shard_files.h) into one safetensors file, streaming shard
// by shard: the output's header is computed from the manifest, then each shard is read (and
// verified) in turn and its pieces are written at their places, so that the memory in use is
// about one shard, never the model. The file holds what --save writes: the model's tensors
// under their state-dict names, f32, every tied alias as a copy (GPT-2's lm_head.weight), and
// the metadata "format": "pt", "model" and the model's configuration, so that transformers'
// GPT2LMHeadModel loads it with strict=True; with `with_state` also the optimizer's state,
// the metrics and the loss scaler's, under their checkpoint names.
// Thread-safety: reentrant; one writer per output path.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::train::checkpoint {

struct ConsolidateReport {
  std::string source;  // the sharded checkpoint read
  int shards = 0;
  int64_t tensors = 0, bytes = 0;  // written
};

/// Writes `out` (atomically: temporary file, fsync, rename) from the sharded checkpoint
/// `source` (its folder, or a checkpoint folder whose latest.json or newest complete checkpoint
/// is one). Throws Error(io) for files that cannot be read or written, Error(format) for a
/// checkpoint that is not sharded or fails a check (locate_checkpoint's, read_shard_manifest's,
/// a shard's CRC-32s).
ConsolidateReport consolidate_checkpoint(const std::string& source, const std::string& out, bool with_state);

}  // namespace tandem::train::checkpoint
