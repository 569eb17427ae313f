// A compute stream of its own for the calling thread's ops on a device: what lets one thread
// (an inference service) run ops beside another thread's (a training loop) on one device
// without queueing behind them. The device-kind decisions live here (src/backend/).
//   cpu:  ops run inline on the calling thread: nothing to set up; stream() is inline.
//   virt: a new stream of the device, made the calling thread's current stream
//         (VirtStreamGuard) while the scope lives.
//   cuda: ops of this build always run on the device's one default stream, which two threads
//         must not both enqueue on: the scope uses that stream, and concurrent_ops_conflict()
//         says so for a second thread on the same device.
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
  /// "own stream", "inline on the calling thread" or "the device's default stream".
  const char* describe() const { return describe_; }

 private:
  struct Guard;
  Stream stream_;
  std::unique_ptr<Guard> guard_;
  const char* describe_ = "";
};

/// "" when one thread may run ops on `a` (in an OwnComputeStream) while another runs ops on
/// `b`; else why not, e.g. "cuda:0 runs every op on one stream per device in this build". Never throws.
std::string concurrent_ops_conflict(Device a, Device b);

}  // namespace tandem
