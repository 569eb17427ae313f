// The CUDA entry points of a build without CUDA: every call says so, nothing crashes.
#include "backend/cuda/cuda_entry.h"
#include "tandem/cuda.h"
#include "tandem/error.h"

namespace tandem {

namespace {
[[noreturn]] void not_built() {
  throw_error(ErrorCode::not_available, "cuda", "tandem was built without CUDA");
}
}  // namespace

Runtime* create_cuda_runtime() {
  throw_error(ErrorCode::not_available, "device", "tandem was built without CUDA");
}

Allocator* cuda_pinned_backing() { return nullptr; }

namespace cuda {

bool built() { return false; }
int device_count() { return 0; }
DeviceProperties device_properties(int) { not_built(); }
std::string versions() { return "CUDA: not built with CUDA"; }
CachingAllocator& device_allocator(int) { not_built(); }
AllocatorStats memory_stats(int) { not_built(); }
void empty_cache(int) { not_built(); }
Stream new_priority_stream(int) { not_built(); }
int greatest_stream_priority(int) { not_built(); }
int stream_priority(const Stream&) { not_built(); }
CurrentStreamGuard::CurrentStreamGuard(const Stream&) { not_built(); }
CurrentStreamGuard::~CurrentStreamGuard() = default;
Tensor mapped_empty(const Shape&, DType) { not_built(); }
void* mapped_device_pointer(const Tensor&) { not_built(); }

}  // namespace cuda
}  // namespace tandem
