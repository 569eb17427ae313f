// Runtime registry: the runtime of each device kind, created on first use. The backends'
// constructors are called directly (create_cpu_runtime, create_virt_runtime,
// create_cuda_runtime), so their objects are always linked from the static library; for virt
// and cuda a factory registered with register_runtime() takes precedence.
#include <array>
#include <mutex>

#include "backend/cpu/cpu_runtime.h"
#include "backend/cuda/cuda_entry.h"
#include "backend/virt/virt_runtime.h"
#include "tandem/error.h"
#include "tandem/stream.h"

namespace tandem {
namespace {

struct Registry {
  std::mutex mu;
  std::array<Runtime* (*)(), 3> factories{};
  std::array<Runtime*, 3> runtimes{};
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

void register_runtime(DeviceKind kind, Runtime* (*factory)()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  TD_CHECK(static_cast<size_t>(kind) < r.factories.size(), ErrorCode::invalid_argument, "device",
           "device kind {} does not exist", static_cast<size_t>(kind));
  r.factories[static_cast<size_t>(kind)] = factory;
  r.runtimes[static_cast<size_t>(kind)] = nullptr;
}

Runtime& runtime(DeviceKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const size_t k = static_cast<size_t>(kind);
  TD_CHECK(k < r.runtimes.size(), ErrorCode::invalid_argument, "device", "device kind {} does not exist", k);
  if (!r.runtimes[k]) {
    if (kind == DeviceKind::cpu) {
      r.runtimes[k] = create_cpu_runtime();
    } else if (r.factories[k]) {
      r.runtimes[k] = r.factories[k]();
    } else if (kind == DeviceKind::virt) {
      r.runtimes[k] = create_virt_runtime();
    } else if (kind == DeviceKind::cuda) {
      r.runtimes[k] = create_cuda_runtime();  // src/backend/cuda, or no_cuda: "tandem was built without CUDA"
    } else {
      throw_error(ErrorCode::not_available, "device",
                  std::string("device kind '") + device_kind_name(kind) + "' is not available in this build");
    }
  }
  return *r.runtimes[k];
}

Runtime& runtime_for(Device device) {
  Runtime& rt = runtime(device.kind);
  const int n = rt.device_count();
  if (n == 0) {
    throw_error(ErrorCode::not_available, "device",
                std::string("no ") + (device.kind == DeviceKind::cuda ? "CUDA" : device_kind_name(device.kind)) +
                    " device found");
  }
  TD_CHECK(device.index >= 0, ErrorCode::invalid_argument, "device", "{}: expected a device index >= 0",
           device.str());
  TD_CHECK(device.index < n, ErrorCode::not_available, "device", "{} requested but only {} {} device(s) present",
           device.str(), n, device_kind_name(device.kind));
  return rt;
}

}  // namespace tandem
