// StopSignals: a clean stop on SIGINT (Ctrl-C), SIGTERM and SIGUSR1 (what Slurm sends before
// a time limit with `sbatch --signal=USR1@90`, so that a requeued job resumes). While one is
// alive, the first
// such signal only asks: Trainer::fit() finishes the step in progress, writes a checkpoint
// when TrainConfig::checkpoint_dir is set, and returns with TrainResult::stopped_by set; the
// program then exits with 128 + the signal (130, 143, 138 for SIGUSR1). A second signal ends the process at
// once (_exit(128 + signal)) after removing every temporary file of an AtomicFile being
// written (a checkpoint, --save), so the previous files stay intact and nothing half-written
// is left. SIGHUP and SIGQUIT keep AtomicFile's handling (remove temporaries, then die).
// The three signals are blocked in the constructing thread and every thread it starts later,
// and taken by a thread of their own (sigwait), so no handler ever interrupts a compute
// kernel; construct it before any other thread starts (threads started earlier would still
// take the signal's default action). After the destructor they are ignored.
// Thread-safety: construct and destroy on the main thread, at most one at a time;
// requested() from any thread (an atomic load, cheap enough to call every step).
#pragma once

namespace tandem::train {

class StopSignals {
 public:
  /// Blocks the signals and starts their thread (once per process; an ignored signal, as
  /// under nohup, stays ignored).
  StopSignals();
  /// Stops taking the signals (they stay blocked, and are dropped, for the rest of the process).
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// The first stop signal received (SIGINT, SIGTERM or SIGUSR1), or 0.
  static int requested();
};

}  // namespace tandem::train
