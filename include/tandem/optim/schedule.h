// Learning-rate schedules as pure functions of the step: lr(step) is the learning rate for
// the optimizer update with 0-based index `step` (set it with Optimizer::set_lr before the
// step). Being pure, a schedule needs no state in checkpoints beyond the step count, and a
// skipped update (e.g. an fp16 overflow) simply does not advance the step.
// Thread-safety: lr() is const and may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tandem::optim {

struct ScheduleOptions {
  double lr = 1e-3;          // base learning rate
  int64_t step_size = 1;     // step: decay every step_size steps
  double gamma = 0.1;        // step: multiplicative factor
  int64_t warmup_steps = 0;  // cosine: linear warmup length
  int64_t total_steps = 0;   // cosine: warmup + annealing length (> warmup_steps)
  double min_lr = 0.0;       // cosine: final learning rate
  double pct_start = 0.3;    // one-cycle: share of total_steps spent rising to lr
};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  /// Learning rate for 0-based step `step` (>= 0; throws Error(invalid_argument) if negative).
  virtual double lr(int64_t step) const = 0;
  /// "constant", "step", "cosine" or "one-cycle".
  virtual const char* name() const = 0;
};

/// lr(step) = lr.
class ConstantSchedule : public LrSchedule {
 public:
  /// Throws Error(invalid_argument) for lr < 0.
  explicit ConstantSchedule(double lr);
  double lr(int64_t step) const override;
  const char* name() const override { return "constant"; }

 private:
  double lr_;
};

/// lr(step) = lr * gamma^floor(step / step_size)   (torch.optim.lr_scheduler.StepLR).
class StepSchedule : public LrSchedule {
 public:
  /// Throws Error(invalid_argument) for lr < 0, step_size < 1 or gamma < 0.
  StepSchedule(double lr, int64_t step_size, double gamma);
  double lr(int64_t step) const override;
  const char* name() const override { return "step"; }

 private:
  double lr_;
  int64_t step_size_;
  double gamma_;
};

/// Linear warmup then cosine annealing:
///   step < W:      lr * (step + 1) / W
///   W <= step < T: min_lr + (lr - min_lr) * (1 + cos(pi * (step - W) / (T - W))) / 2
///   step >= T:     min_lr
/// with W = warmup_steps, T = total_steps. The annealing part is the closed form of
/// torch.optim.lr_scheduler.CosineAnnealingLR (T_max = T - W, eta_min = min_lr), held at
/// min_lr afterwards instead of rising again.
class CosineSchedule : public LrSchedule {
 public:
  /// Throws Error(invalid_argument) for lr < 0, min_lr < 0, min_lr > lr, warmup_steps < 0 or
  /// total_steps <= warmup_steps.
  CosineSchedule(double lr, int64_t warmup_steps, int64_t total_steps, double min_lr = 0.0);
  double lr(int64_t step) const override;
  const char* name() const override { return "cosine"; }

 private:
  double lr_;
  int64_t warmup_steps_;
  int64_t total_steps_;
  double min_lr_;
};

/// One-cycle (Smith & Topin 2017; torch.optim.lr_scheduler.OneCycleLR with its defaults
/// anneal_strategy="cos", div_factor=25, final_div_factor=1e4, three_phase=False, no momentum
/// cycling): with T = total_steps, E = pct_start * T - 1, lr0 = lr / 25, lr_min = lr0 / 1e4 and
/// cos_anneal(a, b, t) = b + (a - b) * (1 + cos(pi * t)) / 2:
///   step <= E:     cos_anneal(lr0, lr, step / E)
///   E < step < T:  cos_anneal(lr, lr_min, (step - E) / (T - 1 - E))
///   step >= T - 1: lr_min
class OneCycleSchedule : public LrSchedule {
 public:
  /// Throws Error(invalid_argument) for lr < 0, pct_start outside (0, 1) or total_steps < 2.
  OneCycleSchedule(double lr, int64_t total_steps, double pct_start = 0.3);
  double lr(int64_t step) const override;
  const char* name() const override { return "one-cycle"; }

 private:
  double max_lr_, initial_lr_, min_lr_;
  double rise_end_;  // E
  int64_t total_steps_;
};

/// Builds "constant", "step", "cosine" or "one-cycle" from the fields of `options` that schedule reads.
/// Throws Error(invalid_argument, "[schedule] unknown schedule 'x' (expected constant, step,
/// cosine or one-cycle)") for other names, and the schedule's errors for bad options.
std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleOptions& options);
/// Throws the unknown-schedule error make_schedule throws unless `name` is one it builds.
void check_schedule_name(const std::string& name);

}  // namespace tandem::optim
