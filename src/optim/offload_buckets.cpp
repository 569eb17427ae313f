// Bucket plan of the offloaded optimizer: whole parameters, reverse registration order.
#include <algorithm>

#include "tandem/error.h"
#include "tandem/optim/offload.h"

namespace tandem::optim {

namespace {
// Each parameter's range starts on 16 floats (64 bytes): aligned vector loads for the kernels.
constexpr int64_t kAlignElements = 16;
int64_t align_up(int64_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }
}  // namespace

size_t bucket_cap_bytes(double mib) {
  const double cap = std::min(mib * 1024.0 * 1024.0, 0x1p62);  // casting a larger double is undefined
  return cap < 1 ? size_t{1} : static_cast<size_t>(cap);
}

std::vector<OffloadBucket> plan_offload_buckets(const std::vector<int64_t>& numels, size_t cap_bytes,
                                                size_t first_cap_bytes) {
  TD_CHECK_ARG(cap_bytes > 0, "offload", "bucket capacity must be > 0 bytes, got 0");
  std::vector<OffloadBucket> buckets;
  int64_t offset = 0;
  size_t bucket_bytes = 0;
  for (size_t i = numels.size(); i-- > 0;) {
    TD_CHECK_ARG(numels[i] >= 0, "offload", "parameter {} has {} elements, expected >= 0", i, numels[i]);
    const size_t bytes = static_cast<size_t>(numels[i]) * sizeof(float);
    const size_t cap = buckets.size() == 1 && first_cap_bytes > 0 ? first_cap_bytes : cap_bytes;
    if (buckets.empty() || (!buckets.back().params.empty() && bucket_bytes + bytes > cap)) {
      if (!buckets.empty()) buckets.back().end = offset;
      buckets.push_back({{}, offset, offset});
      bucket_bytes = 0;
    }
    buckets.back().params.push_back(i);
    bucket_bytes += bytes;
    offset += align_up(numels[i]);
  }
  if (!buckets.empty()) buckets.back().end = offset;
  return buckets;
}

}  // namespace tandem::optim
