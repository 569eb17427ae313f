// Progress reporting for the training loop: a live one-line bar on a terminal (epoch,
// step/total, loss, images/s, ETA), or nothing until the epoch's summary line otherwise.
// Thread-safety: used by the training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tandem::train {

class ProgressBar {
 public:
  /// live = draw the bar (normally: the stream is a terminal). Writes to `out`.
  ProgressBar(FILE* out, bool live);
  /// Starts an epoch of `total_steps` steps.
  void begin_epoch(int epoch, int epochs, int64_t total_steps);
  /// Reports progress after `step` steps (1-based) with `samples` samples (images) seen this epoch.
  /// Redraws at most every 100 ms.
  void update(int64_t step, double loss, int64_t samples);
  /// A run counted in optimizer steps (--max-steps): the bar shows "step G/max_steps", G the
  /// run's step (epochs before this one count their `total_steps` each), in place of the
  /// epoch and its step. 0: counted in epochs (the default).
  void count_steps(int64_t max_steps) { max_steps_ = max_steps; }
  /// Clears the bar (before an epoch summary line is printed).
  void clear();
  /// The rate's unit: "img/s" (the default) or "samples/s" for batches that are not images.
  void set_unit(std::string unit) { unit_ = std::move(unit); }

 private:
  FILE* out_;
  bool live_;
  int epoch_ = 0, epochs_ = 0;
  int64_t total_ = 0, max_steps_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool drawn_ = false;
  std::string unit_ = "img/s";
};

/// Ends the line a drawn bar left open (prints a newline on its stream), so that an error
/// message printed next starts on a line of its own -- also when stdout and stderr go to the
/// same file. No-op when no bar is drawn. Thread-safe.
void end_progress_line();

/// "1:02:03" or "2:03" for a duration in seconds.
std::string format_duration(double seconds);

}  // namespace tandem::train
