// CUDA-specific API: device properties, memory pools and mapped host memory.
//
// The generic interface (runtime_for(device), Tensor::empty on "cuda:0", tandem::ops)
// covers most uses; this header adds what only CUDA has. Every function here is defined in
// every build: a build without CUDA (cmake -DTANDEM_CUDA=OFF, or no nvcc found) answers
// built() == false and device_count() == 0, and the others throw
// Error(not_available, "[cuda] tandem was built without CUDA").
//
// Where work runs: ops on cuda tensors (tandem/ops.h, and the optimizer updates of
// tandem/optim_ops.h) are enqueued on the calling thread's current stream of the device,
// runtime_for(cuda:i).current_stream(i): the device's default stream (a non-blocking stream
// that tandem creates per device, not CUDA's legacy stream 0) unless a CurrentStreamGuard
// makes another one current on that thread. The device memory those ops' outputs get comes
// from the current stream's pool. Before an op its stream waits (on the device) for the
// pending write of each tensor it touches, so a thread on its own stream may read tensors
// another stream wrote; a tensor that work on another stream than its pool's still reads
// must be kept alive until that work ran (or declared with record_use). Nothing here blocks
// the host unless it returns a value computed on the device (loss, count_correct), which
// synchronises that stream. Other streams are ordered with Stream::wait(event).
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/caching_allocator.h"
#include "tandem/dtype.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::cuda {

/// True when this build contains the CUDA backend.
bool built();
/// Number of usable CUDA devices; 0 when the build has no CUDA, no driver is installed or
/// no device is visible. Never throws.
int device_count();

/// Properties of one device, as cudaGetDeviceProperties reports them.
struct DeviceProperties {
  std::string name;                 // e.g. "NVIDIA H200"
  size_t total_memory_bytes = 0;    // global memory, bytes
  size_t free_memory_bytes = 0;     // free global memory when asked (cudaMemGetInfo), bytes
  int multiprocessor_count = 0;     // streaming multiprocessors
  int major = 0, minor = 0;         // compute capability, e.g. 9.0
};

/// Throws Error(not_available, "[cuda] ...") without CUDA or for index >= device_count().
DeviceProperties device_properties(int index);
/// One line naming the CUDA runtime, driver, cuBLAS and cuDNN versions, or why there is none
/// ("not built with CUDA", "no CUDA driver: ..."). Never throws.
std::string versions();

/// The caching allocator of device `index` (the pool Tensor::empty on cuda:index draws from):
/// per-stream pools, block splitting and reuse, event-aware free (record_use), statistics.
/// Throws Error(not_available) when the device does not exist.
CachingAllocator& device_allocator(int index);
/// A new stream of device `index` at the device's greatest priority
/// (cudaDeviceGetStreamPriorityRange, cudaStreamCreateWithPriority): the GPU starts its
/// kernels ahead of queued work of lower-priority streams (training's default stream) as
/// soon as resources free up; kernels already running are not preempted. For inference
/// beside training on one GPU. Throws Error(not_available) without the device.
Stream new_priority_stream(int index);
/// The greatest (most urgent) stream priority of device `index`, e.g. -5 (CUDA counts down).
int greatest_stream_priority(int index);
/// The priority `stream` (a cuda stream) was created with; 0 for the default ones.
/// Throws Error(invalid_argument) for a stream of another device kind.
int stream_priority(const Stream& stream);

/// Makes `stream` (a cuda stream) the calling thread's current stream for its device while
/// the guard lives (guards nest): that thread's ops on the device run on it, the device
/// memory they allocate comes from its pool, and cuBLAS/cuDNN calls use a handle of that
/// stream. Throws Error(invalid_argument) for a stream of another kind, Error(not_available)
/// without CUDA. Thread-safety: affects only the calling thread; destroy it there.
class CurrentStreamGuard {
 public:
  explicit CurrentStreamGuard(const Stream& stream);
  ~CurrentStreamGuard();
  CurrentStreamGuard(const CurrentStreamGuard&) = delete;
  CurrentStreamGuard& operator=(const CurrentStreamGuard&) = delete;

 private:
  int index_ = 0;
  Stream previous_;
};

/// Statistics of device `index`'s pool (bytes allocated/reserved and their high-water marks).
AllocatorStats memory_stats(int index);
/// Returns the cached, unused device memory of device `index` to CUDA (cudaFree).
void empty_cache(int index);

/// A host tensor (device cpu, host-accessible) in mapped page-locked memory
/// (cudaHostAllocMapped), which kernels can read and write directly without a copy: for small
/// tensors read once per step (e.g. a loss scale, a few hyper-parameters). Not pooled: each
/// call is a cudaHostAlloc, so keep such tensors few and long-lived.
/// Throws Error(not_available) without a CUDA device, Error(out_of_memory) when it fails.
Tensor mapped_empty(const Shape& shape, DType dtype = DType::f32);
/// The device-side address of a tensor made by mapped_empty (its first element), for kernels.
/// Throws Error(invalid_argument, "[cuda] ...") when the tensor is not in mapped memory.
void* mapped_device_pointer(const Tensor& tensor);

}  // namespace tandem::cuda
