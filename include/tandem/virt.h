// The virtual accelerator `virt`: a device with its own memory arena and asynchronous streams,
// computing with the CPU kernels, so that every asynchronous path (copies, events, overlap,
// buffer lifetime) is exercised on machines without a GPU.
//
//  - Memory: each virt device has an arena (host memory internally, never host-accessible
//    through the API: Device::is_host() is false, so Tensor::data() refuses it). Tensors get
//    it through runtime_for(virt:i).allocator(i), a CachingAllocator whose
//    stream-less pool is the default stream's. Only copies move data in or out.
//  - Streams: each stream has its own worker thread running enqueued work in order. Events
//    complete when the work before them ran; Stream::wait(event) holds back later work on the
//    stream (the worker waits, the host does not); Stream::synchronize() blocks the host and
//    rethrows the first exception a work item raised since the last synchronize (work after a
//    failed item still runs, so events always complete). Destroying a stream runs its queued
//    work without throttling and joins the thread; at process exit all streams are drained.
//  - Copies (Runtime::copy_async between cpu and virt, or virt and virt) run on the stream's
//    thread: the destination is written later, when the copy's turn comes.
//  - Ops (tandem/ops.h) on virt tensors run the cpu kernels as work items on the current
//    stream (virt_current_stream): the call returns at once; ops that return a value
//    (softmax_cross_entropy_forward, count_correct) synchronize that stream. Before an op the
//    stream waits (on the device, not the host) for the pending write of every tensor it
//    touches; its outputs then carry the op's event as their pending write, so work on
//    another stream or a copy (Tensor::to) that uses them is ordered after it. Kernel errors
//    surface at the next synchronize() of the stream. The worker uses the OpenMP thread
//    count of the thread that called the op.
//  - Throttle, from the options of a device string "virt:0?speed=0.5&bw=12&latency_us=20":
//      speed       compute speed factor (finite, >= 1e-6, default 1): after each work item the worker
//                  sleeps (1/speed - 1) x the item's measured run time, so it takes 1/speed
//                  as long; speed > 1 cannot make the CPU faster and acts as 1.
//      bw          copy bandwidth in GB/s (1e9 bytes/s, finite, >= 1e-6; default unlimited): a copy of
//                  X bytes takes at least X / (bw * 1e9) seconds;
//      latency_us  fixed cost per copy in microseconds (0..1e7, default 0), added to the above;
//      memory_mb   arena capacity in MiB (0 < memory_mb <= 2^40; default unlimited): allocations beyond it throw
//                  Error(out_of_memory).
//  - Throughput planning ("Will it feed a GPU?"), from "virt:0?tflops=400&gbps=3000&compute=none":
//      tflops      modelled compute rate in TFLOP/s (finite, >= 1e-6; default: not modelled);
//      gbps        modelled device-memory bandwidth in GB/s for ops (finite, >= 1e-6; default: not
//                  modelled; `bw` is the copy link, this is the device's own memory);
//      compute     all (default) or none.
//    With tflops or gbps set, each op keeps its stream busy for the roofline time of its FLOPs
//    and bytes, max(flops / (tflops * 1e12), bytes / (gbps * 1e9)) (counts in
//    src/backend/virt/virt_cost.h), from when it was enqueued or the previous work ended,
//    whichever is later. With compute=none the op's kernel does not run: output tensors keep
//    whatever they held (values returned by ops are 0) and only the modelled time passes
//    (no time without tflops or gbps); with compute=all the op runs and takes at least the
//    modelled time. With compute=none copies move no bytes either (the destination keeps
//    what it held, as for ops: a copy's time is then latency_us + bytes / bw, nothing without
//    them; e.g. bw=25 models a PCIe 4.0 x16 link). The worker sleeps whenever the modelled
//    time runs more than 0.5 ms ahead of the clock and before a marker that is the last queued
//    item (a host synchronizing waits for the modelled end); an event with more work queued
//    behind it may complete up to 0.5 ms before its modelled time. planning_note() in
//    tandem/device.h names a device that does not compute.
//  - stream_busy_seconds() (tandem/stream_clock.h) of a virt stream is the modelled device's compute time on it so
//    far: each op's modelled seconds (its run time when it ran longer), other compute items'
//    run time over `speed`; deterministic for modelled ops, whatever the host's load.
// Thread-safety: all functions are thread-safe; a throttle change applies to work that
// starts after it.
#pragma once

#include <cstddef>

#include "tandem/caching_allocator.h"
#include "tandem/device.h"
#include "tandem/stream.h"

namespace tandem {

/// The most virt devices a process can have.
constexpr int kMaxVirtDevices = 16;

struct VirtThrottle {
  double speed = 1.0;       // compute speed factor
  double bw_gbps = 0.0;     // copy bandwidth, GB/s; 0 = unlimited
  double latency_us = 0.0;  // per-copy latency, microseconds
  size_t memory_bytes = 0;  // arena capacity, bytes; 0 = unlimited
  double tflops = 0.0;      // modelled compute rate, TFLOP/s; 0 = not modelled
  double gbps = 0.0;        // modelled device-memory bandwidth, GB/s; 0 = not modelled
  bool compute = true;      // false (compute=none): ops are not run, results are not computed
};

/// Applies the options of `spec` (e.g. DeviceSpec::parse("virt:1?bw=2")) to virt device
/// spec.device.index; options not given keep their current value. Makes the device exist
/// (device_count grows to index + 1). Throws Error(invalid_argument, "[virt] ...") for a
/// non-virt spec, an index >= kMaxVirtDevices, an unknown option or an out-of-range value.
void configure_virt(const DeviceSpec& spec);
/// Sets the throttle of virt device `index` (all fields). Throws Error(invalid_argument) for
/// values outside the ranges above (bw_gbps 0 = unlimited).
void set_virt_throttle(int index, const VirtThrottle& throttle);
/// The throttle of virt device `index`.
VirtThrottle virt_throttle(int index);
/// Sets how many virt devices exist (1..kMaxVirtDevices; default 1). Devices once used keep
/// their memory and streams. Throws Error(invalid_argument) outside the range.
void set_virt_device_count(int count);

/// The stream that ops on virt device `index` run on for the calling thread: the device's
/// default stream unless a VirtStreamGuard is active on this thread. Device-neutral code asks
/// runtime_for(device).current_stream(index), which answers this for virt.
Stream virt_current_stream(int index);

/// Makes `stream` (a virt stream) the calling thread's current stream for its device until
/// the guard is destroyed (guards nest). Throws Error(invalid_argument) for a non-virt stream.
/// Thread-safety: affects only the calling thread.
class VirtStreamGuard {
 public:
  explicit VirtStreamGuard(const Stream& stream);
  ~VirtStreamGuard();
  VirtStreamGuard(const VirtStreamGuard&) = delete;
  VirtStreamGuard& operator=(const VirtStreamGuard&) = delete;

 private:
  int index_;
  Stream previous_;
};

/// The caching allocator of virt device `index` (for record_use, empty_cache and stats).
CachingAllocator& virt_allocator(int index);
/// Statistics of the arena under it (what the device itself holds).
AllocatorStats virt_arena_stats(int index);

}  // namespace tandem
