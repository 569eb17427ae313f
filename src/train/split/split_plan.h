// The batch split between devices (--devices, --split): parsing the flags and dividing one
// step's batch into whole-sample parts.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/device.h"

namespace tandem::train {

/// --devices D1,D2,... with --split auto|W1,W2,...
struct SplitPlan {
  std::vector<DeviceSpec> devices;  // in the order given; the first holds the optimizer
  bool automatic = true;            // --split auto: shares follow the measured speed
  std::vector<double> weights;      // --split W1,W2,...: one positive weight per device
};

/// Parses the two flags. Throws Error(invalid_argument, "[train] --devices ...") for fewer
/// than two devices, a device listed twice (options do not make another device:
/// "virt:0?speed=0.5,virt:0" names virt:0 twice), cuda devices next to virt ones (copies
/// between them go through neither runtime) or an unparsable device; "[train] --split ..."
/// for a weight count other than the device count, a weight that is not a finite number > 0,
/// or weights that give a device no sample of `batch_size` (partition_batch).
SplitPlan parse_split(const std::string& devices, const std::string& split, int64_t batch_size);

/// Divides `batch` samples in proportion to `weights` (each > 0): largest remainder
/// (Hamilton's method), so the parts add up to `batch`. Throws Error(invalid_argument)
/// naming `names[d]` when device d would get no sample (a device needs at least one).
std::vector<int64_t> partition_batch(int64_t batch, const std::vector<double>& weights,
                                     const std::vector<std::string>& names);

/// Like partition_batch, but a device that would get no sample gets one (taken from the
/// largest part); for the automatic split, which must never drop a device. Requires
/// batch >= weights.size().
std::vector<int64_t> partition_at_least_one(int64_t batch, const std::vector<double>& weights);

}  // namespace tandem::train
