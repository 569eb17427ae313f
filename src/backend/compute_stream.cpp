#include "tandem/compute_stream.h"

#include <optional>

#include "tandem/cuda.h"
#include "tandem/virt.h"

namespace tandem {

struct OwnComputeStream::Guard {
  std::optional<VirtStreamGuard> virt;
  std::optional<cuda::CurrentStreamGuard> cuda;
};

OwnComputeStream::OwnComputeStream(Device device) {
  Runtime& rt = runtime_for(device);
  switch (device.kind) {
    case DeviceKind::virt:
      stream_ = rt.new_stream(device.index);
      stream_.set_label("inference");
      guard_ = std::make_unique<Guard>();
      guard_->virt.emplace(stream_);
      describe_ = "own stream";
      break;
    case DeviceKind::cuda:
      stream_ = cuda::new_priority_stream(device.index);
      guard_ = std::make_unique<Guard>();
      guard_->cuda.emplace(stream_);
      describe_ = "own stream, high priority";
      break;
    case DeviceKind::cpu:
      stream_ = rt.default_stream(device.index);
      describe_ = "inline on the calling thread";
      break;
  }
}

OwnComputeStream::~OwnComputeStream() = default;

}  // namespace tandem
