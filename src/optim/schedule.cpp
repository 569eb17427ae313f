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

void check_schedule_name(const std::string& name) {
  TD_CHECK_ARG(name == "constant" || name == "step" || name == "cosine", "schedule",
               "unknown schedule '{}' (expected constant, step or cosine)", name);
}

std::unique_ptr<LrSchedule> make_schedule(const std::string& name, const ScheduleOptions& o) {
  check_schedule_name(name);
  if (name == "constant") return std::make_unique<ConstantSchedule>(o.lr);
  if (name == "step") return std::make_unique<StepSchedule>(o.lr, o.step_size, o.gamma);
  return std::make_unique<CosineSchedule>(o.lr, o.warmup_steps, o.total_steps, o.min_lr);
}

}  // namespace tandem::optim
