#include "train/place/param_stream.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>

#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"

namespace tandem::train {
namespace {

constexpr int64_t kAlign = 256;  // bytes: each tensor laid out in a slot starts at a multiple
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The model's description up to its arguments ("Sequential", "GPT2LMHeadModel"), for messages.
std::string model_name(const nn::Module& model) {
  const std::string d = model.describe();
  return d.substr(0, d.find_first_of("(\n"));
}

}  // namespace

int ParamStreamer::slots_for(int64_t blocks, int prefetch_depth) {
  return static_cast<int>(std::min<int64_t>(blocks, prefetch_depth + 2));
}

ParamStreamer::ParamStreamer(nn::Module& model, Device device, int prefetch_depth, int device_parts,
                             comm::CommunicatorPtr shard_comm)
    : ParamStreamer(stream_layout(model, model_name(model)), device, prefetch_depth, device_parts,
                    std::move(shard_comm)) {}

ParamStreamer::ParamStreamer(StreamLayout layout, Device device, int prefetch_depth, int device_parts,
                             comm::CommunicatorPtr shard_comm)
    : install_(std::move(layout.install)),
      outer_label_(std::move(layout.outer_label)),
      device_(device),
      depth_(prefetch_depth),
      kept_values_(layout.values_to_disk && !shard_comm),
      source_(std::move(layout.source)) {
  TD_CHECK_ARG(!shard_comm || device_parts == 0, "train",
               "--zero 3 with --optimizer-split: not supported (the device's parts would not be sharded); expected "
               "--optimizer-split 1");
  TD_CHECK_ARG(prefetch_depth >= 1 && prefetch_depth <= kMaxPrefetchDepth, "train",
               "--param-prefetch {}: expected 1 to {} blocks", prefetch_depth, kMaxPrefetchDepth);
  TD_CHECK_ARG(device_parts >= 0 && device_parts <= static_cast<int>(layout.blocks.size()), "train",
               "--optimizer-split: {} parts on the device, expected 0 to {} (one block at least is streamed)",
               device_parts, layout.blocks.size());
  TD_CHECK_ARG(!device.is_host(), "train",
               "--param-device cpu: expected an accelerator --device (on cpu the parameters are in host memory "
               "already), got {}",
               device.str());
  Runtime& rt = runtime_for(device);
  up_ = rt.new_stream(device.index);
  up_.set_label("parameter uploads");
  down_ = rt.new_stream(device.index);
  down_.set_label("gradient downloads");
  if (shard_comm) {  // the compute copies' dtype: the first there is (f32 without)
    DType compute = DType::f32;
    for (const auto* params : {&layout.outer, layout.blocks.empty() ? &layout.outer : &layout.blocks[0]})
      for (const nn::Parameter* p : *params)
        if (p->compute.defined() && compute == DType::f32) compute = p->compute.dtype();
    shards_ = std::make_unique<ShardedHomes>(std::move(shard_comm), compute);
  }
  blocks_.resize(layout.blocks.size());
  resident_.assign(blocks_.size() + 1, false);  // the parts in the order outer, 0, 1, ...
  for (int k = 0; k < device_parts; ++k) resident_[k == 0 ? blocks_.size() : static_cast<size_t>(k - 1)] = true;
  const auto add = [&](Part& part, const std::vector<nn::Parameter*>& params, const std::vector<Tensor*>& buffers) {
    const bool resident = &part == &outer_ ? resident_.back() : resident_[static_cast<size_t>(&part - blocks_.data())];
    for (nn::Parameter* p : params) {
      TD_CHECK_ARG(p->value.device().is_host(), "train", "--param-device cpu: parameter {} is on {}, expected the host",
                   p->name, p->value.device().str());
      if (resident) {  // --optimizer-split: at home on the device, updated there
        const Tensor host = value_of(*p, false);
        if (p->compute.defined())
          p->compute = (source_ ? host.to(p->compute.dtype()) : p->compute).to(device, rt.current_stream(device.index));
        p->value = host.to(device, rt.current_stream(device.index));
        p->grad = Tensor::empty(p->value.shape(), DType::f32, device);
        ops::zero_(p->grad);
        part.resident.push_back(p);
        resident_elements_ += p->value.numel();
        resident_bytes_ += static_cast<int64_t>(p->value.nbytes() + p->grad.nbytes() +
                                                (p->compute.defined() ? p->compute.nbytes() : 0));
        continue;
      }
      Entry e;
      e.param = p;
      e.upload_compute = p->compute.defined();
      e.up_dtype = e.upload_compute ? p->compute.dtype() : DType::f32;
      if (shards_) {  // until the shards are cut: the model's own tensors (their shapes)
        e.home_value = p->value;
        e.home_compute = p->compute;
        e.home_grad = Tensor();
        part.entries.push_back(std::move(e));
        continue;
      }
      // The f32 value only: the compute copy is rounded from it at each upload, and a block's
      // gradients get their homes when they first come down (a slab's, or their own).
      e.home_value = kept_values_ ? p->value : value_of(*p, true);
      if (&part == &outer_) {
        e.home_grad = pinned_empty(p->value.shape(), DType::f32);
        e.home_grad.fill(0.0);
      }
      p->value = e.home_value;
      p->compute = e.home_compute;
      p->grad = e.home_grad;
      part.entries.push_back(std::move(e));
    }
    for (Tensor* t : buffers) {
      if (!t->defined() || t->dim() == 0) continue;  // 0-d counters stay where they are
      TD_CHECK_ARG(t->device().is_host(), "train", "--param-device cpu: a module buffer is on {}, expected the host",
                   t->device().str());
      TD_CHECK_ARG(!source_ || t->raw_data() != nullptr, "train",
                   "--param-device cpu: a model built without memory has a module buffer of shape {}: expected one "
                   "whose state is parameters only",
                   shape_str(t->shape()));
      if (resident) {
        *t = t->to(device, rt.current_stream(device.index));
        resident_bytes_ += static_cast<int64_t>(t->nbytes());
        continue;
      }
      BufferEntry b{t, pinned_copy(*t)};
      *t = b.home;
      part.buffers.push_back(std::move(b));
    }
  };
  add(outer_, layout.outer, layout.outer_buffers);
  for (size_t b = 0; b < blocks_.size(); ++b)
    add(blocks_[b], layout.blocks[b], b < layout.block_buffers.size() ? layout.block_buffers[b] : std::vector<Tensor*>{});
  // Device buffers shaped as the part's uploaded tensors, gradients and module buffers.
  const auto make = [&](const Part& part, Buffers& b) {
    int64_t bytes = 0;
    for (const Entry& e : part.entries) {
      b.up.push_back(Tensor::empty(e.home_value.shape(), e.up_dtype, device));
      b.grad.push_back(Tensor::empty(e.home_value.shape(), DType::f32, device));
      bytes += static_cast<int64_t>(b.up.back().nbytes() + b.grad.back().nbytes());
    }
    for (const BufferEntry& e : part.buffers) {
      b.buf.push_back(Tensor::empty(e.home.shape(), e.home.dtype(), device));
      bytes += static_cast<int64_t>(e.home.nbytes());
    }
    return bytes;
  };
  outer_bytes_ = make(outer_, outer_buf_);
  int64_t streamed = 0;  // blocks, the first of them the slots' template
  const Part* template_block = nullptr;
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (!resident_[b]) {
      if (!template_block) template_block = &blocks_[b];
      ++streamed;
    }
  if (template_block) {
    const Part& first = *template_block;
    for (size_t i = 0; i < blocks_.size(); ++i) {  // fixed slots need every streamed block shaped as the first
      if (resident_[i]) continue;
      const Part& b = blocks_[i];
      bool same = b.entries.size() == first.entries.size() && b.buffers.size() == first.buffers.size();
      for (size_t k = 0; same && k < b.entries.size(); ++k)
        same = b.entries[k].home_value.shape() == first.entries[k].home_value.shape() &&
               b.entries[k].upload_compute == first.entries[k].upload_compute;
      for (size_t k = 0; same && k < b.buffers.size(); ++k)
        same = b.buffers[k].home.shape() == first.buffers[k].home.shape() &&
               b.buffers[k].home.dtype() == first.buffers[k].home.dtype();
      equal_blocks_ = equal_blocks_ && same;
    }
    slots_.resize(static_cast<size_t>(slots_for(streamed, depth_)));
    if (equal_blocks_) {
      for (Buffers& s : slots_) slot_bytes_ = make(first, s);
    } else {
      for (const Part& b : blocks_) slot_bytes_ = std::max(slot_bytes_, lay_out(b, nullptr));
      for (Buffers& s : slots_) s.flat = Tensor::empty({slot_bytes_}, DType::u8, device);
    }
  }
  if (shards_) {  // this rank's shards cut from the whole values, which then go
    std::vector<int> block_shards;
    for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
      Part& pt = part(p);
      std::vector<nn::Parameter*> params;
      std::vector<bool> compute;
      for (const Entry& e : pt.entries) params.push_back(e.param), compute.push_back(e.upload_compute);
      pt.shard = shards_->add_part(params, compute, source_);
      if (p >= 0) block_shards.push_back(pt.shard);
    }
    outer_buf_.stage = shards_->stage_for({outer_.shard});
    stage_bytes_ = shards_->stage_bytes({outer_.shard});
    for (Buffers& s : slots_) {
      s.stage = shards_->stage_for(block_shards);
      stage_bytes_ += shards_->stage_bytes(block_shards);
    }
    for (int p = -1; p < static_cast<int>(blocks_.size()); ++p) {
      shard_views(p, p == nn::kOuterPart ? outer_buf_ : slots_[0], true);
      for (Entry& e : part(p).entries) {
        e.param->value = e.home_value;
        e.param->compute = e.home_compute;
        e.param->grad = e.home_grad;
      }
    }
  }
  install_(this);
}

