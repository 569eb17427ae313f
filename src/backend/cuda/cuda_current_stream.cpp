// The calling thread's current stream of each CUDA device (cuda::CurrentStreamGuard), the
// allocations that follow it, and streams at the device's greatest priority.
#include <array>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "tandem/cuda.h"
#include "tandem/error.h"

namespace tandem {
namespace cuda_detail {
namespace {

constexpr int kMaxDevices = 64;

// Empty: the device's default stream.
thread_local std::array<Stream, kMaxDevices> t_current;

}  // namespace

const Stream* guarded_stream(int index) {
  if (index < 0 || index >= kMaxDevices) return nullptr;
  const Stream& s = t_current[static_cast<size_t>(index)];
  return s ? &s : nullptr;
}

CudaStream& current_stream(int index) {
  if (const Stream* s = guarded_stream(index)) return *static_cast<CudaStream*>(s->impl());
  return *device_state(index).default_stream;
}

Stream current_stream_handle(int index) {
  if (const Stream* s = guarded_stream(index)) return *s;
  return Stream(device_state(index).default_stream);
}

void* CurrentStreamAllocator::allocate(size_t bytes) {
  const Stream* s = guarded_stream(device_);
  return s ? pool_.allocate(bytes, *s) : pool_.allocate(bytes);
}

}  // namespace cuda_detail

namespace cuda {

int greatest_stream_priority(int index) {
  cuda_detail::device_state(index);
  cuda_detail::DeviceGuard guard(index);
  int least = 0, greatest = 0;
  TD_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

Stream new_priority_stream(int index) {
  const int priority = greatest_stream_priority(index);
  return Stream(std::make_shared<cuda_detail::CudaStream>(index, priority));
}

int stream_priority(const Stream& stream) {
  const cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, "cuda");
  cuda_detail::DeviceGuard guard(cs.index());
  int priority = 0;
  TD_CUDA(cudaStreamGetPriority(cs.get(), &priority));
  return priority;
}

CurrentStreamGuard::CurrentStreamGuard(const Stream& stream) {
  const cuda_detail::CudaStream& cs = cuda_detail::as_cuda_stream(stream, "cuda");
  index_ = cs.index();
  TD_CHECK_ARG(index_ >= 0 && index_ < cuda_detail::kMaxDevices, "cuda", "device index {} out of range", index_);
  Stream& slot = cuda_detail::t_current[static_cast<size_t>(index_)];
  previous_ = slot;
  // The default stream made current again is the same as no guard.
  slot = stream.impl() == cuda_detail::device_state(index_).default_stream.get() ? Stream() : stream;
}

CurrentStreamGuard::~CurrentStreamGuard() { cuda_detail::t_current[static_cast<size_t>(index_)] = previous_; }

}  // namespace cuda
}  // namespace tandem
