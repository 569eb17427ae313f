// stream_busy_seconds (tandem/stream_clock.h): the backends that keep a compute clock answer.
#include "tandem/stream_clock.h"

#include <limits>

#include "virt/virt_stream.h"

namespace tandem {

double stream_busy_seconds(const Stream& stream) {
  if (const auto* v = dynamic_cast<const virt::VirtStream*>(stream.impl())) return v->busy_seconds();
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tandem
