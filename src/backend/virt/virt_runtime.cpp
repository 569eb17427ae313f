// The virt runtime: devices (arena + caching allocator + default stream + throttle), stream
// creation, asynchronous copies, configuration, and the drain of every stream at exit.
#include "virt_runtime.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "tandem/error.h"
#include "tandem/virt.h"
#include "virt_arena.h"
#include "virt_ops.h"
#include "virt_stream.h"

namespace tandem {
namespace virt {
namespace {

struct VirtDevice;

// The allocator tensors on a virt device get: the caching pool, and when the pool cannot grow,
// the device's streams drained and the allocation tried once more. A virt work item keeps the
// tensors it reads alive until it ran (a GPU kernel holds only pointers, its memory reused in
// stream order), so a host running ahead of the device holds buffers that a GPU would have
// reused already; draining returns them. Not from a stream's own worker (it cannot wait for
// itself) and not for the drained allocation's error, which is the pool's.
class VirtPool final : public Allocator {
 public:
  explicit VirtPool(VirtDevice& v) : v_(v) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  Device device() const override;

 private:
  VirtDevice& v_;
};

struct VirtDevice {
  explicit VirtDevice(int index)
      : device(DeviceKind::virt, index),
        arena(device),
        pool(arena),
        front(*this),
        default_stream(std::make_shared<VirtStream>(device, &throttle, 0)) {}

  // Waits for every stream of the device (the default one and those new_stream made).
  void drain() {
    std::vector<std::shared_ptr<VirtStream>> all{default_stream};
    {
      std::lock_guard<std::mutex> lock(streams_mu);
      for (auto& w : streams)
        if (auto s = w.lock()) all.push_back(s);
    }
    for (auto& s : all) s->synchronize();
  }

  Device device;
  ThrottleState throttle;
  VirtArena arena;
  CachingAllocator pool;
  VirtPool front;
  std::shared_ptr<VirtStream> default_stream;
  std::mutex streams_mu;                           // guards streams (new_stream, drain)
  std::vector<std::weak_ptr<VirtStream>> streams;  // created by new_stream, for the exit drain
  int streams_created = 0;                         // numbers the streams' profiler tracks
};

void* VirtPool::allocate(size_t bytes) {
  try {
    return v_.pool.allocate(bytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory || on_virt_worker()) throw;
  }
  v_.drain();
  return v_.pool.allocate(bytes);
}
void VirtPool::deallocate(void* ptr, size_t bytes) { v_.pool.deallocate(ptr, bytes); }
AllocatorStats VirtPool::stats() const { return v_.pool.stats(); }
Device VirtPool::device() const { return v_.device; }

// Devices are created on first use and never destroyed (tensors may outlive main); their
// streams are drained and joined at exit.
struct Devices {
  std::mutex mu;
  std::array<VirtDevice*, kMaxVirtDevices> dev{};
  int count = 1;
  bool exit_hook = false;

