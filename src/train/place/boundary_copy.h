// BoundaryCopier: the copies of activations and gradients between the devices of a placed
// model (--place). A tensor crosses on a copy stream of the receiving side (the sending
// side's when the receiver is the cpu): the copy waits, device-side, for the op that wrote
// the tensor (its pending write; all the producer's queued ops when it has none), and the
// receiver's compute stream waits for the copy's event, so the host does not wait; only a
// cpu receiver, whose ops run on the calling thread, waits on the host.
// Thread-safety: one thread (the training thread), as Module.
#pragma once

#include <utility>
#include <vector>

#include "tandem/device.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::train {

class BoundaryCopier {
 public:
  BoundaryCopier() = default;
  BoundaryCopier(const BoundaryCopier&) = delete;
  BoundaryCopier& operator=(const BoundaryCopier&) = delete;
  /// Waits for the copies queued on its streams (errors are not raised from here).
  ~BoundaryCopier();

  /// `t` on device `to` in memory format `want` (converted on the side whose backend keeps
  /// channels_last tensors); `t` itself when it is there already. Errors: the runtimes'
  /// (out of device memory).
  Tensor cross(const Tensor& t, Device to, MemoryFormat want = MemoryFormat::contiguous);

 private:
  Stream copy_stream(Device side);
  std::vector<std::pair<Device, Stream>> copy_streams_;
};

}  // namespace tandem::train
