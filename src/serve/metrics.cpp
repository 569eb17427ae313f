#include "tandem/serve/metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tandem::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

std::string Histogram::render(const std::string& name) const {
  std::string out;
  int64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
  return out;
}

double Histogram::quantile(double q) const {
  if (count_ == 0) return NAN;
  const double rank = q * static_cast<double>(count_);
  int64_t cum = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (static_cast<double>(cum + counts_[i]) >= rank) {
      if (i == bounds_.size()) return bounds_.back();
      const double lo = i == 0 ? 0 : bounds_[i - 1];
      const double in = counts_[i] ? (rank - static_cast<double>(cum)) / static_cast<double>(counts_[i]) : 0;
      return lo + (bounds_[i] - lo) * in;
    }
    cum += counts_[i];
  }
  return bounds_.back();
}

ServeMetrics::ServeMetrics()
    : latency_({0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10}),
      batch_({1, 2, 4, 8, 16, 32, 64, 128, 256, 512}) {}

void ServeMetrics::count_request(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[path];
}

void ServeMetrics::count_error(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++errors_[status];
}

void ServeMetrics::observe_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  latency_.observe(seconds);
}

void ServeMetrics::observe_batch(int64_t images) {
  std::lock_guard<std::mutex> lock(mu_);
  batch_.observe(static_cast<double>(images));
}

void ServeMetrics::count_completion(int64_t tokens, bool cancelled) {
  std::lock_guard<std::mutex> lock(mu_);
  completions_.tokens += tokens;
  completions_.cancelled += cancelled ? 1 : 0;
}

ServeMetrics::CompletionCounts ServeMetrics::completions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completions_;
}

void ServeMetrics::set_version(int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  version_ = version;
}

void ServeMetrics::version_loaded(int64_t version, double publish_to_answer_s) {
  std::lock_guard<std::mutex> lock(mu_);
  version_ = version;
  ++swaps_;
  publish_to_answer_s_ = publish_to_answer_s;
  max_publish_to_answer_s_ = std::max(max_publish_to_answer_s_, publish_to_answer_s);
}

double ServeMetrics::max_publish_to_answer_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_publish_to_answer_s_;
}

int64_t ServeMetrics::swaps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return swaps_;
}

void ServeMetrics::set_online(int64_t samples, int64_t capacity, double mix) {
  std::lock_guard<std::mutex> lock(mu_);
  online_samples_ = samples;
  online_capacity_ = capacity;
  online_mix_ = mix;
}

void ServeMetrics::set_training(const TrainingGauges& g) {
  std::lock_guard<std::mutex> lock(mu_);
  training_ = g;
}

int64_t ServeMetrics::errors(int status) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = errors_.find(status);
  return it == errors_.end() ? 0 : it->second;
}

int64_t ServeMetrics::requests(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = requests_.find(path);
  return it == requests_.end() ? 0 : it->second;
}

double ServeMetrics::last_publish_to_answer_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return publish_to_answer_s_;
}

namespace {

void gauge(std::string& out, const char* name, const char* help, double v) {
  if (!std::isfinite(v) || v < 0) return;
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
}

}  // namespace

std::string ServeMetrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "# HELP tandem_serve_requests_total Requests answered, by endpoint.\n"
                    "# TYPE tandem_serve_requests_total counter\n";
  for (const auto& [path, n] : requests_) out += fmt::format("tandem_serve_requests_total{{path=\"{}\"}} {}\n", path, n);
  out += "# HELP tandem_serve_errors_total Error answers, by HTTP status.\n# TYPE tandem_serve_errors_total counter\n";
  for (const auto& [status, n] : errors_) out += fmt::format("tandem_serve_errors_total{{status=\"{}\"}} {}\n", status, n);
  out += "# HELP tandem_serve_request_duration_seconds Latency of /v1/predict, seconds.\n"
         "# TYPE tandem_serve_request_duration_seconds histogram\n";
  out += latency_.render("tandem_serve_request_duration_seconds");
  out += "# HELP tandem_serve_batch_size Images per inference batch.\n# TYPE tandem_serve_batch_size histogram\n";
  out += batch_.render("tandem_serve_batch_size");
  out += fmt::format(
      "# HELP tandem_serve_completion_tokens_total Tokens made by /v1/completions.\n"
      "# TYPE tandem_serve_completion_tokens_total counter\ntandem_serve_completion_tokens_total "
      "{}\n",
      completions_.tokens);
  out += fmt::format(
      "# HELP tandem_serve_completions_cancelled_total Completions stopped because their client "
      "went away.\n# TYPE tandem_serve_completions_cancelled_total counter\n"
      "tandem_serve_completions_cancelled_total {}\n",
      completions_.cancelled);
  out += fmt::format("# HELP tandem_serve_model_version The version (training step) answering now.\n"
                     "# TYPE tandem_serve_model_version gauge\ntandem_serve_model_version {}\n", version_);
  out += fmt::format("# HELP tandem_serve_swaps_total Versions loaded by the inference replica.\n"
                     "# TYPE tandem_serve_swaps_total counter\ntandem_serve_swaps_total {}\n", swaps_);
  gauge(out, "tandem_serve_publish_to_first_answer_seconds",
        "Seconds from the latest version's publish to its first answer.", publish_to_answer_s_);
  gauge(out, "tandem_serve_publish_to_first_answer_max_seconds",
        "The longest time from a version's publish to its first answer, seconds.", max_publish_to_answer_s_);
  gauge(out, "tandem_serve_online_buffer_samples", "Samples in the online buffer.", static_cast<double>(online_samples_));
  gauge(out, "tandem_serve_online_buffer_capacity", "Capacity of the online buffer.",
        static_cast<double>(online_capacity_));
  if (online_capacity_ >= 0) gauge(out, "tandem_serve_online_mix", "Share of each training batch from the buffer.", online_mix_);
  const TrainingGauges& t = training_;
  gauge(out, "tandem_train_step", "Training steps done.", static_cast<double>(t.step));
  gauge(out, "tandem_train_loss", "Mean loss of the last read-back window.", t.loss);
  gauge(out, "tandem_train_accuracy", "Training accuracy of the last read-back window.", t.accuracy);
  gauge(out, "tandem_train_images_per_second", "Training images per second.", t.images_per_s);
  gauge(out, "tandem_train_data_wait_share", "Share of time the training thread waited for data.", t.data_wait_share);
  gauge(out, "tandem_train_test_accuracy", "Test accuracy of the last evaluation.", t.test_accuracy);
  gauge(out, "tandem_train_pinned_pool_bytes", "Pinned host pool reserved bytes.", static_cast<double>(t.pinned_pool_bytes));
  gauge(out, "tandem_train_device_pool_bytes", "Device pool reserved bytes.", static_cast<double>(t.device_pool_bytes));
  return out;
}

}  // namespace tandem::serve
