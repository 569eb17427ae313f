// Error translation for CUDA calls, the device guard and NVTX ranges.
#include "backend/cuda/cuda_check.h"

#include <nvtx3/nvToolsExt.h>

#include <fmt/format.h>

#include "tandem/error.h"

namespace tandem::cuda_detail {

void throw_cuda_error(const char* call, cudaError_t err) {
  cudaGetLastError();  // clear the (non-sticky) error state
  ErrorCode code = ErrorCode::internal;
  if (err == cudaErrorMemoryAllocation) code = ErrorCode::out_of_memory;
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver || err == cudaErrorInvalidDevice)
    code = ErrorCode::not_available;
  throw_error(code, "cuda",
              fmt::format("{} failed: {} ({})", call, cudaGetErrorString(err), cudaGetErrorName(err)));
}

void throw_library_error(ErrorCode code, const char* library, const char* call, int status, const char* text) {
  throw_error(code, library, fmt::format("{} failed: {} (status {})", call, text, status));
}

DeviceGuard::DeviceGuard(int device) {
  int current = -1;
  TD_CUDA(cudaGetDevice(&current));
  if (current != device) {
    TD_CUDA(cudaSetDevice(device));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }

}  // namespace tandem::cuda_detail
