#include "nvml.h"

#include <dlfcn.h>

#include <fmt/format.h>

namespace tandem::metrics::detail {

// From NVML's C API (nvml.h): nvmlReturn_t is an int enum, 0 = NVML_SUCCESS; nvmlDevice_t an
// opaque pointer; nvmlUtilization_t {gpu, memory} in percent; nvmlMemory_t {total, free, used}
// in bytes.
namespace {
struct Utilization {
  unsigned int gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
}  // namespace

struct Nvml::Api {
  int (*init)();
  int (*shutdown)();
  int (*handle_by_index)(unsigned int, void**);
  int (*utilization)(void*, Utilization*);
  int (*memory)(void*, Memory*);
};

template <typename F>
static bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(::dlsym(lib, name));
  return f != nullptr;
}

Nvml::Nvml(int index) {
  if (index < 0) {
    error_ = "no GPU index";
    return;
  }
  lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    error_ = fmt::format("libnvidia-ml.so.1 not loaded: {}", ::dlerror());
    return;
  }
  api_ = new Api{};
  if (!bind(lib_, "nvmlInit_v2", api_->init) || !bind(lib_, "nvmlShutdown", api_->shutdown) ||
      !bind(lib_, "nvmlDeviceGetHandleByIndex_v2", api_->handle_by_index) ||
      !bind(lib_, "nvmlDeviceGetUtilizationRates", api_->utilization) ||
      !bind(lib_, "nvmlDeviceGetMemoryInfo", api_->memory)) {
    error_ = "libnvidia-ml.so.1 lacks the functions needed";
    return;
  }
  if (const int rc = api_->init(); rc != 0) {
    error_ = fmt::format("nvmlInit failed (NVML error {})", rc);
    return;
  }
  inited_ = true;
  if (const int rc = api_->handle_by_index(static_cast<unsigned>(index), &device_); rc != 0) {
    error_ = fmt::format("no NVML device {} (NVML error {})", index, rc);
    device_ = nullptr;
  }
}

Nvml::~Nvml() {
  if (inited_) api_->shutdown();
  delete api_;
  if (lib_) ::dlclose(lib_);
}

bool Nvml::query(double& busy, double& used_bytes, double& total_bytes) {
  if (!ok()) return false;
  Utilization u{};
  Memory m{};
  if (api_->utilization(device_, &u) != 0 || api_->memory(device_, &m) != 0) return false;
  busy = u.gpu / 100.0;
  used_bytes = static_cast<double>(m.used);
  total_bytes = static_cast<double>(m.total);
  return true;
}

}  // namespace tandem::metrics::detail
