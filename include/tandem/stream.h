// Streams and events: the asynchronous interface every device implements.
//   Stream: an ordered queue of work on one device. Work enqueued on it runs in order.
//   Event:  recorded on a stream; completes when all work enqueued before it has run.
//           Another stream can wait on it (the host does not block), or the host can.
// No hidden synchronisation: nothing here blocks except synchronize().
// On the cpu device work runs inline on the calling thread, so events complete when
// recorded; on virt and cuda work runs later, on another thread or the GPU.
// Thread-safety: Stream and Event are handles (shared_ptr); enqueueing on one stream from
// several threads at once is not supported; query() and synchronize() are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tandem/allocator.h"
#include "tandem/device.h"

namespace tandem {

class EventImpl {
 public:
  virtual ~EventImpl() = default;
  virtual bool query() const = 0;   // true once complete; never blocks
  virtual void synchronize() = 0;   // host blocks until complete
};

class StreamImpl {
 public:
  virtual ~StreamImpl() = default;
  virtual Device device() const = 0;
  /// Runs `work` after everything enqueued before it (inline on cpu).
  virtual void enqueue(std::function<void()> work) = 0;
  /// As enqueue, for host work that is no computation of the device: a collective that waits
  /// for other ranks, a callback. A device that models its speed (virt) does not throttle it.
  virtual void enqueue_host(std::function<void()> work) { enqueue(std::move(work)); }
  /// Returns an event that completes when the work enqueued so far has run.
  virtual std::shared_ptr<EventImpl> record() = 0;
  /// Work enqueued after this call starts only after `event` completed. Never blocks the host.
  virtual void wait(std::shared_ptr<EventImpl> event) = 0;
  /// Host blocks until everything enqueued so far has run; rethrows the first error a work
  /// item raised (as the Error it was).
  virtual void synchronize() = 0;
  /// Names the stream's role for the profiler ("compute", "h2d copies"); streams that record
  /// no device spans ignore it.
  virtual void set_label(const std::string& /*label*/) {}
};

class Event {
 public:
  Event() = default;  // a never-recorded event counts as complete
  explicit Event(std::shared_ptr<EventImpl> impl) : impl_(std::move(impl)) {}
  bool query() const { return !impl_ || impl_->query(); }
  void synchronize() const {
    if (impl_) impl_->synchronize();
  }
  const std::shared_ptr<EventImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<EventImpl> impl_;
};

class Stream {
 public:
  Stream() = default;
  explicit Stream(std::shared_ptr<StreamImpl> impl) : impl_(std::move(impl)) {}
  Device device() const { return impl_->device(); }
  void enqueue(std::function<void()> work) const { impl_->enqueue(std::move(work)); }
  void enqueue_host(std::function<void()> work) const { impl_->enqueue_host(std::move(work)); }
  Event record() const { return Event(impl_->record()); }
  void wait(const Event& e) const {
    if (e.impl()) impl_->wait(e.impl());
  }
  void synchronize() const { impl_->synchronize(); }
  /// Adds a role to the stream's profiler track name: "virt:0 stream 1 (h2d copies)". Set it
  /// before the stream runs profiled work (a later label starts a new track).
  void set_label(const std::string& label) const { impl_->set_label(label); }
  StreamImpl* impl() const { return impl_.get(); }
  explicit operator bool() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<StreamImpl> impl_;
};

/// A device runtime: memory, streams and copies for one device kind.
/// Thread-safety: all methods are thread-safe.
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual DeviceKind kind() const = 0;
  virtual int device_count() const = 0;
  virtual Allocator& allocator(int index) = 0;
  /// The stream ops use when none is given (one per device).
  virtual Stream default_stream(int index) = 0;
  /// The stream the calling thread's ops on device `index` run on now: the default stream,
  /// except where a device kind lets a thread pick another (virt: a VirtStreamGuard, see
  /// tandem/virt.h). Work that must follow the thread's ops (a copy of their result, an
  /// event) goes on this stream. cpu: the inline default stream; cuda: the default stream.
  virtual Stream current_stream(int index) { return default_stream(index); }
  /// A new stream, e.g. a dedicated copy stream.
  virtual Stream new_stream(int index) = 0;
  /// Copies `bytes` from src (on src_dev) to dst (on dst_dev), ordered on `stream`.
  /// The destination may be read only after an event recorded after this call completed.
  virtual void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes,
                          const Stream& stream) = 0;
};

/// The runtime for `kind`. Throws Error(not_available, "[device] ...") when this build or this
/// machine has none ("tandem was built without CUDA", "no CUDA device found").
Runtime& runtime(DeviceKind kind);
/// Registers a runtime (called by each backend at start-up). Later registration replaces.
void register_runtime(DeviceKind kind, Runtime* (*factory)());

/// Checks that `device` exists (index < device_count) and returns its runtime.
Runtime& runtime_for(Device device);

}  // namespace tandem
