// A device's own clock of the compute it did on a stream, for timing work without the host's
// scheduling in the figure (the batch split's --split auto reads it).
// Thread-safety: thread-safe; call it from work on the stream (Stream::enqueue_host) to read
// the value at that point of the stream's order.
#pragma once

#include "tandem/stream.h"

namespace tandem {

/// Seconds of compute the device has done on `stream` so far, as the device counts it: virt
/// counts each op's modelled seconds (its run time when it ran longer) and other compute items'
/// run time over `speed` (tandem/virt.h), deterministic for modelled ops whatever the host's
/// load. NaN where the device keeps no such clock (cpu, cuda): time the work with host stamps.
double stream_busy_seconds(const Stream& stream);

}  // namespace tandem
