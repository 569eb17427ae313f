// Backend registry: which Backend runs the ops for each device kind. The cpu backend is built
// in; virt and cuda register themselves.
#include <array>
#include <atomic>

#include "tandem/backend.h"

namespace tandem::ops {
namespace {

std::array<std::atomic<Backend*>, 3>& registry() {
  static std::array<std::atomic<Backend*>, 3> r{};
  return r;
}

}  // namespace

void Backend::convert_memory_format(const Tensor&, const Tensor&) {
  throw_error(ErrorCode::not_available, "convert_memory_format",
              fmt::format("the {} backend has no convert_memory_format", name()));
}

Backend* find_backend(DeviceKind kind) {
  if (kind == DeviceKind::cpu) return &cpu_backend();
  return registry()[static_cast<size_t>(kind)].load(std::memory_order_acquire);
}

void register_backend(DeviceKind kind, Backend* backend) {
  registry()[static_cast<size_t>(kind)].store(backend, std::memory_order_release);
}

Backend& backend_for(Device device, const char* op) {
  if (device.kind == DeviceKind::cpu) return cpu_backend();
  Backend* b = registry()[static_cast<size_t>(device.kind)].load(std::memory_order_acquire);
  if (!b) {
    throw_error(ErrorCode::not_available, op,
                fmt::format("no {} backend in this build", device_kind_name(device.kind)));
  }
  return *b;
}

}  // namespace tandem::ops
