// format_shares (tandem/train/trainer.h): the split's figures as the epoch line shows them.
#include <fmt/format.h>

#include "tandem/train/trainer.h"

namespace tandem::train {

std::string format_shares(const std::vector<DeviceShare>& shares) {
  std::string out;
  for (const DeviceShare& s : shares)
    out += fmt::format("{}{} {:.1f}% (busy {:.0f}%)", out.empty() ? "" : ", ", s.device, 100 * s.sample_share,
                       100 * s.busy_share);
  return out;
}

}  // namespace tandem::train
