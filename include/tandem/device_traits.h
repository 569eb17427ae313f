// What a device's memory and copy paths allow, for code outside the backends (communicators,
// gradient reducers, the batch split) that must not test device kinds itself.
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/stream.h"

namespace tandem {

/// Whether the host can read and write `device`'s tensors through their data pointers
/// (cpu, and virt, whose memory is an arena in host memory); false for cuda.
bool host_addressable(Device device);

/// One line naming the compute libraries `device`'s ops run on and their versions, for
/// banners: ops::backend_versions() (oneDNN) for cpu and virt, cuda::versions() (CUDA runtime,
/// cuBLAS, cuDNN) for cuda.
std::string compute_libraries(Device device);

/// "" when the devices can share one run with copies between any two of them; otherwise the
/// reason they cannot (cuda and virt have no copy path between them).
std::string copy_path_conflict(const std::vector<Device>& devices);

/// What `device` can still give for tensors, for the memory plan (tandem/train/memory_plan.h).
struct DeviceMemoryLimit {
  bool capped =
      false;  // false: no limit known (cpu: the host is planned apart; virt without memory_mb)
  size_t available_bytes = 0;  // when capped, bytes
  std::string source;  // what the figure is, e.g. "memory_mb of virt:0", "free memory of cuda:0"
};
/// A virt device's memory_mb cap less what its arena holds; a cuda device's free memory
/// (cudaMemGetInfo) plus what tandem's pool caches unused; not capped for cpu. Throws
/// Error(not_available) for a device this build or machine lacks.
DeviceMemoryLimit device_memory_limit(Device device);

/// Whether what `device` allocates and uses is host RAM: cpu, and a virt device that computes
/// (its arena is host memory; with compute=none nothing touches its pages, so they are never
/// committed). A memory plan then counts the device's bytes against the host's. Never throws.
bool device_memory_is_host_ram(Device device) noexcept;

/// The host's own stream (the cpu runtime's default stream): where host-memory collectives,
/// bootstraps and barriers of the communicators run. Thread-safe.
Stream host_stream();

}  // namespace tandem
