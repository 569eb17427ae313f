// The parts of the communicator seam every implementation shares: the timeout and the
// launcher's environment.
#include "tandem/comm/communicator.h"
#include "tandem/device_traits.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "comm/comm_util.h"

namespace tandem::comm {

void Communicator::set_timeout_seconds(double seconds) {
  TD_CHECK_ARG(std::isfinite(seconds) && seconds > 0, kOp, "timeout: expected seconds > 0, got {}", seconds);
  timeout_seconds_ = seconds;
}

// An environment variable holding a decimal integer >= 0, or -1.
static int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' && x >= 0 && x < (1L << 30) ? static_cast<int>(x) : -1;
}

CommunicatorPtr for_device(const CommunicatorPtr& host, Device device) {
  if (host_addressable(device)) return host;
  return nccl_communicator(host, device.index);
}

LaunchInfo launch_info() {
  for (const auto& [rank_var, size_var] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const int rank = env_int(rank_var), size = env_int(size_var);
    if (rank < 0 || size < 1 || rank >= size) continue;
    int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    if (local < 0) local = env_int("MPI_LOCALRANKID");
    return {rank, size, local < 0 ? 0 : local};
  }
  return {};
}

}  // namespace tandem::comm
