// The input-pipeline autotuner (policy in tandem/data/autotune.h) and its driver.
#include "tandem/data/autotune.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "tandem/error.h"
#include "tandem/profile/profiler.h"

namespace tandem::data {
namespace {
constexpr const char* kOp = "autotune";
constexpr double kBusy = 0.8;      // workers busier than this are the input's throughput limit
constexpr double kSpareBusy = 0.7;  // one worker fewer must stay below this busy share
}  // namespace

const char* Autotuner::knob_name(Move m) {
  switch (m) {
    case Move::workers_up:
    case Move::workers_down: return "num_workers";
    case Move::factor_up: return "prefetch_factor";
    case Move::depth_up: return "prefetch_depth";
    case Move::none: break;
  }
  return "";
}

int Autotuner::knob_value(Move m, const PipelineKnobs& k) {
  switch (m) {
    case Move::workers_up:
    case Move::workers_down: return k.num_workers;
    case Move::factor_up: return k.prefetch_factor;
    case Move::depth_up: return k.prefetch_depth;
    case Move::none: break;
  }
  return 0;
}

Autotuner::Autotuner(PipelineKnobs start, AutotuneOptions options) : knobs_(start), options_(options) {
  TD_CHECK_ARG(start.num_workers >= (options.tune_workers ? 1 : 0), kOp,
               "expected num_workers >= {} to start from, found {}", options.tune_workers ? 1 : 0, start.num_workers);
  TD_CHECK_ARG(start.prefetch_factor >= 1, kOp, "expected prefetch_factor >= 1, found {}", start.prefetch_factor);
  TD_CHECK_ARG(start.prefetch_depth >= 0, kOp, "expected prefetch_depth >= 0, found {}", start.prefetch_depth);
  TD_CHECK_ARG(options.cpu_budget >= 1, kOp, "expected cpu_budget >= 1, found {}", options.cpu_budget);
  TD_CHECK_ARG(options.window_steps >= 1, kOp, "expected window_steps >= 1, found {}", options.window_steps);
  if (options_.tune_workers) knobs_.num_workers = std::min(knobs_.num_workers, options_.cpu_budget);
  transient_ = true;  // the first window fills the queues
  reason_ = "measuring";
}

Autotuner::Move Autotuner::choose(const StageWindow& w) const {
  const auto& o = options_;
  const double wait = w.data_wait_seconds / w.seconds;
  const double copy = w.copy_wait_seconds / w.seconds;
  const int nw = knobs_.num_workers;
  const double busy = w.loader_busy_seconds / (w.seconds * std::max(1, nw));
  const auto open = [&](Move m) { return !tried_[static_cast<int>(m)]; };
  if (wait > o.wait_threshold) {
    const bool more_workers = o.tune_workers && nw < o.cpu_budget && open(Move::workers_up);
    const bool deeper = o.tune_prefetch && knobs_.prefetch_factor < o.max_prefetch_factor && open(Move::factor_up);
    if (more_workers && busy >= kBusy) return Move::workers_up;
    if (deeper) return Move::factor_up;
    return more_workers ? Move::workers_up : Move::none;
  }
  if (copy > o.wait_threshold && o.tune_prefetch && knobs_.prefetch_depth > 0 &&
      knobs_.prefetch_depth < o.max_prefetch_depth && open(Move::depth_up))
    return Move::depth_up;
  if (o.tune_workers && nw > 1 && open(Move::workers_down) &&
      w.loader_busy_seconds / (w.seconds * (nw - 1)) < kSpareBusy)
    return Move::workers_down;
  return Move::none;
}

void Autotuner::begin_trial(Move move) {
  before_trial_ = knobs_;
  trial_ = move;
  transient_ = true;
  switch (move) {
    case Move::workers_up: ++knobs_.num_workers; break;
    case Move::workers_down: --knobs_.num_workers; break;
    case Move::factor_up: ++knobs_.prefetch_factor; break;
    case Move::depth_up: ++knobs_.prefetch_depth; break;
    case Move::none: break;
  }
}

PipelineKnobs Autotuner::update(const StageWindow& w) {
  steps_ += w.steps;
  if (settled_ || w.steps <= 0 || w.seconds <= 0) return knobs_;
  const double step = w.seconds / static_cast<double>(w.steps);
  if (transient_) {
    transient_ = false;
    return knobs_;
  }
  if (trial_ != Move::none) {
    const Move judged = std::exchange(trial_, Move::none);
    const bool down = judged == Move::workers_down;
    const bool keep = down ? step <= baseline_ * (1 + options_.min_gain) : step <= baseline_ * (1 - options_.min_gain);
    if (!keep) {
      reason_ = fmt::format("{} {} did not help ({:.2f} -> {:.2f} ms/step), back to {}", knob_name(judged),
                            knob_value(judged, knobs_), 1e3 * baseline_, 1e3 * step, knob_value(judged, before_trial_));
      tried_[static_cast<int>(judged)] = true;
      knobs_ = before_trial_;
      transient_ = true;  // re-measure the restored knobs before the next move
      if (steps_ + 3 * options_.window_steps > options_.settle_steps) settled_ = true;
      return knobs_;
    }
    // A direction that helped is not reversed later (no oscillation).
    if (judged == Move::workers_up) tried_[static_cast<int>(Move::workers_down)] = true;
    if (judged == Move::workers_down) tried_[static_cast<int>(Move::workers_up)] = true;
  }
  baseline_ = step;
  const double wait = w.data_wait_seconds / w.seconds, copy = w.copy_wait_seconds / w.seconds;
  const std::string state = wait > options_.wait_threshold   ? fmt::format("input-bound, {:.0f}% waiting for data", 100 * wait)
                            : copy > options_.wait_threshold ? fmt::format("copy-bound, {:.0f}% waiting for copies", 100 * copy)
                                                             : fmt::format("input keeps up, {:.0f}% waiting", 100 * wait);
  const Move move = steps_ + 2 * options_.window_steps > options_.settle_steps ? Move::none : choose(w);
  if (move == Move::none) {
    settled_ = true;
    reason_ = state;
    return knobs_;
  }
  begin_trial(move);
  reason_ = fmt::format("{}: trying {} {}", state, knob_name(move), knob_value(move, knobs_));
  return knobs_;
}

PipelineTuner::PipelineTuner(Loader& loader, DevicePrefetcher* prefetcher, AutotuneOptions options)
    : loader_(loader),
      prefetcher_(prefetcher),
      policy_(PipelineKnobs{loader.num_workers(), loader.prefetch_factor(),
                            prefetcher ? prefetcher->prefetch_depth() : 0},
              [&] {
                if (!prefetcher) options.max_prefetch_depth = 0;
                if (!options.tune_workers) options.cpu_budget = std::max(options.cpu_budget, loader.num_workers());
                return options;
              }()) {
  // The policy may have capped num_workers at the budget.
  if (policy_.knobs().num_workers != loader_.num_workers()) loader_.set_num_workers(policy_.knobs().num_workers);
  start_window();
}

void PipelineTuner::start_window() {
  steps_in_window_ = 0;
  window_begin_ns_ = profile::now_ns();
  loader_at_begin_ = loader_.stats();
  copy_wait_at_begin_ = prefetcher_ ? prefetcher_->stats().copy_wait_seconds : 0.0;
}

void PipelineTuner::begin_epoch() { start_window(); }

bool PipelineTuner::step_done() {
  if (policy_.settled()) return false;
  if (++steps_in_window_ < policy_.options().window_steps) return false;
  const LoaderStats now = loader_.stats();
  StageWindow w;
  w.steps = steps_in_window_;
  w.seconds = static_cast<double>(profile::now_ns() - window_begin_ns_) / 1e9;
  w.data_wait_seconds = now.wait_seconds - loader_at_begin_.wait_seconds;
  w.loader_busy_seconds = now.busy_seconds - loader_at_begin_.busy_seconds;
  w.copy_wait_seconds = prefetcher_ ? prefetcher_->stats().copy_wait_seconds - copy_wait_at_begin_ : 0.0;
  const PipelineKnobs before = policy_.knobs();
  const PipelineKnobs k = policy_.update(w);
  if (k.num_workers != before.num_workers) loader_.set_num_workers(k.num_workers);
  if (k.prefetch_factor != before.prefetch_factor) loader_.set_prefetch_factor(k.prefetch_factor);
  if (prefetcher_ && k.prefetch_depth != before.prefetch_depth) prefetcher_->set_prefetch_depth(k.prefetch_depth);
  start_window();
  return !(k == before);
}

std::string PipelineTuner::describe() const {
  const PipelineKnobs& k = policy_.knobs();
  std::string out = fmt::format("autotune: num_workers {}, prefetch_factor {}", k.num_workers, k.prefetch_factor);
  if (prefetcher_) out += fmt::format(", prefetch_depth {}", k.prefetch_depth);
  out += fmt::format(" ({} after {} steps, {:.2f} ms/step; {})", policy_.settled() ? "settled" : "still tuning",
                     policy_.steps_seen(), 1e3 * policy_.step_seconds(), policy_.reason());
  return out;
}

}  // namespace tandem::data
