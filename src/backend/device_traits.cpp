#include "tandem/device_traits.h"

#include "tandem/cuda.h"
#include "tandem/ops.h"

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

Stream host_stream() { return runtime(DeviceKind::cpu).default_stream(0); }

}  // namespace tandem
