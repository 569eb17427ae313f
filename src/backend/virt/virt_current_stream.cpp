// The per-thread current stream of each virt device.
#include <array>

#include "tandem/error.h"
#include "tandem/virt.h"

namespace tandem {
namespace {

thread_local std::array<Stream, kMaxVirtDevices> t_current;

}  // namespace

Stream virt_current_stream(int index) {
  TD_CHECK_ARG(index >= 0 && index < kMaxVirtDevices, "virt",
               "device index {} out of range [0, {})", index, kMaxVirtDevices);
  const Stream& s = t_current[static_cast<size_t>(index)];
  return s ? s : runtime(DeviceKind::virt).default_stream(index);
}

VirtStreamGuard::VirtStreamGuard(const Stream& stream) {
  TD_CHECK_ARG(stream && stream.device().kind == DeviceKind::virt, "virt",
               "VirtStreamGuard needs a virt stream, got {}",
               stream ? stream.device().str() : "none");
  index_ = stream.device().index;
  previous_ = t_current[static_cast<size_t>(index_)];
  t_current[static_cast<size_t>(index_)] = stream;
}

VirtStreamGuard::~VirtStreamGuard() {
  t_current[static_cast<size_t>(index_)] = previous_;
}

}  // namespace tandem
