#include "train/split/split_balancer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tandem/error.h"
#include "train/split/split_plan.h"

namespace tandem::train {

SplitBalancer::SplitBalancer(std::vector<int64_t> initial, BalancerOptions options)
    : parts_(std::move(initial)), rate_(parts_.size(), 0.0), recent_(parts_.size()), options_(options) {
  TD_CHECK_ARG(!parts_.empty(), "split", "expected at least one device");
  for (int64_t p : parts_) TD_CHECK_ARG(p >= 1, "split", "every part needs at least one sample, got {}", p);
  TD_CHECK_ARG(options_.window >= 1, "split", "window must be >= 1, got {}", options_.window);
  TD_CHECK_ARG(options_.hysteresis >= 0 && options_.hysteresis < 1, "split", "hysteresis must be in [0, 1), got {}",
               options_.hysteresis);
  batch_ = std::accumulate(parts_.begin(), parts_.end(), int64_t{0});
}

// The predicted step time of `parts`: the slowest device's.
static double makespan(const std::vector<int64_t>& parts, const std::vector<double>& rate) {
  double m = 0;
  for (size_t d = 0; d < parts.size(); ++d) m = std::max(m, static_cast<double>(parts[d]) * rate[d]);
  return m;
}

bool SplitBalancer::observe(const std::vector<int64_t>& samples, const std::vector<double>& seconds) {
  TD_CHECK_ARG(samples.size() == parts_.size() && seconds.size() == parts_.size(), "split",
               "expected figures of {} devices, got {} and {}", parts_.size(), samples.size(), seconds.size());
  for (size_t d = 0; d < parts_.size(); ++d) {
    if (samples[d] <= 0 || !std::isfinite(seconds[d]) || seconds[d] <= 0) continue;
    std::vector<double>& recent = recent_[d];
    recent.push_back(seconds[d] / static_cast<double>(samples[d]));
    if (recent.size() > static_cast<size_t>(options_.window)) recent.erase(recent.begin());
    std::vector<double> sorted = recent;
    std::sort(sorted.begin(), sorted.end());
    const size_t m = sorted.size() / 2;
    rate_[d] = sorted.size() % 2 ? sorted[m] : 0.5 * (sorted[m - 1] + sorted[m]);
  }
  if (std::any_of(rate_.begin(), rate_.end(), [](double r) { return r <= 0; })) return false;
  std::vector<double> speed(rate_.size());
  for (size_t d = 0; d < rate_.size(); ++d) speed[d] = 1.0 / rate_[d];
  std::vector<int64_t> proposal = partition_at_least_one(batch_, speed);
  if (proposal == parts_) return false;
  if (makespan(proposal, rate_) >= makespan(parts_, rate_) * (1 - options_.hysteresis)) return false;
  parts_ = std::move(proposal);
  ++moves_;
  return true;
}

}  // namespace tandem::train
