#include "tandem/device_traits.h"

#include <fmt/format.h>

#include "tandem/cuda.h"
#include "tandem/ops.h"
#include "tandem/virt.h"

namespace tandem {

bool host_addressable(Device device) { return device.kind != DeviceKind::cuda; }

std::string compute_libraries(Device device) {
  return device.kind == DeviceKind::cuda ? cuda::versions() : ops::backend_versions();
}

std::string copy_path_conflict(const std::vector<Device>& devices) {
  bool cuda = false, virt = false;
  for (const Device& d : devices) {
    cuda |= d.kind == DeviceKind::cuda;
    virt |= d.kind == DeviceKind::virt;
  }
  return cuda && virt ? "cuda and virt devices cannot share a run (no copy path between them)" : "";
}

DeviceMemoryLimit device_memory_limit(Device device) {
  DeviceMemoryLimit m;
  if (device.kind == DeviceKind::virt) {
    const size_t cap = virt_throttle(device.index).memory_bytes;
    const size_t held = virt_arena_stats(device.index).reserved_bytes;
    m.capped = cap != 0;
    m.available_bytes = cap > held ? cap - held : 0;
    m.source = fmt::format("memory_mb of {}", device.str());
  } else if (device.kind == DeviceKind::cuda) {
    const AllocatorStats s = cuda::memory_stats(device.index);
    m.capped = true;
    m.available_bytes = cuda::device_properties(device.index).free_memory_bytes +
                        (s.reserved_bytes - s.allocated_bytes);
    m.source = fmt::format("free memory of {}", device.str());
  }
  return m;
}

bool device_memory_is_host_ram(Device device) noexcept {
  if (device.kind == DeviceKind::cpu) return true;
  if (device.kind != DeviceKind::virt) return false;
  try {
    return virt_throttle(device.index).compute;
  } catch (...) {
    return true;  // an unknown index: count it, as a virt device that computes would be
  }
}

Stream host_stream() { return runtime(DeviceKind::cpu).default_stream(0); }

}  // namespace tandem
