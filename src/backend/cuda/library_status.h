// Internal: what a cuBLAS or cuDNN status means to tandem, as plain functions of the status
// value. No CUDA header is included, so that the rules are tested in every build, GPU or not
// (tests/cuda/library_status_test.cpp); the values are checked against the libraries' headers
// by static_asserts where those are included (cuda_check.cpp, cuda_conv.cpp).
// Sources: cublas_api.h (cublasStatus_t), cudnn_graph.h of cuDNN 9 (cudnnStatus_t and
// CUDNN_STATUS_CATEGORY: a status is category * 1000 + a specific sub-code).
#pragma once

#include "tandem/error.h"

namespace tandem::cuda_detail {

namespace cublas_status {
constexpr int not_initialized = 1;  // CUBLAS_STATUS_NOT_INITIALIZED (no usable driver/context)
constexpr int alloc_failed = 3;     // CUBLAS_STATUS_ALLOC_FAILED
constexpr int arch_mismatch = 8;    // CUBLAS_STATUS_ARCH_MISMATCH
}  // namespace cublas_status

namespace cudnn_status {
constexpr int success = 0;
constexpr int sublibrary_version_mismatch = 1002;    // CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH
constexpr int sublibrary_loading_failed = 1008;      // CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED
constexpr int bad_param_size_insufficient = 2006;    // CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT
constexpr int not_supported = 3000;                  // CUDNN_STATUS_NOT_SUPPORTED, the category
constexpr int not_supported_incompatible_driver = 3005;
constexpr int not_supported_incompatible_cudart = 3006;
constexpr int not_supported_arch_mismatch = 3007;
constexpr int not_supported_sublibrary_unavailable = 3009;
constexpr int host_allocation_failed = 4003;         // CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
constexpr int device_allocation_failed = 4004;       // CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
constexpr int execution_failed = 5000;               // CUDNN_STATUS_EXECUTION_FAILED
}  // namespace cudnn_status

/// cuDNN's category of a status (CUDNN_STATUS_CATEGORY): 3001 -> 3000.
constexpr int cudnn_category(int status) { return status / 1000 * 1000; }

/// Whether cuDNN's status for one convolution algorithm means "this algorithm does not apply
/// here, try the next one": any status of the NOT_SUPPORTED category (cuDNN 9 reports the
/// reason as a sub-code, 3001-3014: shape, layout, shared memory, launch parameters ...) and
/// BAD_PARAM_SIZE_INSUFFICIENT (the workspace is too small for this algorithm).
constexpr bool cudnn_rejects_algorithm(int status) {
  return cudnn_category(status) == cudnn_status::not_supported ||
         status == cudnn_status::bad_param_size_insufficient;
}

/// The ErrorCode of a failed cuBLAS call: out_of_memory for ALLOC_FAILED, not_available when
/// the library cannot run on this driver or GPU (NOT_INITIALIZED, ARCH_MISMATCH), internal
/// otherwise.
constexpr ErrorCode cublas_error_code(int status) {
  if (status == cublas_status::alloc_failed) return ErrorCode::out_of_memory;
  if (status == cublas_status::not_initialized || status == cublas_status::arch_mismatch)
    return ErrorCode::not_available;
  return ErrorCode::internal;
}

/// The ErrorCode of a failed cuDNN call: out_of_memory for a failed host or device
/// allocation, not_available when cuDNN cannot run here (driver, runtime, architecture or a
/// sub-library missing or mismatched), internal otherwise.
constexpr ErrorCode cudnn_error_code(int status) {
  switch (status) {
    case cudnn_status::host_allocation_failed:
    case cudnn_status::device_allocation_failed:
      return ErrorCode::out_of_memory;
    case cudnn_status::sublibrary_version_mismatch:
    case cudnn_status::sublibrary_loading_failed:
    case cudnn_status::not_supported_incompatible_driver:
    case cudnn_status::not_supported_incompatible_cudart:
    case cudnn_status::not_supported_arch_mismatch:
    case cudnn_status::not_supported_sublibrary_unavailable:
      return ErrorCode::not_available;
    default:
      return ErrorCode::internal;
  }
}

}  // namespace tandem::cuda_detail