  VirtDevice& get(int index) {
    std::lock_guard<std::mutex> lock(mu);
    return get_locked(index);
  }
  VirtDevice& get_locked(int index) {
    TD_CHECK_ARG(index >= 0 && index < kMaxVirtDevices, "virt",
                 "device index {} out of range [0, {})", index, kMaxVirtDevices);
    if (!dev[static_cast<size_t>(index)]) {
      dev[static_cast<size_t>(index)] = new VirtDevice(index);
      if (!exit_hook) {
        exit_hook = true;
        std::atexit(drain_all_at_exit);
      }
    }
    return *dev[static_cast<size_t>(index)];
  }
  static void drain_all_at_exit();
};

Devices& devices() {
  static Devices* d = new Devices();
  return *d;
}

void Devices::drain_all_at_exit() {
  std::vector<std::shared_ptr<VirtStream>> all;
  {
    Devices& d = devices();
    std::lock_guard<std::mutex> lock(d.mu);
    for (VirtDevice* v : d.dev) {
      if (!v) continue;
      all.push_back(v->default_stream);
      std::lock_guard<std::mutex> streams_lock(v->streams_mu);
      for (auto& w : v->streams)
        if (auto s = w.lock()) all.push_back(s);
    }
  }
  for (auto& s : all) s->shutdown();
}

VirtStream* as_virt_stream(const Stream& stream, const char* op) {
  TD_CHECK_ARG(stream, op, "no stream given: a virt operation needs a virt stream");
  auto* vs = dynamic_cast<VirtStream*>(stream.impl());
  TD_CHECK_ARG(vs != nullptr, op, "expected a virt stream, got a stream of {}",
               stream.device().str());
  return vs;
}

class VirtRuntime final : public Runtime {
 public:
  DeviceKind kind() const override { return DeviceKind::virt; }
  int device_count() const override {
    Devices& d = devices();
    std::lock_guard<std::mutex> lock(d.mu);
    return d.count;
  }
  Allocator& allocator(int index) override { return devices().get(index).front; }
  Stream default_stream(int index) override { return Stream(devices().get(index).default_stream); }
  Stream current_stream(int index) override { return virt_current_stream(index); }
  Stream new_stream(int index) override {
    Devices& d = devices();
    std::lock_guard<std::mutex> lock(d.mu);
    VirtDevice& v = d.get_locked(index);
    auto s = std::make_shared<VirtStream>(v.device, &v.throttle, ++v.streams_created);
    std::lock_guard<std::mutex> streams_lock(v.streams_mu);
    std::erase_if(v.streams, [](const std::weak_ptr<VirtStream>& w) { return w.expired(); });
    v.streams.push_back(s);
    return Stream(s);
  }
  void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes,
                  const Stream& stream) override {
    VirtStream* vs = as_virt_stream(stream, "copy");
    TD_CHECK_ARG(dst_dev.kind != DeviceKind::cuda && src_dev.kind != DeviceKind::cuda, "copy",
                 "virt cannot copy {} -> {}: expected cpu or virt endpoints", src_dev.str(),
                 dst_dev.str());
    TD_CHECK_ARG(bytes == 0 || (dst && src), "copy", "null pointer for a copy of {} bytes", bytes);
    const profile::Stage stage = src_dev.is_host() && !dst_dev.is_host()   ? profile::Stage::h2d
                                 : !src_dev.is_host() && dst_dev.is_host() ? profile::Stage::d2h
                                                                           : profile::Stage::other;
    vs->enqueue_copy(dst, src, bytes, stage);
  }
};

}  // namespace
}  // namespace virt

Runtime* create_virt_runtime() {
  ops::register_backend(DeviceKind::virt, &virt_ops_backend());
  return new virt::VirtRuntime();
}

void set_virt_device_count(int count) {
  TD_CHECK_ARG(count >= 1 && count <= kMaxVirtDevices, "virt",
               "device count {} out of range [1, {}]", count, kMaxVirtDevices);
  virt::Devices& d = virt::devices();
  std::lock_guard<std::mutex> lock(d.mu);
  d.count = count;
}

// Bounds keep every sleep the stream thread computes from them (seconds up to ~1e6) inside the
// 64-bit nanosecond range of a duration: a non-finite or huge value would be undefined there.
static constexpr double kMinSpeed = 1e-6, kMinBwGbps = 1e-6, kMaxLatencyUs = 1e7;
static constexpr double kMinRate = 1e-6;  // tflops and gbps
static constexpr double kMaxMemoryMb = 1099511627776.0;  // 2^40 MiB (2^60 bytes)

void set_virt_throttle(int index, const VirtThrottle& t) {
  TD_CHECK_ARG(std::isfinite(t.speed) && t.speed >= kMinSpeed, "virt", "speed: expected a finite value >= {}, got {}",
               kMinSpeed, t.speed);
  TD_CHECK_ARG(std::isfinite(t.bw_gbps) && (t.bw_gbps == 0 || t.bw_gbps >= kMinBwGbps), "virt",
               "bw: expected a finite value >= {} GB/s (0 = unlimited), got {}", kMinBwGbps, t.bw_gbps);
  TD_CHECK_ARG(t.latency_us >= 0 && t.latency_us <= kMaxLatencyUs, "virt",
               "latency_us: expected a value in [0, {:g}], got {}", kMaxLatencyUs, t.latency_us);
  TD_CHECK_ARG(std::isfinite(t.tflops) && (t.tflops == 0 || t.tflops >= kMinRate), "virt",
               "tflops: expected a finite value >= {} TFLOP/s (0 = not modelled), got {}", kMinRate, t.tflops);
  TD_CHECK_ARG(std::isfinite(t.gbps) && (t.gbps == 0 || t.gbps >= kMinRate), "virt",
               "gbps: expected a finite value >= {} GB/s (0 = not modelled), got {}", kMinRate, t.gbps);
  virt::VirtDevice& v = virt::devices().get(index);
  v.throttle.speed.store(t.speed);
  v.throttle.bw_gbps.store(t.bw_gbps);
  v.throttle.latency_us.store(t.latency_us);
  v.throttle.tflops.store(t.tflops);
  v.throttle.gbps.store(t.gbps);
  v.throttle.compute.store(t.compute);
  v.arena.set_capacity(t.memory_bytes);
}

