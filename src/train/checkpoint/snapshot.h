// Snapshot: a copy of a run's state tensors in host memory, taken between two steps without
// waiting for the device. Host tensors are copied at once (memcpy); device tensors on a copy
// stream that first waits for an event recorded on the compute stream after the last step,
// into pinned buffers; the compute stream then waits for the copies before its next work
// (the next step's optimizer overwrites the parameters), so the host never blocks and the
// device pauses only for the copy. wait() (any thread) blocks until the copies are done.
// The buffers are kept and reused by the next capture of the same tensors.
// Thread-safety: capture() on the thread that enqueues the run's ops; wait() and tensors()
// on one other thread afterwards (the checkpoint writer), not during a capture.
#pragma once

#include "tandem/device.h"
#include "tandem/safetensors.h"
#include "tandem/stream.h"

namespace tandem::train::checkpoint {

class Snapshot {
 public:
  /// Copies `sources` (contiguous tensors on the host or on `device`) in order. `compute`:
  /// the stream the run's ops run on. Throws Error(out_of_memory) when the pinned pool cannot
  /// hold the buffers.
  void capture(const NamedTensors& sources, Device device, const Stream& compute);
  /// Blocks until the copies of the last capture completed.
  void wait() const;
  /// The copies (host tensors), valid after wait().
  const NamedTensors& tensors() const { return buffers_; }
  /// Bytes the buffers hold.
  size_t bytes() const;

 private:
  NamedTensors buffers_;
  Stream copy_;
  Event copied_;
};

}  // namespace tandem::train::checkpoint