Tensor ParamStreamer::value_of(const nn::Parameter& p, bool pinned) const {
  if (!source_) return pinned ? pinned_copy(p.value) : p.value;
  Tensor t = pinned ? pinned_empty(p.value.shape(), DType::f32) : Tensor::empty(p.value.shape(), DType::f32);
  source_(p, 0, t.numel(), t.data<float>());
  return t;
}

void ParamStreamer::shard_views(int p, const Buffers& b, bool grads) {
  Part& pt = part(p);
  std::vector<Tensor> up, grad;
  shards_->views(pt.shard, b.stage, up, grad);
  for (size_t k = 0; k < pt.entries.size(); ++k) {
    Entry& e = pt.entries[k];
    (e.upload_compute ? e.home_compute : e.home_value) = up[k];
    // A compute copy's master is not gathered: the value is a view of its shape only.
    if (e.upload_compute) e.home_value = grad[k];
    if (grads) e.home_grad = grad[k];
  }
}

int64_t ParamStreamer::lay_out(const Part& part, Buffers* b) const {
  auto* base = b ? static_cast<uint8_t*>(b->flat.raw_data()) : nullptr;
  int64_t off = 0;
  const auto take = [&](std::vector<Tensor>* out, const Shape& shape, DType dtype) {
    off = aligned(off);
    if (out) out->push_back(Tensor::from_blob(base + off, shape, dtype, device_));
    int64_t n = static_cast<int64_t>(dtype_size(dtype));
    for (int64_t d : shape) n *= d;
    off += n;
  };
  if (b) b->up.clear(), b->grad.clear(), b->buf.clear();
  for (const Entry& e : part.entries) {
    take(b ? &b->up : nullptr, e.home_value.shape(), e.up_dtype);
    take(b ? &b->grad : nullptr, e.home_value.shape(), DType::f32);
  }
  for (const BufferEntry& e : part.buffers) take(b ? &b->buf : nullptr, e.home.shape(), e.home.dtype());
  return aligned(off);
}

