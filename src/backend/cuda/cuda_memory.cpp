// Device memory (cudaMalloc arena under the caching pool), page-locked host memory for the
// pinned pool (cudaHostAlloc) and mapped zero-copy host tensors (cudaHostAllocMapped).
#include <mutex>
#include <unordered_map>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_entry.h"
#include "tandem/cuda.h"
#include "tandem/error.h"

namespace tandem {
namespace cuda_detail {
namespace {

// Page-locked host memory; `flags` are cudaHostAlloc's. Remembers its blocks so that a
// pointer can be recognised (mapped_device_pointer) and its size looked up.
class HostAllocator final : public Allocator {
 public:
  HostAllocator(unsigned flags, const char* what) : flags_(flags), what_(what) {}
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes, flags_);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw_error(ErrorCode::out_of_memory, "alloc",
                  fmt::format("cannot allocate {} bytes of {} host memory: cudaHostAlloc failed: {}", bytes,
                              what_, cudaGetErrorString(err)));
    }
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[p] = bytes;
    stats_on_allocate(s_, bytes);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks_.erase(ptr);
      stats_on_free(s_, bytes);
    }
    cudaFreeHost(ptr);  // errors ignored: may run after CUDA shut down
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }
  Device device() const override { return Device{}; }
  bool owns(const void* base) const {
    std::lock_guard<std::mutex> lock(mu_);
    return blocks_.count(const_cast<void*>(base)) != 0;
  }

 private:
  unsigned flags_;
  const char* what_;
  mutable std::mutex mu_;
  AllocatorStats s_;
  std::unordered_map<void*, size_t> blocks_;
};

HostAllocator& mapped_allocator() {
  static HostAllocator* a = new HostAllocator(cudaHostAllocMapped | cudaHostAllocPortable, "mapped");
  return *a;
}

}  // namespace

void* DeviceArena::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  DeviceGuard guard(device_);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw_error(ErrorCode::out_of_memory, "alloc",
                fmt::format("cannot allocate {} bytes on cuda:{}: cudaMalloc failed: {}", bytes, device_,
                            cudaGetErrorString(err)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_on_allocate(s_, bytes);
  return p;
}

void DeviceArena::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  {
    DeviceGuard guard(device_);
    TD_CUDA(cudaFree(ptr));
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_on_free(s_, bytes);
}

AllocatorStats DeviceArena::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

}  // namespace cuda_detail

Allocator* cuda_pinned_backing() {
  if (cuda_detail::probed_device_count() == 0) return nullptr;
  static auto* a = new cuda_detail::HostAllocator(cudaHostAllocPortable, "pinned");
  return a;
}

namespace cuda {

CachingAllocator& device_allocator(int index) { return cuda_detail::device_state(index).pool; }

AllocatorStats memory_stats(int index) { return device_allocator(index).stats(); }

void empty_cache(int index) {
  cuda_detail::DeviceState& d = cuda_detail::device_state(index);
  cuda_detail::DeviceGuard guard(index);
  // Blocks freed by queued work are held back by the pool's events; cached segments go back.
  d.pool.empty_cache();
}

Tensor mapped_empty(const Shape& shape, DType dtype) {
  cuda_detail::device_state(0);  // throws "no CUDA device found" without one
  return Tensor::empty_with(shape, dtype, cuda_detail::mapped_allocator());
}

void* mapped_device_pointer(const Tensor& tensor) {
  TD_CHECK_ARG(tensor.defined(), "cuda", "mapped_device_pointer of an undefined tensor");
  void* base = tensor.storage()->data();
  TD_CHECK_ARG(base && cuda_detail::mapped_allocator().owns(base), "cuda",
               "tensor {} is not in mapped host memory: expected one made by cuda::mapped_empty",
               shape_str(tensor.shape()));
  void* dev = nullptr;
  TD_CUDA(cudaHostGetDevicePointer(&dev, base, 0));
  return static_cast<char*>(dev) + tensor.offset() * static_cast<int64_t>(tensor.element_size());
}

}  // namespace cuda
}  // namespace tandem
