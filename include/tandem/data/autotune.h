// Autotuning of the input pipeline: how many loader workers (num_workers), how many batches
// each keeps in flight (prefetch_factor) and how many batches the DevicePrefetcher copies
// ahead (prefetch_depth), chosen from measured stage times while training runs.
//
// Autotuner is the policy alone (no threads, no clocks), driven by one StageWindow per window
// of steps, so tests can feed it synthetic times. It is a hill climb on the worst stage:
//  - input-bound (the training thread waits for data more than wait_threshold of the time):
//    when the loader workers are nearly always busy, try one more worker (up to cpu_budget);
//    when they are not (bursty loading), try a deeper queue (prefetch_factor + 1);
//  - copy-bound (the host waits for copies more than wait_threshold): try prefetch_depth + 1;
//  - otherwise (compute-bound): when fewer workers would still be busy less than 70% of the
//    time, try one worker fewer, so the cores go to compute.
// A trial runs one window to settle in (threads start, queues refill) and is judged on the
// next: a step up is kept when the mean step time fell by at least min_gain, a step down when
// it did not rise by more than min_gain; otherwise the knobs go back and that move is not
// tried again. With no move left, or after settle_steps steps, the knobs are final.
//
// PipelineTuner applies the policy to a running Loader (and DevicePrefetcher): call
// step_done() after every training step and begin_epoch() at the start of each epoch (so a
// window never spans evaluation). Batches keep their order and contents whatever it changes
// (augmentation is keyed by (seed, epoch, sample index)).
// Thread-safety: both classes are used by one thread (the training thread).
#pragma once

#include <cstdint>
#include <string>

#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"

namespace tandem::data {

/// The knobs the autotuner turns. prefetch_depth 0: no DevicePrefetcher (host training).
struct PipelineKnobs {
  int num_workers = 1;
  int prefetch_factor = 2;
  int prefetch_depth = 0;
  friend bool operator==(const PipelineKnobs&, const PipelineKnobs&) = default;
};

struct AutotuneOptions {
  bool tune_workers = true;       // --num-workers auto
  bool tune_prefetch = true;      // --prefetch auto (prefetch_factor and prefetch_depth)
  int cpu_budget = 1;             // most loader workers: the cores available to the process
  int max_prefetch_factor = 8;
  int max_prefetch_depth = 8;
  int window_steps = 10;          // steps per measurement window
  int64_t settle_steps = 200;     // the knobs are final after this many steps at the latest
  double wait_threshold = 0.05;   // share of the time spent waiting that names a stage limiting
  double min_gain = 0.03;         // relative change of the step time a trial must bring
};

/// Measurements over one window of steps. Units: seconds.
struct StageWindow {
  int64_t steps = 0;
  double seconds = 0;              // wall time of the window's steps
  double data_wait_seconds = 0;    // training thread waiting for the loader
  double copy_wait_seconds = 0;    // training thread waiting for host-to-device copies
  double loader_busy_seconds = 0;  // time the loader spent making batches, summed over workers
};

class Autotuner {
 public:
  /// Throws Error(invalid_argument, "[autotune] ...") for start knobs out of range
  /// (num_workers < 1 when tuning workers, prefetch_factor < 1, prefetch_depth < 0),
  /// cpu_budget < 1 or window_steps < 1.
  Autotuner(PipelineKnobs start, AutotuneOptions options);

  /// Takes one window's measurements; returns the knobs for the next window.
  PipelineKnobs update(const StageWindow& window);

  const PipelineKnobs& knobs() const { return knobs_; }
  const AutotuneOptions& options() const { return options_; }
  bool settled() const { return settled_; }
  int64_t steps_seen() const { return steps_; }
  /// Mean step time (seconds) of the knobs in force, as last measured.
  double step_seconds() const { return baseline_; }
  /// Why the last decision was taken, e.g. "input-bound (32% waiting): trying num_workers 3".
  const std::string& reason() const { return reason_; }

 private:
  enum class Move { none, workers_up, workers_down, factor_up, depth_up };
  Move choose(const StageWindow& w) const;
  static const char* knob_name(Move m);
  static int knob_value(Move m, const PipelineKnobs& k);
  void begin_trial(Move move);

  PipelineKnobs knobs_, before_trial_;
  AutotuneOptions options_;
  Move trial_ = Move::none;
  bool transient_ = false;  // the window after a change is not judged
  bool tried_[5] = {};      // moves given up on
  bool settled_ = false;
  double baseline_ = 0;     // step time of the accepted knobs
  int64_t steps_ = 0;
  std::string reason_;
};

/// Drives an Autotuner from a Loader's and a DevicePrefetcher's counters and applies its
/// choices (Loader::set_num_workers / set_prefetch_factor, DevicePrefetcher::set_prefetch_depth).
class PipelineTuner {
 public:
  /// `prefetcher` may be null (host training: prefetch_depth is not tuned). Both must outlive
  /// the tuner. Starts from the loader's and prefetcher's current settings.
  PipelineTuner(Loader& loader, DevicePrefetcher* prefetcher, AutotuneOptions options);

  /// Starts a new measurement window (call at the start of each epoch).
  void begin_epoch();
  /// After each training step. Applies new knobs at window ends; returns true when it did.
  bool step_done();

  const Autotuner& policy() const { return policy_; }
  bool settled() const { return policy_.settled(); }
  /// One line: "autotune: num_workers 3, prefetch_factor 2, prefetch_depth 2 (settled after
  /// 120 steps, 8.1 ms/step; input-bound ...)".
  std::string describe() const;

 private:
  void start_window();

  Loader& loader_;
  DevicePrefetcher* prefetcher_;
  Autotuner policy_;
  int64_t steps_in_window_ = 0;
  int64_t window_begin_ns_ = 0;
  LoaderStats loader_at_begin_;
  double copy_wait_at_begin_ = 0;
};

}  // namespace tandem::data
