// Internal: per-device state of the CUDA runtime (device memory arena, caching pool, default
// stream), the calling thread's current stream and the device probe. Devices are created on
// first use and never destroyed (tensors may outlive main).
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

/// What Tensor::empty on the device draws from: the pool of the calling thread's current
/// stream (current_stream()). Blocks of the default stream come from the pool's stream-less
/// part, those of another current stream from its own part, so that a block freed by the host
/// while that stream's work still uses it is handed out again only to work queued behind it.
class CurrentStreamAllocator final : public Allocator {
 public:
  CurrentStreamAllocator(int device, CachingAllocator& pool) : device_(device), pool_(pool) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override { pool_.deallocate(ptr, bytes); }
  AllocatorStats stats() const override { return pool_.stats(); }
  Device device() const override { return Device(DeviceKind::cuda, device_); }

 private:
  int device_;
  CachingAllocator& pool_;
};

struct DeviceState {
  explicit DeviceState(int index);
  int index;
  DeviceArena arena;
  CachingAllocator pool;
  CurrentStreamAllocator allocator;  // over `pool`, by the calling thread's current stream
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

/// The stream the calling thread's ops on device `index` run on: the stream of the innermost
/// cuda::CurrentStreamGuard active on this thread for that device, else the device's default
/// stream. Throws as device_state().
CudaStream& current_stream(int index);
/// The same as a Stream handle.
Stream current_stream_handle(int index);
/// The current stream when a guard set one, else null (the default stream).
const Stream* guarded_stream(int index);

}  // namespace tandem::cuda_detail
