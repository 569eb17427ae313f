// Gradient compression for the all-reduce (--grad-compression):
//   none      f32 all-reduce (mean)
//   fp16|bf16 the bucket travels in half precision (2 bytes a value; summed as the
//             communicator sums half types) and is widened back to f32
//   topk:R    sparsification with error feedback (Lin et al. 2018, "Deep Gradient Compression";
//             Stich et al. 2018, "Sparsified SGD with Memory"). Per rank and bucket a residual r
//             is kept; each step a = gradient + r, and for each tensor of the bucket (its own
//             top-k, as DGC selects per layer) the ceil(d * n) entries of largest |a| are sent
//             as (index, value) pairs, gathered from every rank and summed, then divided by the
//             world size; r becomes a with the sent entries zeroed (what was not sent is added
//             to the next step). d is R after the warm-up; during the first warmup_steps steps
//             it falls exponentially from 1 to R (d = R^(s / warmup_steps) at step s, DGC's
//             exponentially increasing sparsity). A tensor whose pairs would cost as much as its
//             values (2k >= n) or that is too small to sparsify (ceil(R * n) < 16 entries)
//             travels dense in an f32 all-reduce instead. 8 bytes per sent pair, 4 per dense
//             value.
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
  /// The tensors of bucket `bucket`: [offset, offset + numel) ranges of its buffer, in order
  /// (default: the whole buffer is one tensor). Compressors that select per tensor use them.
  virtual void set_layout(int /*bucket*/, std::vector<std::pair<int64_t, int64_t>> /*ranges*/) {}
};

/// Parses "none", "fp16", "bf16" or "topk:R" (0 < R <= 1); null for "none". `warmup_steps`
/// (>= 0): topk's sparsity warm-up (see above). Throws Error(invalid_argument, "[train]
/// --grad-compression X: expected none, fp16, bf16 or topk:RATIO with 0 < RATIO <= 1")
/// otherwise.
std::unique_ptr<GradCompressor> make_grad_compressor(const std::string& spec, int64_t warmup_steps = 0);
/// Throws as make_grad_compressor for a bad spec (flag validation).
void check_grad_compression(const std::string& spec);

}  // namespace tandem::train
