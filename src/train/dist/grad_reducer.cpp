#include "train/dist/grad_reducer.h"
#include "tandem/device_traits.h"

#include <algorithm>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"
#include "tandem/profile/stream_span.h"
#include "train/dist/comm_timeline.h"

namespace tandem::train {

namespace prof = tandem::profile;

std::vector<optim::OffloadBucket> plan_ddp_buckets(const std::vector<int64_t>& numels, size_t cap_bytes,
                                                   size_t first_cap_bytes) {
  TD_CHECK_ARG(cap_bytes > 0 && first_cap_bytes > 0, "train", "bucket cap: expected > 0 bytes, got {} and {}",
               cap_bytes, first_cap_bytes);
  std::vector<optim::OffloadBucket> out;
  optim::OffloadBucket cur;
  size_t bytes = 0;
  int64_t at = 0;
  for (size_t j = numels.size(); j-- > 0;) {
    TD_CHECK_ARG(numels[j] >= 0, "train", "parameter {}: expected numel >= 0, got {}", j, numels[j]);
    cur.params.push_back(j);
    at += numels[j];
    bytes += static_cast<size_t>(numels[j]) * 4;
    if (bytes >= (out.empty() ? first_cap_bytes : cap_bytes)) {
      cur.end = at;
      out.push_back(std::move(cur));
      cur = {};
      cur.begin = at;
      bytes = 0;
    }
  }
  if (!cur.params.empty()) {
    cur.end = at;
    out.push_back(std::move(cur));
  }
  return out;
}

// Times recorded by stream items: each bucket's stamps on the comm stream (comm_timeline.h)
// and the moment backward ended on the compute stream.
struct GradReducer::Times {
  std::mutex mu;
  std::vector<BucketStamps> spans;  // this step
  int64_t backward_end = 0;
  CommFigures total;
  double step_bytes = 0;
  bool inline_streams = false;

  // Folds the step's stamps in: the communication before backward's end counts as hidden.
  void close_step() {
    std::lock_guard<std::mutex> lock(mu);
    const StepOverlap o = step_overlap(spans, backward_end);
    total.seconds += o.comm_seconds;
    if (!inline_streams) total.hidden_seconds += o.hidden_seconds;
    total.skew_seconds += o.skew_seconds;
    spans.clear();
    ++total.steps;
    total.bytes += step_bytes;
    step_bytes = 0;
  }
};

GradReducer::GradReducer(comm::CommunicatorPtr comm, nn::Module& model, const std::vector<nn::Parameter*>& params,
                         Device device, double bucket_cap_mb, std::unique_ptr<GradCompressor> compressor,
                         bool hook)
    : comm_(std::move(comm)), model_(model), device_(device), times_(std::make_shared<Times>()),
      compressor_(std::move(compressor)) {
  TD_CHECK_ARG(bucket_cap_mb > 0, "train", "--bucket-cap-mb: expected a value > 0, got {}", bucket_cap_mb);
  std::vector<int64_t> numels;
  for (nn::Parameter* p : params) {
    if (!p->requires_grad || !p->grad.defined()) continue;
    params_.push_back(p);
    numels.push_back(p->value.numel());
    const Device d = p->grad.device();
    if (!(d == device_) && std::find(others_.begin(), others_.end(), d) == others_.end()) others_.push_back(d);
  }
  buckets_ = plan_ddp_buckets(numels, optim::bucket_cap_bytes(bucket_cap_mb),
                              optim::bucket_cap_bytes(std::min(1.0, bucket_cap_mb)));
  offset_.assign(params_.size(), 0);
  bucket_of_.assign(params_.size(), 0);
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const optim::OffloadBucket& b = buckets_[k];
    for (size_t i : b.params) {
      bucket_of_[i] = static_cast<int>(k);
      offset_[i] = 0;
    }
    int64_t off = 0;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (size_t i : b.params) {
      offset_[i] = off;
      ranges.emplace_back(off, params_[i]->value.numel());
      off += params_[i]->value.numel();
    }
    if (compressor_) compressor_->set_layout(static_cast<int>(k), std::move(ranges));
    flat_.push_back(Tensor::empty({off}, DType::f32, device_));
  }
  seen_.assign(params_.size(), 0);
  used_.assign(params_.size(), 1);
  left_.assign(buckets_.size(), 0);
  launched_.assign(buckets_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) ++left_[static_cast<size_t>(bucket_of_[i])];
  TD_CHECK_ARG(!compressor_ || host_addressable(device_), "train",
               "--grad-compression: compresses buffers in host-addressable memory (cpu, virt, "
               "--optimizer-device cpu); expected one of those with --device {}",
               device_.str());
  Runtime& rt = runtime_for(device_);
  comm_stream_ = rt.new_stream(device_.index);
  comm_stream_.set_label("all-reduce");
  times_->inline_streams = device_.is_host();
  if (hook) model_.set_grad_ready_hook([this](const std::vector<nn::Parameter*>& ps) { on_ready(ps); });
}