ParamStreamer::~ParamStreamer() {
  install_(nullptr);
  stop_updates();
  wait_copies();
}

void ParamStreamer::wait_copies() noexcept {
  try {
    up_.synchronize();
    down_.synchronize();
  } catch (...) {
  }
}

void ParamStreamer::fetch(int p) {
  if (resident_[slot_of(p)]) return;  // at home on the device
  if (!delay()) wait_updated(p);  // its values are the updated ones (delay 1: the other copy's)
  Part& pt = part(p);
  Buffers* b = &outer_buf_;
  if (p != nn::kOuterPart) {
    if (pt.slot >= 0) return;  // still there from this step's forward
    // The slot to reuse, not computing now: one whose block this pass has passed (least
    // recently used first), else the block ahead that this pass needs last.
    const auto ahead = [&](int owner) { return owner >= 0 && (backward_ ? owner < cur_ : owner > cur_); };
    int victim = -1;
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s) {
      const Buffers& c = slots_[static_cast<size_t>(s)];
      if (c.in_use) continue;
      if (victim < 0) {
        victim = s;
        continue;
      }
      const Buffers& v = slots_[static_cast<size_t>(victim)];
      const bool ca = ahead(c.owner), va = ahead(v.owner);
      if (ca != va ? !ca : ca ? std::abs(c.owner - cur_) > std::abs(v.owner - cur_) : c.last_use < v.last_use)
        victim = s;
    }
    TD_CHECK(victim >= 0, ErrorCode::internal, "train", "--param-device cpu: no free block slot");
    b = &slots_[static_cast<size_t>(victim)];
    if (b->owner >= 0) {
      Part& evicted = blocks_[static_cast<size_t>(b->owner)];
      evicted.slot = -1;
      evicted.grads_up = false;  // its running sum, if uploaded, goes with the slot
    }
    b->owner = p;
    pt.slot = victim;
    ++block_fetches_;
    if (!equal_blocks_) lay_out(pt, b);  // views only: the uploads below wait for the slot's last users
  } else if (outer_valid_) {
    return;
  }
  b->last_use = ++clock_;
  if (shards_) gather_into(p, *b);
  profile::ScopedSpan span(profile::Stage::h2d, p == nn::kOuterPart ? "parameters up: outer" : "parameters up: block");
  up_.wait(b->free);  // the buffers' last readers and writers ran
  upload_values(p, pt, *b);
  Runtime& rt = runtime_for(device_);
  if (!pt.buffers.empty()) up_.wait(pt.buffers_home);  // the last training pass's statistics are home
  for (size_t k = 0; k < pt.buffers.size(); ++k) {
    const Tensor& home = pt.buffers[k].home;
    rt.copy_async(b->buf[k].raw_data(), device_, home.raw_data(), home.device(), home.nbytes(), up_);
    to_device_bytes_ += static_cast<int64_t>(home.nbytes());
  }
  b->ready = up_.record();
  b->stage_read = b->ready;
  for (const Tensor& t : b->up) t.storage()->set_pending_write(b->ready);
  for (const Tensor& t : b->buf) t.storage()->set_pending_write(b->ready);
  if (p == nn::kOuterPart) outer_valid_ = true;
}

