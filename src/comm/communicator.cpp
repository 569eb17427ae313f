// The parts of the communicator seam every implementation shares: the timeout and the
// communicator for a device (the launcher's environment is src/comm/launch.cpp).
#include "tandem/comm/communicator.h"
#include "tandem/device_traits.h"

#include <cmath>

#include "comm/comm_util.h"

namespace tandem::comm {

void Communicator::set_timeout_seconds(double seconds) {
  TD_CHECK_ARG(std::isfinite(seconds) && seconds > 0, kOp, "timeout: expected seconds > 0, got {}", seconds);
  timeout_seconds_ = seconds;
}

CommunicatorPtr for_device(const CommunicatorPtr& host, Device device) {
  if (host_addressable(device)) return host;
  return nccl_communicator(host, device.index);
}

}  // namespace tandem::comm
