// The overlap figures of one step's gradient all-reduces, from stamps on the comm stream.
// Each bucket's reduction is [begin, joined) its own work before the collective (the copy into
// the flat buffer), [joined, ready) waiting for the slowest rank to reach the collective (a
// barrier: skew, not communication), then [ready, end) the collective and the copy back.
// Communication time is the bucket's work outside the wait; the hidden part is what of it lies
// before backward ended on the compute stream (what the step did not wait for); skew is the
// waits' sum, reported apart (a rank that computes slower makes the others wait, whatever
// the link).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::train {

struct BucketStamps {
  int64_t begin = 0, joined = 0, ready = 0, end = 0;  // ns, begin <= joined <= ready <= end
};

struct StepOverlap {
  double comm_seconds = 0;    // sum over buckets of (joined - begin) + (end - ready)
  double hidden_seconds = 0;  // the part of comm_seconds before backward_end
  double skew_seconds = 0;    // sum over buckets of (ready - joined)
};

/// The figures of one step whose backward ended at `backward_end` (ns, the same clock).
/// Throws Error(invalid_argument) for stamps out of order.
StepOverlap step_overlap(const std::vector<BucketStamps>& buckets, int64_t backward_end);

}  // namespace tandem::train
