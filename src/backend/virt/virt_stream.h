// Internal: virt events and streams (one worker thread per stream).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "tandem/profile/profiler.h"
#include "tandem/stream.h"
#include "virt_cost.h"

namespace tandem::virt {

/// Throttle knobs a stream reads before each item (shared by the streams of one device).
struct ThrottleState {
  std::atomic<double> speed{1.0};
  std::atomic<double> bw_gbps{0.0};
  std::atomic<double> latency_us{0.0};
  // Throughput planning (virt_cost.h): 0 = not modelled.
  std::atomic<double> tflops{0.0};
  std::atomic<double> gbps{0.0};
  std::atomic<bool> compute{true};  // false: ops are not run, only their modelled time passes
};

/// True on the worker thread of a virt stream (work items run there; they must not wait for
/// the streams themselves).
bool on_virt_worker();

class VirtEvent final : public EventImpl {
 public:
  bool query() const override { return done_.load(std::memory_order_acquire); }
  void synchronize() override;
  void complete();

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

/// Profiling: while the profiler is enabled, each compute item carries the enqueuing thread's
/// tag (profile::current_tag(); untagged work is "device work") and each copy is tagged h2d,
/// d2h or d2d by its endpoints. The worker records consecutive items of one tag as one span
/// on the track "virt:<device> stream <number>"; it records a pending span before running a
/// marker that is the last queued item or that waits on an unfinished event, so a host that
/// waited for the stream finds every span of the work before it.
class VirtStream final : public StreamImpl {
 public:
  /// `number` names the stream's profiler track (0 for the default stream).
  VirtStream(Device device, const ThrottleState* throttle, int number);
  ~VirtStream() override;

  Device device() const override { return device_; }
  void enqueue(std::function<void()> work) override;
  /// A marker item: run in order, never throttled by speed (its time is not the device's).
  void enqueue_host(std::function<void()> work) override;
  std::shared_ptr<EventImpl> record() override;
  void wait(std::shared_ptr<EventImpl> event) override;
  void synchronize() override;
  /// The profiler track becomes "virt:N stream M (label)".
  void set_label(const std::string& label) override;
  /// The modelled device's compute time so far: each op's modelled seconds (its run time when
  /// it ran longer), other compute items' run time over `speed`; copies and markers add none.
  double busy_seconds() const;

  /// A copy of `bytes` bytes, throttled by bandwidth and latency; `stage` (h2d, d2h or other)
  /// tags it for the profiler.
  /// An op's work item of modelled cost `cost`. With tflops or gbps set, the stream is busy
  /// for modelled_seconds(cost) from when the op was enqueued or the work before it ended,
  /// whichever is later (at least as long as the work ran, when it runs); with compute=none
  /// `work` is not run (its captures are released). See tandem/virt.h.
  void enqueue_op(std::function<void()> work, const OpCost& cost);
  void enqueue_copy(void* dst, const void* src, size_t bytes, profile::Stage stage);
  /// Runs the queued work (unthrottled) and joins the worker; later work runs inline.
  void shutdown();

 private:
  // Shared with the worker thread, so that a worker whose stream was dropped by one of its
  // own work items can finish draining after the VirtStream object is gone.
  struct Queue;

  Device device_;
  std::shared_ptr<Queue> q_;
  std::thread worker_;
};

}  // namespace tandem::virt
