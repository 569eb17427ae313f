// SplitBalancer: the policy of --split auto. It keeps, per device, a smoothed time per sample
// and moves the step's parts so that every device finishes its part at the same time.
//
// Each observed step gives, per device d, the samples n_d it ran and the seconds t_d its
// compute stream was busy with them (forward, loss and backward). The estimate of seconds
// per sample r_d is the median of t_d / n_d over the last `window` observations (a median,
// not a mean: one step delayed by the host or the machine's load moves it not at all, while a
// real change of speed wins after window / 2 + 1 steps). The proposal gives device d a
// share proportional to its speed 1 / r_d (largest remainder, at least one sample each). It
// replaces the current parts only when the predicted step time max_d(p_d * r_d) is shorter
// than that of the current parts by more than `hysteresis` (a fraction), so measurement noise
// does not make the split oscillate, while a real change of speed moves it within a few steps.
// The policy is a pure function of the observations: no clock, no device (tests feed it
// modelled times).
// Thread-safety: one thread.
#pragma once

#include <cstdint>
#include <cstddef>
#include <vector>

namespace tandem::train {

struct BalancerOptions {
  int window = 5;            // observations the median is taken over, >= 1
  double hysteresis = 0.04;  // predicted gain needed to move the parts, [0, 1)
};

class SplitBalancer {
 public:
  /// `initial`: the parts of the first steps (each >= 1), their sum is the batch. Throws
  /// Error(invalid_argument) for an empty list, a part < 1 or out-of-range options.
  explicit SplitBalancer(std::vector<int64_t> initial, BalancerOptions options = {});
  /// The parts for the next step (sum = batch, each >= 1).
  const std::vector<int64_t>& parts() const { return parts_; }
  /// Takes one step's figures (one entry per device: samples > 0, busy seconds >= 0; a
  /// non-finite or non-positive time is ignored). Returns true when the parts changed.
  bool observe(const std::vector<int64_t>& samples, const std::vector<double>& seconds);
  /// The estimated seconds per sample of each device (0 before its first observation).
  const std::vector<double>& seconds_per_sample() const { return rate_; }
  /// How many times the parts moved.
  int64_t moves() const { return moves_; }

 private:
  std::vector<int64_t> parts_;
  std::vector<double> rate_;
  std::vector<std::vector<double>> recent_;  // per device, the last `window` observations
  BalancerOptions options_;
  int64_t batch_ = 0, moves_ = 0;
};

}  // namespace tandem::train
