// DynamicBatcher: gathers concurrent /v1/predict requests into one inference batch and runs
// it on the InferenceReplica, on a thread of its own. A batch starts with the oldest waiting
// request and takes the following ones while it holds fewer than max_batch images, they were
// admitted with the same weights version, and max_delay has not passed since the first
// arrived. A request of more than max_batch images forms a batch of its own, run as
// consecutive chunks of at most max_batch images (the model never sees more at once).
// Requests are answered in arrival order; each with the version it was admitted with (the
// batcher never changes a request's snapshot; see weights_slot.h).
// Thread-safety: submit() from any thread; the destructor (on any thread but the batcher's)
// answers requests still queued with HttpError 503 and joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tandem/serve/metrics.h"
#include "tandem/serve/weights_slot.h"
#include "tandem/tensor.h"
#include "tandem/train/model_card.h"

namespace tandem::serve {

class InferenceReplica;

struct BatcherOptions {
  int64_t max_batch = 32;       // images per inference batch (--max-batch), >= 1
  double max_delay_ms = 2.0;    // how long the first request of a batch waits for others (--max-delay-ms), >= 0
  int64_t max_queue = 4096;     // requests waiting at most; more answer 503
  std::string device = "cpu";   // --serve-device: cpu, virt[:N][?...], cuda[:N]
  int threads = 1;              // compute threads of the batcher thread (--serve-threads), >= 1
};

/// One answered request: class probabilities f32 [N, K] (host) and the version that answered.
struct Prediction {
  Tensor probabilities;
  int64_t version = 0;
};

class DynamicBatcher {
 public:
  /// Starts the thread and builds the replica on it; rethrows its errors (a device this build
  /// lacks: Error(not_available) naming --serve-device).
  DynamicBatcher(const train::ModelCard& card, BatcherOptions options, ServeMetrics* metrics);
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  /// Queues `inputs` f32 [N, C, H, W] (host, N >= 1) for weights `w`. The future holds the
  /// prediction or the error (HttpError 503 when stopping; device errors as raised). Throws
  /// HttpError 503 when max_queue requests wait already.
  std::future<Prediction> submit(Tensor inputs, std::shared_ptr<const ServedWeights> w);
  /// The replica's stream, e.g. "own stream" (compute_stream.h); the device name.
  const std::string& describe() const { return describe_; }

 private:
  struct Job {
    Tensor inputs;
    std::shared_ptr<const ServedWeights> weights;
    std::promise<Prediction> done;
    std::chrono::steady_clock::time_point arrived;
  };
  void loop(const train::ModelCard& card, std::promise<std::string>& ready);
  Tensor run_in_chunks(InferenceReplica& replica, const Tensor& inputs, const ServedWeights& w);

  BatcherOptions opt_;
  ServeMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stop_ = false;
  std::string describe_;
  std::thread thread_;
};

}  // namespace tandem::serve
