// Internal: checking of CUDA / cuBLAS / cuDNN calls, the device guard and NVTX ranges.
// Every failing call throws tandem::Error whose message names the call and CUDA's error
// string, e.g. "[cuda] cudaMalloc(&p, bytes) failed: out of memory (cudaErrorMemoryAllocation)".
#pragma once

#include <cuda_runtime_api.h>

#include "tandem/error.h"

namespace tandem::cuda_detail {

/// Throws Error for a failed runtime call (out_of_memory for allocation failures,
/// not_available for a missing driver or device, internal otherwise) and clears CUDA's
/// last-error state so that later calls are not blamed for it.
[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err);
/// Throws Error(code, "[library] call failed: text (status N)") for a failed cuBLAS or cuDNN
/// call; the caller classifies the status (library_status.h: cublas_error_code,
/// cudnn_error_code), since the libraries' texts do not say "out of memory" uniformly.
[[noreturn]] void throw_library_error(ErrorCode code, const char* library, const char* call, int status,
                                      const char* text);

/// Makes `device` current for the scope and restores the previous one afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// An NVTX range (visible in Nsight Systems) for the lifetime of the object.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace tandem::cuda_detail

#define TD_CUDA(call)                                                          \
  do {                                                                         \
    const cudaError_t td_err_ = (call);                                        \
    if (td_err_ != cudaSuccess) ::tandem::cuda_detail::throw_cuda_error(#call, td_err_); \
  } while (0)
