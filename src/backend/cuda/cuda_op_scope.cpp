// The cuda backend instance, the op scope (device, default stream, NVTX range) and scratch
// memory from the device's caching pool.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_device.h"

namespace tandem::ops {

CudaOpScope::CudaOpScope(const char* op, const Tensor& t)
    : device(t.device().index),
      stream(cuda_detail::device_state(t.device().index).default_stream->get()),
      guard(device),
      range(op) {}

CudaScratch::CudaScratch(int device, size_t bytes)
    : device_(device), bytes_(bytes), ptr_(cuda_detail::device_state(device).pool.allocate(bytes)) {}

CudaScratch::~CudaScratch() { cuda_detail::device_state(device_).pool.deallocate(ptr_, bytes_); }

Backend& cuda_backend() {
  static CudaBackend b;
  return b;
}

}  // namespace tandem::ops
