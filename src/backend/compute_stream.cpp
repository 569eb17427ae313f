#include "tandem/compute_stream.h"

#include <fmt/format.h>

#include "tandem/virt.h"

namespace tandem {

struct OwnComputeStream::Guard {
  explicit Guard(const Stream& s) : virt(s) {}
  VirtStreamGuard virt;
};

OwnComputeStream::OwnComputeStream(Device device) {
  Runtime& rt = runtime_for(device);
  switch (device.kind) {
    case DeviceKind::virt:
      stream_ = rt.new_stream(device.index);
      stream_.set_label("inference");
      guard_ = std::make_unique<Guard>(stream_);
      describe_ = "own stream";
      break;
    case DeviceKind::cuda:
      stream_ = rt.default_stream(device.index);
      describe_ = "the device's default stream";
      break;
    case DeviceKind::cpu:
      stream_ = rt.default_stream(device.index);
      describe_ = "inline on the calling thread";
      break;
  }
}

OwnComputeStream::~OwnComputeStream() = default;

std::string concurrent_ops_conflict(Device a, Device b) {
  if (a.kind == DeviceKind::cuda && a == b)
    return fmt::format("{} runs every op on one stream per device in this build: serve on cpu or another device",
                       a.str());
  return "";
}

}  // namespace tandem
