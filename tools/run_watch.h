// RunWatch: what `tandem train` writes for watching a run: the --metrics-file records, the
// --tensorboard scalars and the utilisation sampler (--show-utilization, also in both files).
// Record schema: docs/metrics.md. Created after the Trainer (the device exists);
// its destructor stops the sampler and closes the files on every exit path.
// Thread-safety: the training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/metrics/jsonl_writer.h"
#include "tandem/metrics/tensorboard.h"
#include "tandem/metrics/utilization.h"
#include "tandem/train/config.h"
#include "tandem/train/trainer.h"

namespace tandem::tools {

class RunWatch {
 public:
  /// Opens the files the flags name and starts sampling; writes the "run" record (with
  /// `memory_plan`, train::memory_plan_json's object, as "memory_plan" unless it is "").
  /// Throws Error(io) naming a file that cannot be created.
  RunWatch(const train::TrainConfig& cfg, const std::string& description,
           const std::string& memory_plan = "");
  ~RunWatch();
  /// Whether any of --metrics-file, --tensorboard, --show-utilization is set.
  static bool wanted(const train::TrainConfig& cfg);

  /// Adds on_window and wraps on_epoch_begin / on_epoch_end (the watch's part runs first, so
  /// that epoch_suffix() is ready when the epoch line is printed).
  void attach(train::TrainCallbacks& cb);
  /// "  cpu 63% (loader 12%), ..." for the epoch line with --show-utilization, else "".
  std::string epoch_suffix() const;
  /// The "summary" record (with the profiler summary when --trace was on: `summary` non-null).
  void finish(const train::TrainResult& result, const profile::Summary* summary);

 private:
  void on_window(const train::WindowStats& w);
  void on_eval(const train::EvalPoint& e);
  void on_epoch_end(const train::EpochStats& s);
  double seconds_since_start() const;

  train::TrainConfig cfg_;
  std::unique_ptr<metrics::JsonLinesWriter> jsonl_;
  std::unique_ptr<metrics::TensorBoardWriter> tb_;
  std::unique_ptr<metrics::UtilizationSampler> sampler_;
  metrics::UtilizationSample epoch_util_;
  int64_t start_ns_ = 0, epoch_begin_ns_ = 0, global_step_ = 0;
};

}  // namespace tandem::tools
