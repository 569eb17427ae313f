// Runtime registry and the cpu runtime (work runs inline; events complete when recorded).
#include <array>
#include <cstring>
#include <mutex>

#include "tandem/stream.h"
#include "tandem/error.h"
#include "backend/cuda/cuda_entry.h"
#include "backend/virt/virt_runtime.h"

namespace tandem {
namespace {

class DoneEvent final : public EventImpl {
 public:
  bool query() const override { return true; }
  void synchronize() override {}
};

class InlineStream final : public StreamImpl {
 public:
  Device device() const override { return Device{}; }
  void enqueue(std::function<void()> work) override { work(); }
  std::shared_ptr<EventImpl> record() override { return std::make_shared<DoneEvent>(); }
  void wait(std::shared_ptr<EventImpl> event) override { event->synchronize(); }
  void synchronize() override {}
};

class CpuRuntime final : public Runtime {
 public:
  DeviceKind kind() const override { return DeviceKind::cpu; }
  int device_count() const override { return 1; }
  Allocator& allocator(int) override { return host_allocator(); }
  Stream default_stream(int) override { return stream_; }
  Stream new_stream(int) override { return Stream(std::make_shared<InlineStream>()); }
  void copy_async(void* dst, Device, const void* src, Device, size_t bytes, const Stream&) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }

 private:
  Stream stream_{std::make_shared<InlineStream>()};
};

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
  r.factories[static_cast<size_t>(kind)] = factory;
  r.runtimes[static_cast<size_t>(kind)] = nullptr;
}

Runtime& runtime(DeviceKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const size_t k = static_cast<size_t>(kind);
  if (!r.runtimes[k]) {
    if (kind == DeviceKind::cpu) {
      r.runtimes[k] = new CpuRuntime();
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
  TD_CHECK(device.index < n, ErrorCode::not_available, "device", "{} requested but only {} {} device(s) present",
           device.str(), n, device_kind_name(device.kind));
  return rt;
}

}  // namespace tandem