GradReducer::~GradReducer() {
  model_.set_grad_ready_hook({});
  try {
    comm_stream_.synchronize();
  } catch (...) {  // the error that stopped the run is the one reported
  }
}

void GradReducer::on_ready(const std::vector<nn::Parameter*>& ps) {
  if (hold_) return;  // an earlier micro-batch: its gradients stay on this rank
  for (const nn::Parameter* p : ps) {
    const auto it = std::find(params_.begin(), params_.end(), p);
    if (it == params_.end()) continue;
    const size_t i = static_cast<size_t>(it - params_.begin());
    if (seen_[i]) continue;
    seen_[i] = 1;
    if (!used_[i]) continue;  // not counted: it was unused last step
    const size_t k = static_cast<size_t>(bucket_of_[i]);
    if (--left_[k] == 0 && !launched_[k]) launch(k);
  }
}

void GradReducer::launch(size_t k) {
  launched_[k] = 1;
  Runtime& rt = runtime_for(device_);
  comm_stream_.wait(rt.current_stream(device_.index).record());
  for (const Device d : others_)  // a placed model's other devices (the cpu's ops ran already)
    if (!d.is_host()) comm_stream_.wait(runtime_for(d).current_stream(d.index).record());
  const Tensor& flat = flat_[k];
  auto* base = static_cast<char*>(flat.raw_data());
  const prof::TagScope tag(prof::Stage::comm, "all-reduce");  // the comm stream's items are no backward work
  const std::string track = device_.str() + " all-reduce";
  prof::StreamSpan span(comm_stream_, track, prof::Stage::comm, "all-reduce bucket");
  auto st = std::make_shared<BucketStamps>();
  comm_stream_.enqueue_host([st] { st->begin = prof::now_ns(); });
  for (size_t i : buckets_[k].params) {
    const nn::Parameter& p = *params_[i];
    rt.copy_async(base + offset_[i] * 4, device_, p.grad.raw_data(), p.grad.device(), p.grad.nbytes(), comm_stream_);
  }
  // Every rank at this bucket before the collective starts: the wait is skew, not communication.
  comm_stream_.enqueue_host([st] { st->joined = prof::now_ns(); });
  prof::StreamSpan wait(comm_stream_, track, prof::Stage::comm, "wait for the other ranks");
  comm_->barrier(comm_stream_);
  wait.end();
  comm_stream_.enqueue_host([st] { st->ready = prof::now_ns(); });
  size_t bytes = static_cast<size_t>(flat.nbytes());
  if (compressor_) {  // host-addressable buffers (checked at construction)
    auto sent = std::make_shared<size_t>(0);
    comm_stream_.enqueue_host([c = compressor_, comm = comm_, flat, k, sent] {
      *sent = c->reduce(*comm, static_cast<int>(k), static_cast<float*>(flat.raw_data()), flat.numel());
    });
    comm_stream_.enqueue_host([sent, t = times_] {
      std::lock_guard<std::mutex> lock(t->mu);
      t->step_bytes += static_cast<double>(*sent);
    });
    bytes = 0;
  } else {
    comm_->all_reduce(flat, comm::ReduceOp::mean, comm_stream_);
  }
  for (size_t i : buckets_[k].params) {
    const nn::Parameter& p = *params_[i];
    rt.copy_async(p.grad.raw_data(), p.grad.device(), base + offset_[i] * 4, device_, p.grad.nbytes(), comm_stream_);
  }
  comm_stream_.enqueue_host([st, bytes, t = times_] {
    std::lock_guard<std::mutex> lock(t->mu);
    st->end = prof::now_ns();
    t->spans.push_back(*st);
    t->step_bytes += static_cast<double>(bytes);
  });
  span.end();
}

