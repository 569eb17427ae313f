// Resuming a run from a checkpoint (--resume FILE|DIR): finds one that verifies
// (checkpoint_dir.h), checks that the flags do the same math (run_flags.h) and that the data
// gives the same batches per epoch, and restores the weights, BatchNorm statistics and the
// optimizer state into the freshly built Run, on its device (also across cpu / virt and an
// on-device / offloaded optimizer: their state has one form).
// Thread-safety: the thread that built the run.
#pragma once

#include <string>

#include "tandem/train/trainer.h"
#include "train/run_builder.h"
#include "train/step_loop.h"

namespace tandem::train::checkpoint {

struct ResumePoint {
  int epoch = 1;           // the epoch to continue in (cfg.epochs + 1: the run had ended)
  EpochStart start;        // where in that epoch, and its figures so far
  int64_t global_step = 0;
  TrainResult history;     // epochs finished before, best_test_accuracy, best_epoch
  std::string path;        // the checkpoint used
  std::string note;        // one or more lines for the banner: what was resumed, fallbacks, --force
};

/// Restores `run` from `target` (run.cfg.resume). Throws the errors of locate_checkpoint and
/// check_resume_flags, and Error(format, "[checkpoint] <path>: ...") when the checkpoint's
/// tensors do not fit the run's model or optimizer, or its epochs hold another number of steps.
ResumePoint resume_run(Run& run, const std::string& target);

}  // namespace tandem::train::checkpoint
