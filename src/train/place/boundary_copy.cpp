#include "train/place/boundary_copy.h"

#include "tandem/ops.h"
#include "tandem/profile/profiler.h"
#include "tandem/stream.h"

namespace tandem::train {

BoundaryCopier::~BoundaryCopier() {
  for (auto& [d, s] : copy_streams_) {
    try {
      s.synchronize();
    } catch (...) {
    }
  }
}

Stream BoundaryCopier::copy_stream(Device side) {
  for (const auto& [d, s] : copy_streams_)
    if (d == side) return s;
  Stream s = runtime_for(side).new_stream(side.index);
  s.set_label("place boundary copies");
  copy_streams_.emplace_back(side, s);
  return s;
}

Tensor BoundaryCopier::cross(const Tensor& t, Device to, MemoryFormat want) {
  const Device from = t.device();
  if (from == to) return t;
  profile::ScopedSpan span(profile::Stage::h2d, "boundary copy");
  auto keeps_channels_last = [&](Device d) {
    return ops::preferred_memory_format(d, t.dtype()) == MemoryFormat::channels_last;
  };
  Tensor src = t;
  if (src.memory_format() != want && keeps_channels_last(from)) src = ops::to_memory_format(src, want);
  const Device side = to.is_host() ? from : to;
  Stream copy = copy_stream(side);
  if (!from.is_host() && !src.storage()->pending_write().impl())
    copy.wait(runtime_for(from).current_stream(from.index).record());
  Tensor out = src.to(to, copy);
  const Event done = copy.record();
  if (to.is_host()) {
    done.synchronize();  // the cpu's ops run on this thread
  } else {
    runtime_for(to).current_stream(to.index).wait(done);
  }
  return out.memory_format() == want ? out : ops::to_memory_format(out, want);
}

}  // namespace tandem::train