VirtThrottle virt_throttle(int index) {
  virt::VirtDevice& v = virt::devices().get(index);
  VirtThrottle t;
  t.speed = v.throttle.speed.load();
  t.bw_gbps = v.throttle.bw_gbps.load();
  t.latency_us = v.throttle.latency_us.load();
  t.tflops = v.throttle.tflops.load();
  t.gbps = v.throttle.gbps.load();
  t.compute = v.throttle.compute.load();
  t.memory_bytes = v.arena.capacity();
  return t;
}

void configure_virt(const DeviceSpec& spec) {
  TD_CHECK_ARG(spec.device.kind == DeviceKind::virt, "virt", "expected a virt device spec, got {}",
               spec.device.str());
  const int index = spec.device.index;
  TD_CHECK_ARG(index < kMaxVirtDevices, "virt", "device index {} out of range [0, {})", index,
               kMaxVirtDevices);
  for (const auto& [key, value] : spec.options) {
    TD_CHECK_ARG(key == "speed" || key == "bw" || key == "latency_us" || key == "memory_mb" || key == "tflops" ||
                     key == "gbps" || key == "compute",
                 "virt",
                 "unknown option '{}={}' for {}: expected speed, bw, latency_us, memory_mb, tflops, gbps or compute",
                 key, value, spec.device.str());
  }
  VirtThrottle t = virt_throttle(index);
  t.speed = spec.option("speed", t.speed);
  t.bw_gbps = spec.option("bw", t.bw_gbps);
  TD_CHECK_ARG(!spec.options.count("bw") || t.bw_gbps > 0, "virt", "bw: expected a value > 0 GB/s in {}, got {}",
               spec.device.str(), t.bw_gbps);
  t.latency_us = spec.option("latency_us", t.latency_us);
  // Given: a rate > 0 (0 = not modelled is only for set_virt_throttle).
  for (const char* key : {"tflops", "gbps"}) {
    if (!spec.options.count(key)) continue;
    const double rate = spec.option(key, 0.0);
    TD_CHECK_ARG(std::isfinite(rate) && rate >= kMinRate, "virt", "{}: expected a finite value >= {} {} in {}, got {}",
                 key, kMinRate, key[0] == 't' ? "TFLOP/s" : "GB/s", spec.device.str(), spec.options.at(key));
  }
  t.tflops = spec.option("tflops", t.tflops);
  t.gbps = spec.option("gbps", t.gbps);
  if (const auto it = spec.options.find("compute"); it != spec.options.end()) {
    TD_CHECK_ARG(it->second == "all" || it->second == "none", "virt", "compute: expected all or none in {}, got '{}'",
                 spec.device.str(), it->second);
    t.compute = it->second == "all";
  }
  const double mb = spec.option("memory_mb", static_cast<double>(t.memory_bytes) / (1 << 20));
  // At least one byte when given: 0 bytes would mean unlimited.
  TD_CHECK_ARG(mb >= 0 && mb <= kMaxMemoryMb && (!spec.options.count("memory_mb") || mb * (1 << 20) >= 1), "virt",
               "memory_mb: expected a value in [2^-20, 2^40] MiB (at least one byte) in {}, got {}",
               spec.device.str(), mb);
  t.memory_bytes = static_cast<size_t>(mb * (1 << 20));
  set_virt_throttle(index, t);
  virt::Devices& d = virt::devices();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.count < index + 1) d.count = index + 1;
}

CachingAllocator& virt_allocator(int index) {
  return virt::devices().get(index).pool;
}

AllocatorStats virt_arena_stats(int index) {
  return virt::devices().get(index).arena.stats();
}

}  // namespace tandem
