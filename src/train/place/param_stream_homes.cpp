// ParamStreamer's host homes beside the f32 values: the compute copies rounded into pinned
// staging buffers at upload, the blocks' transient gradient slabs or their own gradient homes,
// and gradient accumulation's running sums (param_stream.h says when each applies).
#include <algorithm>

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/optim_ops.h"
#include "tandem/pinned.h"
#include "train/place/param_stream.h"

namespace tandem::train {
namespace {

constexpr int64_t kAlign = 256;  // bytes: each tensor laid out in a slab or a staging buffer starts at a multiple
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

int64_t ParamStreamer::laid_out_bytes(const std::vector<int64_t>& bytes) {
  int64_t n = 0;
  for (int64_t b : bytes) n += aligned(b);
  return n;
}

void ParamStreamer::round_value(const Entry& e, void* dst) {
  ops::narrow_from_f32(static_cast<const float*>(e.home_value.raw_data()), e.up_dtype, dst, e.home_value.numel());
}

void ParamStreamer::set_micro_batch(int64_t k, int64_t count) {
  TD_CHECK(count >= 1 && k >= 0 && k < count, ErrorCode::internal, "train", "micro-batch {} of {}", k, count);
  micro_ = k;
  micro_count_ = count;
  if (count == 1 || !shards_ || accum_bytes_ > 0) return;
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
    for (Entry& e : part(p).entries) {  // the stage views have the whole shapes
      e.accum = pinned_empty(e.home_value.shape(), DType::f32);
      accum_bytes_ += static_cast<int64_t>(e.accum.nbytes());
    }
}

void ParamStreamer::upload_grads(int p) {
  Part& pt = part(p);
  Buffers& b = buffers_of(p);
  // The sum's last download is home, and the buffers' last users ran (the download that last
  // read the gradient buffers preceded the upload of the values into them).
  up_.wait(pt.grads_home);
  up_.wait(b.free);
  Runtime& rt = runtime_for(device_);
  for (size_t k = 0; k < pt.entries.size(); ++k) {
    const Tensor& src = accum_of(pt.entries[k]);
    rt.copy_async(b.grad[k].raw_data(), device_, src.raw_data(), src.device(), src.nbytes(), up_);
    to_device_bytes_ += static_cast<int64_t>(src.nbytes());
  }
  b.ready = up_.record();
  for (const Tensor& t : b.grad) t.storage()->set_pending_write(b.ready);
  pt.grads_up = true;
}

void ParamStreamer::ensure_grad_homes() {
  if (grad_homes_) return;
  for (Part& pt : blocks_)
    for (Entry& e : pt.entries) {
      e.home_grad = pinned_empty(e.home_value.shape(), DType::f32);
      e.home_grad.fill(0.0);
      e.param->grad = e.home_grad;
    }
  grad_homes_ = true;
}

void ParamStreamer::take_slab(int p) {
  if (grad_slabs_.empty()) {  // the largest streamed block's gradients, one slab per block at most
    int64_t bytes = 0, streamed = 0;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      if (resident_[i]) continue;
      std::vector<int64_t> sizes;
      for (const Entry& e : blocks_[i].entries) sizes.push_back(4 * e.home_value.numel());
      bytes = std::max(bytes, laid_out_bytes(sizes));
      ++streamed;
    }
    grad_slabs_.resize(static_cast<size_t>(std::min<int64_t>(kGradSlabs, streamed)));
    for (Slab& s : grad_slabs_) s.flat = pinned_empty({std::max<int64_t>(1, bytes / 4)}, DType::f32);
  }
  // Taken in turn, so the one taken is the one whose update was queued first.
  Slab& s = grad_slabs_[next_slab_++ % grad_slabs_.size()];
  if (s.owner >= 0 && s.owner != p) wait_updated(s.owner);  // its update consumed the gradients
  s.owner = p;
  int64_t off = 0;  // in floats
  for (Entry& e : part(p).entries) {
    e.home_grad = s.flat.narrow(0, off, e.home_value.numel()).view(e.home_value.shape());
    off += aligned(4 * e.home_value.numel()) / 4;
  }
}

void ParamStreamer::upload_values(int p, const Part& pt, Buffers& b) {
  Runtime& rt = runtime_for(device_);
  const auto staged = [&](const Entry& e) { return !delay() && e.upload_compute && !e.home_compute.defined(); };
  Slab* stage = nullptr;
  if (std::any_of(pt.entries.begin(), pt.entries.end(), staged)) {
    if (p == nn::kOuterPart) {
      stage = &outer_staging_;
    } else {
      if (stagings_.empty()) {  // the largest streamed block's compute copies, two buffers taken in turn
        int64_t bytes = 0, streamed = 0;
        for (size_t i = 0; i < blocks_.size(); ++i) {
          if (resident_[i]) continue;
          std::vector<int64_t> sizes;
          for (const Entry& e : blocks_[i].entries)
            if (staged(e)) sizes.push_back(static_cast<int64_t>(dtype_size(e.up_dtype)) * e.home_value.numel());
          bytes = std::max(bytes, laid_out_bytes(sizes));
          ++streamed;
        }
        stagings_.resize(static_cast<size_t>(std::min<int64_t>(kStagings, streamed)));
        for (Slab& s : stagings_) s.flat = pinned_empty({std::max<int64_t>(1, bytes)}, DType::u8);
      }
      stage = &stagings_[next_staging_++ % stagings_.size()];
    }
    if (!stage->flat.defined()) {  // the outer part's, at its first upload
      std::vector<int64_t> sizes;
      for (const Entry& e : pt.entries)
        if (staged(e)) sizes.push_back(static_cast<int64_t>(dtype_size(e.up_dtype)) * e.home_value.numel());
      stage->flat = pinned_empty({std::max<int64_t>(1, laid_out_bytes(sizes))}, DType::u8);
    }
    stage->used.synchronize();  // its last upload ran: it is rewritten
  }
  int64_t off = 0;
  for (size_t k = 0; k < pt.entries.size(); ++k) {
    const Entry& e = pt.entries[k];
    const void* src = nullptr;
    size_t bytes = b.up[k].nbytes();
    Device from{};
    if (staged(e)) {  // the compute copy the update would have rounded, made here
      void* dst = static_cast<uint8_t*>(stage->flat.raw_data()) + off;
      round_value(e, dst);
      off += aligned(static_cast<int64_t>(bytes));
      src = dst;
      from = stage->flat.device();
    } else {
      const Tensor& t = source(e);
      src = t.raw_data();
      from = t.device();
      bytes = t.nbytes();
    }
    rt.copy_async(b.up[k].raw_data(), device_, src, from, bytes, up_);
    to_device_bytes_ += static_cast<int64_t>(bytes);
  }
  if (stage) stage->used = up_.record();
}

ParamStreamer::HostBytes ParamStreamer::host_bytes() const {
  HostBytes h;
  for (int p = -1; p < static_cast<int>(blocks_.size()); ++p)
    for (const Entry& e : (p == nn::kOuterPart ? outer_ : blocks_[static_cast<size_t>(p)]).entries) {
      // The disk tier: the compute copy's home on the host, its master value on disk.
      if (!shards_) h.values += static_cast<int64_t>((disk_ && e.upload_compute ? e.home_compute : e.home_value).nbytes());
      if (!shards_ && (p == nn::kOuterPart || grad_homes_)) h.gradients += static_cast<int64_t>(e.home_grad.nbytes());
    }
  h.values += delay_copy_bytes_;
  h.gradients += accum_bytes_;
  for (const Slab& s : grad_slabs_) h.gradients += static_cast<int64_t>(s.flat.nbytes());
  for (const Slab& s : stagings_) h.staging += static_cast<int64_t>(s.flat.nbytes());
  if (outer_staging_.flat.defined()) h.staging += static_cast<int64_t>(outer_staging_.flat.nbytes());
  return h;
}

}  // namespace tandem::train