void ParamStreamer::attach(int p, bool with_grads) {
  Part& pt = part(p);
  Buffers& b = buffers_of(p);
  b.in_use = true;
  b.last_use = ++clock_;
  // Accumulation: the running sum is what the backward adds to (a resident model's gradients).
  if (with_grads && micro_ > 0 && !pt.grads_up) upload_grads(p);
  runtime_for(device_).current_stream(device_.index).wait(b.ready);
  for (size_t k = 0; k < pt.entries.size(); ++k) {
    nn::Parameter* q = pt.entries[k].param;
    (pt.entries[k].upload_compute ? q->compute : q->value) = b.up[k];
    if (with_grads) {
      q->grad = b.grad[k];
      if (micro_ == 0) ops::zero_(b.grad[k]);
    }
  }
  for (size_t k = 0; k < pt.buffers.size(); ++k) *pt.buffers[k].in_module = b.buf[k];
}

void ParamStreamer::detach(int p, bool grads_home, bool buffers_home) {
  Part& pt = part(p);
  Buffers& b = buffers_of(p);
  const Stream compute = runtime_for(device_).current_stream(device_.index);
  // Device tensors to their homes on the download stream, after the compute so far; returns
  // the copies' completion, which the homes carry as their pending write.
  const auto download = [&](const std::vector<Tensor>& from, const auto& homes, const auto& home_of) {
    down_.wait(compute.record());
    Runtime& rt = runtime_for(device_);
    for (size_t k = 0; k < from.size(); ++k) {
      const Tensor& home = home_of(homes[k]);
      rt.copy_async(home.raw_data(), home.device(), from[k].raw_data(), device_, home.nbytes(), down_);
      to_host_bytes_ += static_cast<int64_t>(home.nbytes());
    }
    const Event done = down_.record();
    for (const auto& h : homes) home_of(h).storage()->set_pending_write(done);
    return done;
  };
  buffers_home = buffers_home && !pt.buffers.empty();
  if (buffers_home) {  // BatchNorm's running statistics, as the pass left them
    pt.buffers_home = download(b.buf, pt.buffers, [](const BufferEntry& e) -> const Tensor& { return e.home; });
    b.free = pt.buffers_home;
  }
  if (grads_home) {
    pt.grads_up = false;
    wait_updated(p);  // delay 1: the previous step's update of the part read its gradients
    if (!shards_ && p != nn::kOuterPart) {  // a block's gradients: into a slab, or their own homes
      if (transient_grads()) {
        take_slab(p);
      } else {
        ensure_grad_homes();
      }
    }
    profile::ScopedSpan span(profile::Stage::d2h, "gradients down");
    if (!last_micro_batch()) {  // accumulation: the running sum to its home, no update
      b.free = download(b.grad, pt.entries, [this](const Entry& e) -> const Tensor& { return accum_of(e); });
    } else {
      if (micro_count_ > 1) {  // the mean over the micro-batches, as ParamHome::average_micro_batches
        const float inv = static_cast<float>(1.0 / static_cast<double>(micro_count_));
        for (const Tensor& g : b.grad) ops::scale_(g, inv);
      }
      if (shards_) {  // into the stage, once the gradients it held were reduce-scattered
        if (b.grad_owner != -2 && b.grad_owner != p) wait_updated(b.grad_owner);
        shard_views(p, b, true);
        b.grad_owner = p;
      }
      b.free = download(b.grad, pt.entries, [](const Entry& e) -> const Tensor& { return e.home_grad; });
    }
    pt.grads_home = b.free;
  } else if (!buffers_home) {
    b.free = compute.record();
  }
  for (const Entry& e : pt.entries) {
    e.param->value = e.home_value;
    e.param->compute = e.home_compute;
    e.param->grad = e.home_grad;
  }
  for (const BufferEntry& e : pt.buffers) *e.in_module = e.home;
  b.in_use = false;
}

