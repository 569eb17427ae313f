// Device options, the planning note and the device listing: the device-kind decisions that the command line
// and `tandem info` need, kept beside the backends so that nothing outside src/backend names
// a kind.
#include <fmt/format.h>

#include "tandem/cuda.h"
#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/stream.h"
#include "tandem/virt.h"

namespace tandem {

void configure_device(const DeviceSpec& spec) {
  if (spec.device.kind == DeviceKind::virt) {
    configure_virt(spec);
    return;
  }
  TD_CHECK_ARG(spec.options.empty(), "device", "options are only accepted for virt devices");
}

int nvml_device_index(Device device) noexcept { return device.kind == DeviceKind::cuda ? device.index : -1; }

std::string planning_note(Device device) {
  if (device.kind != DeviceKind::virt || virt_throttle(device.index).compute) return "";
  return "virt compute=none: results are not computed; figures are throughput planning only";
}

namespace {

// One line per device of `kind` with its pool's use, or why there is none.
std::string device_lines(DeviceKind kind) {
  try {
    Runtime& rt = runtime(kind);
    const int n = rt.device_count();
    if (n == 0) return fmt::format("  {}: none found\n", device_kind_name(kind));
    std::string out;
    for (int i = 0; i < n; ++i) {
      const AllocatorStats s = rt.allocator(i).stats();
      out += fmt::format("  {}:{}  allocated {} bytes, reserved {} bytes\n", device_kind_name(kind), i,
                         s.allocated_bytes, s.reserved_bytes);
    }
    return out;
  } catch (const Error& e) {
    return fmt::format("  {}: {}\n", device_kind_name(kind), e.what());
  }
}

}  // namespace

std::string describe_devices() {
  std::string out = "  cpu\n";
  out += device_lines(DeviceKind::virt);
  out += device_lines(DeviceKind::cuda);
  for (int i = 0; i < cuda::device_count(); ++i) {
    const cuda::DeviceProperties p = cuda::device_properties(i);
    out += fmt::format("    cuda:{} {}: {:.1f} GiB, {} SMs, compute capability {}.{}\n", i, p.name,
                       static_cast<double>(p.total_memory_bytes) / (1 << 30), p.multiprocessor_count, p.major,
                       p.minor);
  }
  return out;
}

}  // namespace tandem
