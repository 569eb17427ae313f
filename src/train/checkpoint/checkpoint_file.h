// One checkpoint file: a safetensors file (readable by any safetensors reader) whose tensors
// are the run's state ("model.<state_dict name>", "optim.<optimizer state name>",
// "metrics.accumulator") and whose metadata holds
//   "format": "tandem-checkpoint", "format_version": "1",
//   "state": the run's position and flags as JSON (see checkpoint_state.h),
//   "crc32": {"<tensor name>": CRC-32 (zlib, ISO-HDLC) of its bytes, as a decimal string}.
// Written atomically (tandem/atomic_file.h: temporary file, fsync, rename, fsync of the
// folder): a crash leaves the previous file or the complete new one.
// Thread-safety: reentrant; one writer per path.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/safetensors.h"

namespace tandem::train::checkpoint {

inline constexpr int kFormatVersion = 1;

/// CRC-32 of a contiguous host tensor's bytes (zlib crc32).
uint32_t tensor_crc32(const Tensor& t);

/// Writes `tensors` (contiguous host tensors) and `state` to `path` atomically, with a CRC-32
/// per tensor. Throws Error(io, "[checkpoint] <path>: ...") naming the system's reason (a full
/// disk: "No space left on device"); the previous file at `path`, if any, is untouched then.
void write_checkpoint_file(const std::string& path, const nlohmann::json& state, const NamedTensors& tensors);

struct CheckpointFile {
  nlohmann::json state;
  NamedTensors tensors;  // host tensors, in file order
};

/// Reads `path` and verifies it: a safetensors file (header, offsets, not truncated), the
/// format and its version, a CRC-32 for every tensor that matches its bytes, a state object.
/// Throws Error(io) when it cannot be read, Error(format, "[checkpoint] <path>: <failed
/// check>") otherwise.
CheckpointFile read_checkpoint_file(const std::string& path);

}  // namespace tandem::train::checkpoint
