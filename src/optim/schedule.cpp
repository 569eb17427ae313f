#include "tandem/optim/schedule.h"

#include <cmath>
#include <numbers>

#include "tandem/error.h"

namespace tandem::optim {
namespace {

void check_step(int64_t step) {
  TD_CHECK_ARG(step >= 0, "schedule", "step must be >= 0, got {}", step);
}

}  // namespace

ConstantSchedule::ConstantSchedule(double lr) : lr_(lr) {
  TD_CHECK_ARG(lr >= 0, "schedule", "constant: lr must be >= 0, got {}", lr);
}

double ConstantSchedule::lr(int64_t step) const {
  check_step(step);
  return lr_;
}

StepSchedule::StepSchedule(double lr, int64_t step_size, double gamma)
    : lr_(lr), step_size_(step_size), gamma_(gamma) {
  TD_CHECK_ARG(lr >= 0, "schedule", "step: lr must be >= 0, got {}", lr);
  TD_CHECK_ARG(step_size >= 1, "schedule", "step: step_size must be >= 1, got {}", step_size);
  TD_CHECK_ARG(gamma >= 0, "schedule", "step: gamma must be >= 0, got {}", gamma);
}

double StepSchedule::lr(int64_t step) const {
  check_step(step);
  return lr_ * std::pow(gamma_, static_cast<double>(step / step_size_));
}

CosineSchedule::CosineSchedule(double lr, int64_t warmup_steps, int64_t total_steps,
                               double min_lr)
    : lr_(lr), warmup_steps_(warmup_steps), total_steps_(total_steps), min_lr_(min_lr) {
  TD_CHECK_ARG(lr >= 0 && min_lr >= 0 && min_lr <= lr, "schedule",
               "cosine: expected 0 <= min_lr <= lr, got min_lr {} and lr {}", min_lr, lr);
  TD_CHECK_ARG(warmup_steps >= 0, "schedule", "cosine: warmup_steps must be >= 0, got {}",
               warmup_steps);
  TD_CHECK_ARG(total_steps > warmup_steps, "schedule",
               "cosine: total_steps must exceed warmup_steps ({}), got {}", warmup_steps,
               total_steps);
}

double CosineSchedule::lr(int64_t step) const {
  check_step(step);
  if (step < warmup_steps_)
    return lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
  if (step >= total_steps_) return min_lr_;
  const double t = static_cast<double>(step - warmup_steps_);
  const double period = static_cast<double>(total_steps_ - warmup_steps_);
  return min_lr_ + (lr_ - min_lr_) * (1.0 + std::cos(std::numbers::pi * t / period)) / 2.0;
}

OneCycleSchedule::OneCycleSchedule(double lr, int64_t total_steps, double pct_start)
    : max_lr_(lr), initial_lr_(lr / 25.0), min_lr_(lr / 25.0 / 1e4),
      rise_end_(pct_start * static_cast<double>(total_steps) - 1.0), total_steps_(total_steps) {
  TD_CHECK_ARG(lr >= 0, "schedule", "one-cycle: lr must be >= 0, got {}", lr);
  TD_CHECK_ARG(pct_start > 0 && pct_start < 1, "schedule", "one-cycle: pct_start must be in (0, 1), got {}",
               pct_start);
  TD_CHECK_ARG(total_steps >= 2, "schedule", "one-cycle: total_steps must be >= 2, got {}", total_steps);
}

double OneCycleSchedule::lr(int64_t step) const {
  check_step(step);
  auto anneal = [](double a, double b, double t) { return b + (a - b) * (1.0 + std::cos(std::numbers::pi * t)) / 2.0; };
  const double s = static_cast<double>(step), last = static_cast<double>(total_steps_ - 1);
  if (s >= last) return min_lr_;
  if (s <= rise_end_) return rise_end_ > 0 ? anneal(initial_lr_, max_lr_, s / rise_end_) : max_lr_;
  return anneal(max_lr_, min_lr_, (s - rise_end_) / (last - rise_end_));
}

void check_schedule_name(const std::string& name) {
  TD_CHECK_ARG(name == "constant" || name == "step" || name == "cosine" || name == "one-cycle", "schedule",
               "unknown schedule '{}' (expected constant, step, cosine or one-cycle)", name);
}

std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleOptions& o) {
  check_schedule_name(name);
  if (name == "constant") return std::make_unique<ConstantSchedule>(o.lr);
  if (name == "step") return std::make_unique<StepSchedule>(o.lr, o.step_size, o.gamma);
  if (name == "one-cycle") return std::make_unique<OneCycleSchedule>(o.lr, o.total_steps, o.pct_start);
  return std::make_unique<CosineSchedule>(o.lr, o.warmup_steps, o.total_steps, o.min_lr);
}

}  // namespace tandem::optim
