// NVML (NVIDIA Management Library) loaded at run time: libnvidia-ml.so.1 comes with the driver,
// so builds and runs on machines without one are unaffected (no link-time dependency, no CUDA
// headers; the few declarations needed are NVML's documented C API, nvml.h). The index is
// NVML's, which follows PCI order; CUDA's follows it unless CUDA_VISIBLE_DEVICES or
// CUDA_DEVICE_ORDER reorder the devices.
// Thread-safety: one thread uses an Nvml.
#pragma once

#include <string>

namespace tandem::metrics::detail {

class Nvml {
 public:
  /// Loads the library and opens GPU `index`; ok() is false (and error() says why) when it cannot.
  explicit Nvml(int index);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ok() const { return device_ != nullptr; }
  const std::string& error() const { return error_; }
  /// GPU busy share over NVML's last sample period in [0, 1] and memory used / total in bytes;
  /// false when a query failed.
  bool query(double& busy, double& used_bytes, double& total_bytes);

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;
  std::string error_;
  bool inited_ = false;
  struct Api;
  Api* api_ = nullptr;
};

}  // namespace tandem::metrics::detail