void ParamStreamer::invalidate() {
  outer_valid_ = false;
  for (Buffers& s : slots_) s.owner = -2;
  for (Part& b : blocks_) b.slot = -1;
}

void ParamStreamer::use(int p, nn::StreamPass pass) {
  const bool backward = pass == nn::StreamPass::backward;
  if (p == nn::kOuterPart && !backward) read_ = next_read_;  // a pass begins
  backward_ = backward;
  eval_ = pass == nn::StreamPass::eval;
  cur_ = p != nn::kOuterPart ? p : backward ? static_cast<int>(blocks_.size()) : -1;
  const bool grads = p == nn::kOuterPart ? pass != nn::StreamPass::eval : backward;
  if (resident_[slot_of(p)]) {  // --optimizer-split: its tensors stay; the gradients are zeroed as a slot's
    if (grads && micro_ == 0)
      for (nn::Parameter* q : part(p).resident) ops::zero_(q->grad);
  } else {
    fetch(p);
    attach(p, grads);
  }
  // The next streamed blocks on, up to the depth ahead: their uploads overlap this part's compute.
  if (backward && p == nn::kOuterPart) return;  // the last part of a backward
  const int first = p == nn::kOuterPart ? 0 : backward ? p - 1 : p + 1;
  const int step = backward ? -1 : 1;
  for (int k = 0, next = first; k < depth_ && next >= 0 && next < static_cast<int>(blocks_.size()); next += step) {
    if (resident_[static_cast<size_t>(next)]) continue;
    fetch(next), ++k;
    if (backward && micro_ > 0 && !part(next).grads_up) upload_grads(next);  // behind its values
  }
}

void ParamStreamer::done(int p, nn::StreamPass pass) {
  const bool backward = pass == nn::StreamPass::backward;
  const bool resident = resident_[slot_of(p)];
  const bool last = last_micro_batch();
  if (!resident) detach(p, backward, pass != nn::StreamPass::eval);
  if (backward && resident && last && micro_count_ > 1) {  // the device part's mean, as a slot's
    const float inv = static_cast<float>(1.0 / static_cast<double>(micro_count_));
    for (nn::Parameter* q : part(p).resident) ops::scale_(q->grad, inv);
  }
  // Accumulation: only the last micro-batch's backward queues the updates.
  if (backward && opt_ && !resident && last) {
    if (delay() && !write_chosen_) {  // the copy the step's updates write: not the one the last wrote
      write_ ^= 1;
      write_chosen_ = true;
    }
    // The part's update waits for its gradients; its next upload waits for the update. No
    // upload may still read the homes it rewrites: the part's last upload preceded its compute,
    // which its gradients' download (the event) follows.
    queue_update(p, buffers_of(p).free, shards_ ? &buffers_of(p).stage : nullptr);
  }
  if (p != nn::kOuterPart || pass == nn::StreamPass::forward) return;
  // The end of a step's backward or of an evaluation forward: the optimizer may rewrite the
  // homes next, so nothing may still read them and no buffer counts as holding them.
  if (backward && !opt_ && last) {
    profile::ScopedSpan span(profile::Stage::d2h, "gradients down: wait");
    up_.synchronize();
    down_.synchronize();
  }
  invalidate();
}

}  // namespace tandem::train
