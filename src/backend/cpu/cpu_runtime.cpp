// The cpu runtime: host memory, streams whose work runs inline on the calling thread, events
// that complete when recorded, copies as memcpy.
#include "backend/cpu/cpu_runtime.h"

#include <cstring>

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
  void copy_async(void* dst, Device, const void* src, Device, size_t bytes,
                  const Stream&) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }

 private:
  Stream stream_{std::make_shared<InlineStream>()};
};

}  // namespace

Runtime* create_cpu_runtime() {
  return new CpuRuntime();
}

}  // namespace tandem
