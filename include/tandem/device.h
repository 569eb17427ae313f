// Device: a small value naming where memory lives and who computes. Kinds:
//   cpu   host memory, CPU kernels (oneDNN and vectorised loops), work runs inline;
//   cuda  an NVIDIA GPU (cuBLAS, cuDNN, own kernels);
//   virt  a virtual accelerator: own memory, asynchronous streams run by its own thread,
//         CPU kernels; optionally throttled. It exists to test every asynchronous path
//         on machines without a GPU.
// Thread-safety: values; all functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tandem {

enum class DeviceKind : uint8_t { cpu, cuda, virt };

const char* device_kind_name(DeviceKind kind);

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceKind k, int i = 0) : kind(k), index(i) {}

  /// True when host code may dereference this device's pointers (cpu).
  constexpr bool is_host() const { return kind == DeviceKind::cpu; }
  /// "cpu", "cuda:0", "virt:1".
  std::string str() const;
  friend constexpr bool operator==(Device a, Device b) { return a.kind == b.kind && a.index == b.index; }
};

/// A device plus its options, parsed from strings like "cpu", "cuda", "cuda:1" or
/// "virt:0?speed=0.5&bw=12&latency_us=20". Options are kept as text; each runtime reads its own.
struct DeviceSpec {
  Device device;
  std::map<std::string, std::string> options;

  /// Throws Error(invalid_argument, "[device] ...") for an unknown kind, a bad index (cpu has
  /// only index 0: "cpu:1" is refused here, not when the device is used) or a malformed option ("expected cpu, cuda[:N] or virt[:N][?key=value&...]").
  static DeviceSpec parse(const std::string& text);
  /// Reads a numeric option; `fallback` when absent; throws Error(invalid_argument) when not a number.
  double option(const std::string& key, double fallback) const;
};

/// Applies the options of `spec` to its device (virt: speed, bw, latency_us, memory_mb, tflops,
/// gbps, compute, see
/// tandem/virt.h; the device then exists). Other kinds take no options: a spec with options
/// throws Error(invalid_argument, "[device] options are only accepted for virt devices").
/// Errors in the options are those of the kind's runtime (e.g. "[virt] speed must be ...").
/// Thread-safety: call before the device runs work (at start-up).
void configure_device(const DeviceSpec& spec);

/// What a run on `device` must say about its results: for a virt device with compute=none
/// (throughput planning, tandem/virt.h) "virt compute=none: results are not computed; figures
/// are throughput planning only"; "" for a device that computes. Thread-safety: thread-safe.
std::string planning_note(Device device);

/// The index NVML knows `device` by (its CUDA ordinal; NVML's order can differ under a
/// reordering CUDA_VISIBLE_DEVICES), or -1 when it is not an NVIDIA GPU. Never throws.
int nvml_device_index(Device device) noexcept;

/// The devices this build and machine have, for `tandem info`: one line per device kind and
/// device ("  cuda:0  allocated 0 bytes, reserved 0 bytes", or "  cuda: <why none>"), plus
/// the properties of each CUDA device. Creates the runtimes; never throws.
std::string describe_devices();

}  // namespace tandem
