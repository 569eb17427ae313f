// The CUDA runtime: device probe, per-device state, streams and asynchronous copies.
#include <array>
#include <mutex>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_entry.h"
#include "tandem/backend.h"
#include "tandem/error.h"

namespace tandem {
namespace cuda_detail {
namespace {

constexpr int kMaxDevices = 64;

struct Probe {
  int count = 0;
  std::string error;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();
      r.error = fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
      return r;
    }
    r.count = n < kMaxDevices ? n : kMaxDevices;
    return r;
  }();
  return p;
}

struct Devices {
  std::mutex mu;
  std::array<DeviceState*, kMaxDevices> dev{};
};

Devices& devices() {
  static Devices* d = new Devices();
  return *d;
}

class CudaRuntime final : public Runtime {
 public:
  DeviceKind kind() const override { return DeviceKind::cuda; }
  int device_count() const override { return probed_device_count(); }
  Allocator& allocator(int index) override { return device_state(index).allocator; }
  Stream default_stream(int index) override { return Stream(device_state(index).default_stream); }
  Stream current_stream(int index) override { return current_stream_handle(index); }
  Stream new_stream(int index) override {
    device_state(index);  // checks the index
    return Stream(std::make_shared<CudaStream>(index));
  }
  void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes,
                  const Stream& stream) override {
    CudaStream& cs = as_cuda_stream(stream, "copy");
    TD_CHECK_ARG(dst_dev.kind != DeviceKind::virt && src_dev.kind != DeviceKind::virt, "copy",
                 "cuda cannot copy {} -> {}: expected cpu or cuda endpoints", src_dev.str(), dst_dev.str());
    TD_CHECK_ARG(dst_dev == cs.device() || src_dev == cs.device() ||
                     (dst_dev.kind == DeviceKind::cuda && src_dev.kind == DeviceKind::cuda),
                 "copy", "copy {} -> {} ordered on a stream of {}: expected a stream of one of its devices",
                 src_dev.str(), dst_dev.str(), cs.device().str());
    if (bytes == 0) return;
    TD_CHECK_ARG(dst && src, "copy", "null pointer for a copy of {} bytes", bytes);
    DeviceGuard guard(cs.index());
    TD_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cs.get()));
  }
};

}  // namespace

int probed_device_count() { return probe().count; }
std::string probe_error() { return probe().error; }

DeviceState::DeviceState(int i)
    : index(i), arena(i), pool(arena), allocator(i, pool), default_stream(std::make_shared<CudaStream>(i)) {}

DeviceState& device_state(int index) {
  const int n = probed_device_count();
  if (n == 0) {
    throw_error(ErrorCode::not_available, "cuda",
                "no CUDA device found" + (probe_error().empty() ? std::string() : ": " + probe_error()));
  }
  TD_CHECK(index >= 0 && index < n, ErrorCode::not_available, "cuda",
           "cuda:{} requested but only {} CUDA device(s) present", index, n);
  Devices& d = devices();
  std::lock_guard<std::mutex> lock(d.mu);
  DeviceState*& s = d.dev[static_cast<size_t>(index)];
  if (!s) {
    // Registered here too (not only by create_cuda_runtime) so that ops on memory reached
    // without the runtime (cuda::mapped_empty, from_blob) find their backend.
    ops::register_backend(DeviceKind::cuda, &ops::cuda_backend());
    s = new DeviceState(index);
  }
  return *s;
}

}  // namespace cuda_detail

Runtime* create_cuda_runtime() {
  ops::register_backend(DeviceKind::cuda, &ops::cuda_backend());
  return new cuda_detail::CudaRuntime();
}

}  // namespace tandem
