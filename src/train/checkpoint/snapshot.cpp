#include "train/checkpoint/snapshot.h"

#include "tandem/error.h"
#include "tandem/pinned.h"

namespace tandem::train::checkpoint {

// Reuses the buffers when the names, shapes and dtypes are those of the last capture.
static bool same_layout(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].second.shape() != b[i].second.shape() ||
        a[i].second.dtype() != b[i].second.dtype())
      return false;
  return true;
}

void Snapshot::capture(const NamedTensors& sources, Device device, const Stream& compute) {
  bool any_device = false;
  for (const auto& [name, t] : sources) {
    TD_CHECK(t.defined() && t.is_contiguous(), ErrorCode::internal, "checkpoint",
             "state tensor '{}' is undefined or not contiguous", name);
    any_device = any_device || !t.device().is_host();
  }
  if (!same_layout(buffers_, sources)) {
    copied_.synchronize();
    buffers_.clear();
    for (const auto& [name, t] : sources)
      buffers_.emplace_back(name, !t.device().is_host() ? pinned_empty(t.shape(), t.dtype()) : Tensor::empty(t.shape(), t.dtype()));
  }
  if (any_device && !copy_) {
    copy_ = runtime_for(device).new_stream(device.index);
    copy_.set_label("checkpoint d2h");
  }
  if (any_device) copy_.wait(compute.record());  // after the last step's work
  for (size_t i = 0; i < sources.size(); ++i) {
    const Tensor& src = sources[i].second;
    Tensor& dst = buffers_[i].second;
    if (src.device().is_host()) {
      dst.copy_from(src);
      continue;
    }
    const Event& w = src.storage()->pending_write();  // e.g. an upload on another stream
    if (!w.query()) copy_.wait(w);
    runtime_for(src.device()).copy_async(dst.raw_data(), Device{}, src.raw_data(), src.device(), src.nbytes(), copy_);
  }
  if (any_device) {
    copied_ = copy_.record();
    compute.wait(copied_);  // the next step writes what is being copied
  }
}

void Snapshot::wait() const { copied_.synchronize(); }

size_t Snapshot::bytes() const {
  size_t n = 0;
  for (const auto& b : buffers_) n += b.second.nbytes();
  return n;
}

}  // namespace tandem::train::checkpoint