void GradReducer::finish() {
  if (hold_) return;
  Runtime& rt = runtime_for(device_);
  const Stream compute = rt.current_stream(device_.index);
  compute.enqueue_host([t = times_] {
    std::lock_guard<std::mutex> lock(t->mu);
    t->backward_end = prof::now_ns();
  });
  for (size_t k = 0; k < buckets_.size(); ++k)
    if (!launched_[k]) launch(k);
  const Event reduced = comm_stream_.record();
  compute.wait(reduced);
  for (const Device d : others_) {  // their updates wait too (the cpu's run on this thread)
    if (d.is_host()) {
      reduced.synchronize();
    } else {
      runtime_for(d).current_stream(d.index).wait(reduced);
    }
  }
  compute.enqueue_host([t = times_] { t->close_step(); });
  // Parameters not reported this step are not waited for from the next one.
  std::fill(left_.begin(), left_.end(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (first_step_ || !seen_[i]) used_[i] = seen_[i];
    if (used_[i]) ++left_[static_cast<size_t>(bucket_of_[i])];
  }
  first_step_ = false;
  std::fill(seen_.begin(), seen_.end(), 0);
  std::fill(launched_.begin(), launched_.end(), 0);
}

CommFigures GradReducer::figures() {
  comm_stream_.synchronize();
  runtime_for(device_).current_stream(device_.index).synchronize();
  std::lock_guard<std::mutex> lock(times_->mu);
  return times_->total;
}

// A collective of the update thread that began at t0 (host clock) and just ended: a span in
// the trace and its time and bytes in the figures (`new_step`: the step's first bucket).
static void record_host_comm(CommFigures& figures, const char* what, int64_t t0, size_t bytes, bool new_step) {
  const int64_t t1 = prof::now_ns();
  prof::Profiler::global().record(prof::Stage::comm, what, t0, t1);
  figures.seconds += static_cast<double>(t1 - t0) * 1e-9;
  figures.bytes += static_cast<double>(bytes);
  if (new_step) ++figures.steps;
}

std::function<void(int, const Tensor&)> offload_grad_reduce(comm::CommunicatorPtr comm,
                                                            std::shared_ptr<CommFigures> figures,
                                                            std::shared_ptr<GradCompressor> compressor) {
  return [comm = std::move(comm), figures = std::move(figures), c = std::move(compressor)](int bucket,
                                                                                          const Tensor& grads) {
    const int64_t t0 = prof::now_ns();
    size_t bytes = grads.nbytes();
    if (c) {
      bytes = c->reduce(*comm, bucket, static_cast<float*>(grads.raw_data()), grads.numel());
    } else {
      comm->all_reduce(grads, comm::ReduceOp::mean, host_stream());
    }
    record_host_comm(*figures, "all-reduce bucket", t0, bytes, bucket == 0);
  };
}

void offload_zero_hooks(const comm::CommunicatorPtr& comm, std::shared_ptr<CommFigures> figures,
                        optim::OffloadOptions& off) {
  off.shard_rank = comm->rank();
  off.shard_world_size = comm->world_size();
  const Stream host = host_stream();
  off.reduce_scatter_grads = [comm, figures, host](int bucket, const Tensor& grads, const Tensor& block) {
    const int64_t t0 = prof::now_ns();
    comm->reduce_scatter(grads, block, comm::ReduceOp::mean, host);
    record_host_comm(*figures, "reduce-scatter bucket", t0, grads.nbytes(), bucket == 0);
  };
  off.all_gather_params = [comm, figures, host](int, const Tensor& block, const Tensor& params) {
    const int64_t t0 = prof::now_ns();
    comm->all_gather(block, params, host);
    record_host_comm(*figures, "all-gather bucket", t0, block.nbytes(), false);
  };
}

}  // namespace tandem::train
