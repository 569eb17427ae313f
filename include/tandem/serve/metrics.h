// ServeMetrics: the service's counters and the training run's gauges, rendered in the
// Prometheus text exposition format 0.0.4 (prometheus.io/docs/instrumenting/exposition_formats):
//   tandem_serve_requests_total{path}              counter, requests answered per endpoint
//   tandem_serve_errors_total{status}              counter, error answers per HTTP status
//   tandem_serve_request_duration_seconds          histogram of /v1/predict latency, seconds
//   tandem_serve_batch_size                        histogram of images per inference batch
//   tandem_serve_completion_tokens_total           counter, tokens made by /v1/completions
//   tandem_serve_completions_cancelled_total       counter, completions stopped early because
//                                                  their client went away mid-stream
//   tandem_serve_model_version                     gauge, the version answering now
//   tandem_serve_swaps_total                       counter, versions loaded by the replica
//   tandem_serve_publish_to_first_answer_seconds   gauge, for the latest version loaded (and
//                                                  _max_seconds: the longest of any version)
//   tandem_serve_online_buffer_samples / _capacity, tandem_serve_online_mix   gauges
//   tandem_train_step, _loss, _accuracy, _images_per_second, _data_wait_share, _test_accuracy,
//   tandem_train_pinned_pool_bytes, tandem_train_device_pool_bytes            gauges (train --serve)
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tandem::serve {

/// The training run's latest figures (tandem train --serve); NaN or -1 fields are left out.
struct TrainingGauges {
  int64_t step = -1;               // global step
  double loss = -1, accuracy = -1;  // of the last read-back window; accuracy in [0, 1]
  double images_per_s = -1, data_wait_share = -1, test_accuracy = -1;
  int64_t pinned_pool_bytes = -1, device_pool_bytes = -1;
};

/// A cumulative histogram with fixed upper bounds (le), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  /// Lines `<name>_bucket{le="..."} n`, `<name>_sum`, `<name>_count`.
  std::string render(const std::string& name) const;
  /// The q-quantile (0..1) by linear interpolation within a bucket (as histogram_quantile).
  double quantile(double q) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class ServeMetrics {
 public:
  ServeMetrics();
  void count_request(const std::string& path);
  void count_error(int status);
  void observe_latency(double seconds);
  void observe_batch(int64_t images);
  /// A completion answered: the tokens its choices made, and whether its client went away.
  void count_completion(int64_t tokens, bool cancelled);
  void set_version(int64_t version);
  void version_loaded(int64_t version, double publish_to_answer_s);
  void set_online(int64_t samples, int64_t capacity, double mix);
  void set_training(const TrainingGauges& g);
  /// The exposition text (ends with a newline).
  std::string render() const;
  int64_t errors(int status) const;
  int64_t requests(const std::string& path) const;
  double last_publish_to_answer_s() const;
  /// The longest publish-to-first-answer time of any version loaded, seconds (-1: none yet).
  double max_publish_to_answer_s() const;
  /// Versions loaded by the replica.
  int64_t swaps() const;
  /// Tokens made by completions so far, and completions cancelled (count_completion).
  struct CompletionCounts {
    int64_t tokens = 0, cancelled = 0;
  };
  CompletionCounts completions() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> requests_;
  std::map<int, int64_t> errors_;
  Histogram latency_, batch_;
  int64_t version_ = -1, swaps_ = 0;
  CompletionCounts completions_;
  double publish_to_answer_s_ = -1, max_publish_to_answer_s_ = -1;
  int64_t online_samples_ = -1, online_capacity_ = -1;
  double online_mix_ = 0;
  TrainingGauges training_;
};

}  // namespace tandem::serve
