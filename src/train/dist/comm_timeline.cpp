#include "train/dist/comm_timeline.h"

#include <algorithm>

#include "tandem/error.h"

namespace tandem::train {

namespace {

// Seconds of [b, e) that lie before t.
double before(int64_t b, int64_t e, int64_t t) { return static_cast<double>(std::clamp(t, b, e) - b) * 1e-9; }

}  // namespace

StepOverlap step_overlap(const std::vector<BucketStamps>& buckets, int64_t backward_end) {
  StepOverlap o;
  for (const BucketStamps& s : buckets) {
    TD_CHECK_ARG(s.begin <= s.joined && s.joined <= s.ready && s.ready <= s.end, "train",
                 "bucket stamps {} {} {} {}: expected begin <= joined <= ready <= end", s.begin, s.joined, s.ready,
                 s.end);
    o.comm_seconds += static_cast<double>((s.joined - s.begin) + (s.end - s.ready)) * 1e-9;
    o.hidden_seconds += before(s.begin, s.joined, backward_end) + before(s.ready, s.end, backward_end);
    o.skew_seconds += static_cast<double>(s.ready - s.joined) * 1e-9;
  }
  return o;
}

}  // namespace tandem::train
