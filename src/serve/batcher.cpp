#include "tandem/serve/batcher.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tandem/profile/profiler.h"
#include "tandem/serve/http_error.h"
#include "tandem/serve/inference_replica.h"
#include "train/run_builder.h"

namespace tandem::serve {

using Clock = std::chrono::steady_clock;

DynamicBatcher::DynamicBatcher(const train::ModelCard& card, BatcherOptions options, ServeMetrics* metrics)
    : opt_(std::move(options)), metrics_(metrics) {
  TD_CHECK_ARG(opt_.max_batch >= 1, "serve", "--max-batch: expected at least 1, got {}", opt_.max_batch);
  TD_CHECK_ARG(opt_.max_delay_ms >= 0 && opt_.max_delay_ms <= 10000, "serve",
               "--max-delay-ms: expected a value in [0, 10000], got {}", opt_.max_delay_ms);
  TD_CHECK_ARG(opt_.threads >= 1 && opt_.threads <= 1024, "serve", "--serve-threads: expected 1..1024, got {}",
               opt_.threads);
  std::promise<std::string> ready;
  std::future<std::string> started = ready.get_future();
  thread_ = std::thread([this, &card, &ready] { loop(card, ready); });
  try {
    describe_ = started.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

DynamicBatcher::~DynamicBatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::future<Prediction> DynamicBatcher::submit(Tensor inputs, std::shared_ptr<const ServedWeights> w) {
  Job job;
  job.inputs = std::move(inputs);
  job.weights = std::move(w);
  job.arrived = Clock::now();
  std::future<Prediction> f = job.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) throw HttpError(503, "the server is stopping");
    if (static_cast<int64_t>(queue_.size()) >= opt_.max_queue)
      throw HttpError(503, fmt::format("{} requests wait already: try again later", queue_.size()));
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return f;
}

namespace {

// The batch's inputs side by side: f32 [sum N, C, H, W].
Tensor concat(const std::vector<const Tensor*>& parts) {
  int64_t n = 0;
  for (const Tensor* t : parts) n += t->shape()[0];
  Shape shape = parts.front()->shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape);
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor* t : parts) {
    std::memcpy(dst, t->raw_data(), t->nbytes());
    dst += t->nbytes();
  }
  return out;
}

// Rows [begin, begin + n) of `t` [N, ...] as a tensor of their own.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t n) {
  Shape shape = t.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape);
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.shape()[0]);
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + static_cast<size_t>(begin) * row_bytes,
              static_cast<size_t>(n) * row_bytes);
  return out;
}

}  // namespace

// The model never sees more than max_batch images at once: a request of more (it forms a
// batch of its own) runs as consecutive chunks of at most max_batch, whose answers are put
// back together in order.
Tensor DynamicBatcher::run_in_chunks(InferenceReplica& replica, const Tensor& inputs, const ServedWeights& w) {
  const int64_t n = inputs.shape()[0];
  Tensor out;
  for (int64_t begin = 0; begin < n; begin += opt_.max_batch) {
    const int64_t m = std::min(opt_.max_batch, n - begin);
    const Tensor probs = replica.run(m == n ? inputs : rows_of(inputs, begin, m), w);
    if (metrics_) {
      metrics_->observe_batch(probs.shape()[0]);
      if (replica.loaded_last())
        metrics_->version_loaded(w.version, static_cast<double>(profile::now_ns() - w.published_ns) * 1e-9);
    }
    if (m == n) return probs;
    if (!out.defined()) out = Tensor::empty({n, probs.shape()[1]});
    const size_t row_bytes = probs.nbytes() / static_cast<size_t>(m);
    std::memcpy(static_cast<char*>(out.raw_data()) + static_cast<size_t>(begin) * row_bytes, probs.raw_data(),
                probs.nbytes());
  }
  return out;
}

void DynamicBatcher::loop(const train::ModelCard& card, std::promise<std::string>& ready) {
  profile::Profiler::global().name_this_thread("serve batcher");
  std::unique_ptr<InferenceReplica> replica;
  Device device;
  try {
    device = train::resolve_device(opt_.device, "serve", "--serve-device");
    replica = std::make_unique<InferenceReplica>(card, device, opt_.threads);
    ready.set_value(fmt::format("{} ({}, {} thread{})", device.str(), replica->stream_text(), opt_.threads,
                                opt_.threads == 1 ? "" : "s"));
  } catch (...) {
    ready.set_exception(std::current_exception());
    return;
  }
  const auto max_delay = std::chrono::duration<double, std::milli>(opt_.max_delay_ms);
  for (;;) {
    std::vector<Job> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      // Wait for company until the first request's deadline or a full batch.
      const auto deadline = queue_.front().arrived + std::chrono::duration_cast<Clock::duration>(max_delay);
      const ServedWeights* version = queue_.front().weights.get();
      auto images_of_same_version = [&] {
        int64_t n = 0;
        for (const Job& j : queue_) {
          if (j.weights.get() != version) return opt_.max_batch;  // a newer version closes the batch
          n += j.inputs.shape()[0];
        }
        return n;
      };
      while (!stop_ && images_of_same_version() < opt_.max_batch && Clock::now() < deadline)
        cv_.wait_until(lock, deadline);
      if (stop_) break;
      int64_t n = 0;
      while (!queue_.empty() && queue_.front().weights.get() == version &&
             (batch.empty() || n + queue_.front().inputs.shape()[0] <= opt_.max_batch)) {
        n += queue_.front().inputs.shape()[0];
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    std::vector<const Tensor*> parts;
    for (const Job& j : batch) parts.push_back(&j.inputs);
    const ServedWeights& w = *batch.front().weights;
    try {
      const Tensor inputs = parts.size() == 1 ? batch.front().inputs : concat(parts);
      const Tensor probs = run_in_chunks(*replica, inputs, w);
      int64_t row = 0;
      const int64_t k = probs.shape()[1];
      for (Job& j : batch) {
        const int64_t m = j.inputs.shape()[0];
        Prediction p;
        p.probabilities = Tensor::empty({m, k});
        std::memcpy(p.probabilities.raw_data(), probs.data<float>() + row * k, static_cast<size_t>(m * k) * sizeof(float));
        p.version = w.version;
        row += m;
        j.done.set_value(std::move(p));
      }
    } catch (...) {
      for (Job& j : batch) j.done.set_exception(std::current_exception());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Job& j : queue_) j.done.set_exception(std::make_exception_ptr(HttpError(503, "the server is stopping")));
  queue_.clear();
}

}  // namespace tandem::serve
