#include "tandem/data/prefetcher.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/pinned.h"
#include "tandem/profile/profiler.h"

namespace tandem::data {
namespace {

constexpr const char* kOp = "prefetcher";

// A flat buffer of at least `numel` elements on `device`; reallocated when too small.
// Returns true when it allocated.
bool ensure_capacity(Tensor& buf, int64_t numel, DType dtype, Device device) {
  if (buf.defined() && buf.numel() >= numel) return false;
  buf = Tensor::empty({numel}, dtype, device);
  return true;
}

// The first `like.numel()` elements of `buf`, shaped like `like`.
Tensor view_prefix(const Tensor& buf, const Tensor& like) {
  return buf.narrow(0, 0, like.numel()).view(like.shape());
}

// Field `i` of `b`, or Error(invalid_argument) naming the role.
const Tensor& field_at(const DeviceBatch& b, int i, const char* role) {
  TD_CHECK_ARG(i >= 0 && static_cast<size_t>(i) < b.fields.size(), kOp,
               "the batch holds no {} field ({} fields): expected a batch from next()", role, b.fields.size());
  return b.fields[static_cast<size_t>(i)];
}

}  // namespace

const Tensor& DeviceBatch::input() const { return field_at(*this, input_field, "input"); }
const Tensor& DeviceBatch::target() const { return field_at(*this, target_field, "target"); }

DevicePrefetcher::DevicePrefetcher(Loader& loader, Device device, PrefetcherOptions options)
    : loader_(loader), device_(device), depth_(options.prefetch_depth), lead_(options.host_lead) {
  TD_CHECK_ARG(depth_ >= 1, kOp, "prefetch_depth must be >= 1, found {}", depth_);
  TD_CHECK_ARG(lead_ >= 0 && lead_ <= kMaxHostLead, kOp, "host_lead must be in [0, {}], found {}", kMaxHostLead,
               lead_);
  Runtime& rt = runtime_for(device);
  compute_ = options.compute_stream ? options.compute_stream : rt.current_stream(device.index);
  if (options.copy_stream) {
    copy_ = options.copy_stream;
  } else {
    copy_ = rt.new_stream(device.index);
    copy_.set_label(loader_.name() + " h2d copies");  // "loader h2d copies", "eval loader h2d copies"
  }
  TD_CHECK_ARG(compute_.device() == device || device.is_host(), kOp,
               "compute_stream is on {}, expected {}", compute_.device().str(), device.str());
  TD_CHECK_ARG(copy_.device() == device || device.is_host(), kOp,
               "copy_stream is on {}, expected {}", copy_.device().str(), device.str());
  const int ring = depth_ + lead_ + 1;
  buffers_.resize(static_cast<size_t>(ring));
  for (int i = 0; i < ring; ++i) free_.push_back(i);
  loader_.set_consumer_slots(depth_ + lead_);  // one host slot per copy in flight, allocated now
}

DevicePrefetcher::~DevicePrefetcher() {
  try {
    drain();
  } catch (...) {
    // A failed copy has nothing left to protect: the slots are released below either way.
  }
  held_.clear();
}

void DevicePrefetcher::drain() {
  // The copies read the held host slots and write the device buffers: let them finish (the
  // copy stream only waits on compute-stream events, which always complete).
  for (Held& h : held_) h.copied.synchronize();
  held_.clear();
  for (Ready& r : ready_) free_.push_back(r.buffer);
  ready_.clear();
  if (current_ >= 0) {
    buffers_[static_cast<size_t>(current_)].consumed = compute_.record();
    free_.push_back(current_);
    current_ = -1;
  }
}

void DevicePrefetcher::begin_epoch(uint64_t epoch, int64_t first_batch) {
  drain();
  exhausted_ = false;
  loader_.begin_epoch(epoch, first_batch);
}

void DevicePrefetcher::set_prefetch_depth(int prefetch_depth) {
  TD_CHECK_ARG(prefetch_depth >= 1, kOp, "set_prefetch_depth: expected prefetch_depth >= 1, found {}",
               prefetch_depth);
  // A ring of depth + host_lead + 1 buffers: depth ready or being copied, one held by the
  // consumer, host_lead still in use by steps the compute stream has not run yet.
  const int ring = prefetch_depth + lead_ + 1;
  if (static_cast<int>(buffers_.size()) < ring) {
    // After reserve() the new buffers are allocated now, not at first use: they go to the
    // back of the free queue, so by the time a copy fills one the compute stream has passed
    // this event (the consumer runs at most host_lead steps ahead of it). Allocated at first
    // use, the copy would wait for all the compute work queued at that moment.
    const Event allocated = !reserved_.empty() ? compute_.record() : Event();
    const std::vector<data::Field>& fields = loader_.fields();
    while (static_cast<int>(buffers_.size()) < ring) {
      Buffer b;
      b.fields.resize(fields.size());
      if (!reserved_.empty()) {
        for (size_t f = 0; f < fields.size(); ++f) ensure_capacity(b.fields[f], reserved_[f], fields[f].dtype, device_);
        b.consumed = allocated;
      }
      buffers_.push_back(std::move(b));
      free_.push_back(static_cast<int>(buffers_.size()) - 1);
    }
  }
  depth_ = prefetch_depth;
  loader_.set_consumer_slots(depth_ + lead_);
}

void DevicePrefetcher::release_copied(bool wait_oldest) {
  if (wait_oldest && !held_.empty() && !held_.front().copied.query()) {
    profile::Profiler& p = profile::Profiler::global();
    const int64_t t0 = profile::now_ns();
    ++stats_.waits;
    // Only a copy whose buffer the compute stream has not released yet waits for compute.
    const bool blocked = !held_.front().released.query();
    if (blocked) held_.front().released.synchronize();
    const int64_t t1 = profile::now_ns();
    held_.front().copied.synchronize();
    const int64_t t2 = profile::now_ns();
    if (blocked) {
      stats_.compute_wait_seconds += static_cast<double>(t1 - t0) / 1e9;
      p.record(profile::Stage::wait_device, "wait for compute", t0, t1);
    }
    stats_.copy_wait_seconds += static_cast<double>(t2 - t1) / 1e9;
    p.record(profile::Stage::wait_device, "wait for copy", t1, t2);
  }
  // Copies run in order on the copy stream, so completed ones are a prefix.
  while (!held_.empty() && held_.front().copied.query()) held_.pop_front();
}

void DevicePrefetcher::reserve() {
  const int64_t b = loader_.max_batch_size();
  const std::vector<data::Field>& fields = loader_.fields();
  reserved_.clear();
  for (const data::Field& f : fields) reserved_.push_back(b * f.numel());
  try {
    for (Buffer& buf : buffers_) {
      buf.fields.resize(fields.size());
      for (size_t f = 0; f < fields.size(); ++f) ensure_capacity(buf.fields[f], reserved_[f], fields[f].dtype, device_);
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw_error(ErrorCode::out_of_memory, kOp,
                fmt::format("reserve: {} device buffers (prefetch_depth {} + host_lead {} + 1) of {} bytes each do "
                            "not fit on {}: {}",
                            buffers_.size(), depth_, lead_, b * static_cast<int64_t>(sample_bytes(fields)),
                            device_.str(), e.what()));
  }
  // Fresh memory may be memory that queued compute work still uses: let that work finish now,
  // so that the buffers' `consumed` events (never recorded) count as complete.
  compute_.synchronize();
  for (Buffer& buf : buffers_) buf.consumed = Event();
}

void DevicePrefetcher::issue(Batch&& host, int buffer) {
  Buffer& buf = buffers_[static_cast<size_t>(buffer)];
  const size_t nf = host.fields.size();
  buf.fields.resize(nf);
  bool grown = false;
  for (size_t f = 0; f < nf; ++f)
    grown = ensure_capacity(buf.fields[f], host.fields[f].numel(), host.fields[f].dtype(), device_) || grown;
  // A fresh allocation may reuse memory that work on the compute stream still touches.
  if (grown) buf.consumed = compute_.record();  // later than buf.consumed on the same stream
  const Event released = buf.consumed;
  copy_.wait(released);

  DeviceBatch d;
  d.index = host.index;
  d.epoch = host.epoch;
  d.input_field = loader_.input_field();
  d.target_field = loader_.target_field();
  Runtime& rt = runtime_for(device_.is_host() ? Device{} : device_);
  for (size_t f = 0; f < nf; ++f) {
    const Tensor& h = host.fields[f];
    d.fields.push_back(view_prefix(buf.fields[f], h));
    rt.copy_async(d.fields[f].raw_data(), device_, h.raw_data(), h.device(), h.nbytes(), copy_);
  }
  d.ready = copy_.record();
  for (const Tensor& t : d.fields) t.storage()->set_pending_write(d.ready);
  for (const Tensor& t : host.fields)
    if (pinned_allocator().owns(t.storage()->data())) record_pinned_use(t, d.ready);
  held_.push_back({std::move(host), d.ready, released});
  ready_.push_back({buffer, std::move(d)});
}

bool DevicePrefetcher::next(DeviceBatch& batch) {
  batch = DeviceBatch();
  if (current_ >= 0) {
    // Everything the consumer enqueued for the previous batch comes before this event.
    buffers_[static_cast<size_t>(current_)].consumed = compute_.record();
    free_.push_back(current_);
    current_ = -1;
  }
  release_copied(false);
  while (!exhausted_ && static_cast<int>(ready_.size()) < depth_) {
    while (static_cast<int>(held_.size()) >= depth_ + lead_) release_copied(true);
    Batch host;
    if (!loader_.next(host)) {
      exhausted_ = true;
      break;
    }
    TD_ASSERT(!free_.empty());
    const int buffer = free_.front();
    free_.pop_front();
    try {
      issue(std::move(host), buffer);
    } catch (...) {
      free_.push_front(buffer);  // e.g. the device could not hold the buffer: keep the ring whole
      throw;
    }
  }
  if (ready_.empty()) return false;
  Ready r = std::move(ready_.front());
  ready_.pop_front();
  compute_.wait(r.batch.ready);
  ++stats_.batches;
  current_ = r.buffer;
  batch = std::move(r.batch);
  return true;
}

}  // namespace tandem::data
