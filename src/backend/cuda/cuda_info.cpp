// Device properties and library versions for `tandem info`.
#if __has_include(<nccl.h>)
#include <nccl.h>
#endif
#include <cublas_v2.h>
#if TANDEM_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "tandem/cuda.h"
#include "tandem/error.h"

namespace tandem::cuda {

bool built() { return true; }

int device_count() { return cuda_detail::probed_device_count(); }

DeviceProperties device_properties(int index) {
  cuda_detail::device_state(index);  // checks the index
  cudaDeviceProp p{};
  TD_CUDA(cudaGetDeviceProperties(&p, index));
  DeviceProperties d;
  d.name = p.name;
  d.total_memory_bytes = p.totalGlobalMem;
  int current = 0;
  TD_CUDA(cudaGetDevice(&current));
  TD_CUDA(cudaSetDevice(index));
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t info = cudaMemGetInfo(&free_bytes, &total_bytes);
  TD_CUDA(cudaSetDevice(current));
  TD_CUDA(info);
  d.free_memory_bytes = free_bytes;
  d.multiprocessor_count = p.multiProcessorCount;
  d.major = p.major;
  d.minor = p.minor;
  return d;
}

std::string versions() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  cudaGetLastError();
  std::string out = fmt::format("CUDA runtime {}.{}, driver {}", rt / 1000, rt % 1000 / 10,
                                drv ? fmt::format("{}.{}", drv / 1000, drv % 1000 / 10) : std::string("none"));
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  out += fmt::format(", cuBLAS {}.{}.{}", major, minor, patch);
#if TANDEM_HAVE_CUDNN
  const size_t v = cudnnGetVersion();
  out += fmt::format(", cuDNN {}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
#else
  out += ", no cuDNN (convolutions unavailable)";
#endif
#if __has_include(<nccl.h>)
  out += fmt::format(", NCCL {}.{}.{} headers (not linked: multi-GPU is not built yet)", NCCL_MAJOR, NCCL_MINOR,
                     NCCL_PATCH);
#endif
  if (cuda_detail::probed_device_count() == 0) out += fmt::format("; no device: {}", cuda_detail::probe_error());
  return out;
}

}  // namespace tandem::cuda
