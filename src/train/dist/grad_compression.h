// Gradient compression for the all-reduce (--grad-compression):
//   none      f32 all-reduce (mean)
//   fp16|bf16 the bucket travels in half precision (2 bytes a value; summed as the
//             communicator sums half types) and is widened back to f32
//   topk:R    each rank sends only the ceil(R * n) entries of largest magnitude of (gradient +
//             residual), as (index, value) pairs gathered from every rank and summed; what it
//             did not send stays in its residual and is added to the next step's gradient
//             (error feedback: Lin et al. 2018, "Deep Gradient Compression"; Stich et al. 2018,
//             "Sparsified SGD with Memory"). 8 bytes per sent entry.
// The compressed forms work on host-addressable memory (cpu and virt buffers, the offloaded
// optimizer's host gradients).
// Thread-safety: one bucket at a time per compressor (the comm stream, or the update thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tandem/comm/communicator.h"

namespace tandem::train {

class GradCompressor {
 public:
  virtual ~GradCompressor() = default;
  /// In place: replaces the n fp32 gradients of bucket `bucket` at `grads` (host-addressable)
  /// by their mean over the ranks (as compressed). Returns the bytes this rank sent.
  virtual size_t reduce(comm::Communicator& comm, int bucket, float* grads, int64_t n) = 0;
};

/// Parses "none", "fp16", "bf16" or "topk:R" (0 < R <= 1); null for "none". Throws
/// Error(invalid_argument, "[train] --grad-compression X: expected none, fp16, bf16 or topk:RATIO
/// with 0 < RATIO <= 1") otherwise.
std::unique_ptr<GradCompressor> make_grad_compressor(const std::string& spec);
/// Throws as make_grad_compressor for a bad spec (flag validation).
void check_grad_compression(const std::string& spec);

}  // namespace tandem::train
