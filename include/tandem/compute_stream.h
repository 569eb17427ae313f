// A compute stream of its own for the calling thread's ops on a device: what lets one thread
// (an inference service) run ops beside another thread's (a training loop) on one device
// without queueing behind them. The device-kind decisions live here (src/backend/).
//   cpu:  ops run inline on the calling thread: nothing to set up; stream() is inline.
//   virt: a new stream of the device, made the calling thread's current stream
//         (VirtStreamGuard) while the scope lives.
//   cuda: a new stream at the device's greatest priority (cuda::new_priority_stream), made
//         the calling thread's current stream (cuda::CurrentStreamGuard) while the scope
//         lives: the thread's kernels, cuBLAS/cuDNN calls and allocations use it, and the GPU
//         starts its kernels ahead of the default stream's queued ones.
// Tensors the thread's ops use must not be shared with another thread's ops while in use
// (an inference replica has its own copy of the weights).
// Thread-safety: a scope belongs to the thread that made it; destroy it on that thread.
#pragma once

#include <memory>
#include <string>

#include "tandem/device.h"
#include "tandem/stream.h"

namespace tandem {

class OwnComputeStream {
 public:
  /// Throws Error(not_available) for a device this build or machine lacks.
  explicit OwnComputeStream(Device device);
  ~OwnComputeStream();
  OwnComputeStream(const OwnComputeStream&) = delete;
  OwnComputeStream& operator=(const OwnComputeStream&) = delete;
  /// The stream the calling thread's ops on the device now run on.
  const Stream& stream() const { return stream_; }
  /// "own stream", "own stream, high priority" or "inline on the calling thread".
  const char* describe() const { return describe_; }

 private:
  struct Guard;
  Stream stream_;
  std::unique_ptr<Guard> guard_;
  const char* describe_ = "";
};

}  // namespace tandem
