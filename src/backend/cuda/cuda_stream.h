// Internal: CUDA streams and events behind the StreamImpl / EventImpl interfaces.
//  - CudaStream owns a cudaStream_t created with cudaStreamNonBlocking (no implicit
//    synchronisation with the legacy stream 0), at a priority (cudaStreamCreateWithPriority;
//    0 is CUDA's default, lower numbers are scheduled first). enqueue() runs a host function in stream
//    order (cudaLaunchHostFunc); an exception it throws is kept and rethrown by the next
//    synchronize(). A host function must not call CUDA, so the finished work item (its
//    closure and captures, whose destructors may: tensors, events, pinned blocks) is handed
//    to a release thread (deferred_release.h); synchronize() returns after it was released.
//    wait(event) is cudaStreamWaitEvent for CUDA events; events of other
//    kinds are waited for by a host function in stream order (the host does not block).
//  - CudaEvent is recorded at construction on an event with cudaEventDisableTiming, taken
//    from a per-device cache of unused events (one is recorded per op).
// Thread-safety: as tandem/stream.h.
#pragma once

#include <cuda_runtime_api.h>

#include <exception>
#include <memory>
#include <mutex>

#include "tandem/stream.h"

namespace tandem::cuda_detail {

class CudaEvent final : public EventImpl {
 public:
  /// Creates an event on `device` and records it on `stream`.
  CudaEvent(int device, cudaStream_t stream);
  ~CudaEvent() override;
  bool query() const override;
  void synchronize() override;
  cudaEvent_t get() const { return event_; }
  /// The stream it was recorded on (work later on that stream is ordered after it anyway).
  cudaStream_t stream() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_;
  cudaEvent_t event_ = nullptr;
};

class CudaStream final : public StreamImpl {
 public:
  explicit CudaStream(int device, int priority = 0);
  ~CudaStream() override;
  Device device() const override { return Device(DeviceKind::cuda, device_); }
  void enqueue(std::function<void()> work) override;
  std::shared_ptr<EventImpl> record() override;
  void wait(std::shared_ptr<EventImpl> event) override;
  void synchronize() override;
  cudaStream_t get() const { return stream_; }
  int index() const { return device_; }

  /// The first error raised by a host function, shared with the callbacks still in flight.
  struct ErrorSlot {
    std::mutex mu;
    std::exception_ptr first;
  };

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<ErrorSlot> errors_ = std::make_shared<ErrorSlot>();
};

/// The CudaStream behind `stream`; throws Error(invalid_argument, "[op] ...") for an empty
/// stream or a stream of another device kind.
CudaStream& as_cuda_stream(const Stream& stream, const char* op);

}  // namespace tandem::cuda_detail
