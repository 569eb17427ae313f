// Internal: per-device state of the CUDA runtime (device memory arena, caching pool, default
// stream) and the device probe. Devices are created on first use and never destroyed
// (tensors may outlive main).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backend/cuda/cuda_stream.h"
#include "tandem/caching_allocator.h"

namespace tandem::cuda_detail {

/// cudaMalloc / cudaFree with statistics; the backing allocator of the device's pool.
/// allocate() throws Error(out_of_memory, "[alloc] ...") when cudaMalloc fails.
class DeviceArena final : public Allocator {
 public:
  explicit DeviceArena(int device) : device_(device) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  Device device() const override { return Device(DeviceKind::cuda, device_); }

 private:
  int device_;
  mutable std::mutex mu_;
  AllocatorStats s_;
};

struct DeviceState {
  explicit DeviceState(int index);
  int index;
  DeviceArena arena;
  CachingAllocator pool;
  std::shared_ptr<CudaStream> default_stream;
};

/// Number of devices cudaGetDeviceCount reported at the first call (0 when it failed).
/// Never throws.
int probed_device_count();
/// Why probed_device_count() is 0 (CUDA's error string), empty otherwise.
std::string probe_error();
/// The state of device `index`; throws Error(not_available, "[cuda] ...") when there is no
/// such device ("no CUDA device found" when there is none at all).
DeviceState& device_state(int index);

}  // namespace tandem::cuda_detail
