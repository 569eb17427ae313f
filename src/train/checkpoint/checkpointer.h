// Checkpointer: takes the run's checkpoints from inside the step loop (a StepObserver) and
// stops it on a stop signal (tandem/train/stop.h).
//
// When: after every TrainConfig::checkpoint_every global steps (not at an epoch's last step:
// the epoch-end checkpoint follows), after every epoch's evaluation (the next epoch's start),
// and on a stop signal (after the current step).
// How: the state tensors (weights and BatchNorm statistics, optimizer state, the metrics
// accumulator; with --offload-delay 1 the weights as the device holds them, one update behind,
// and the pending upload's master copy in the optimizer state) are snapshotted (snapshot.h) without waiting for the device; the epoch's figures
// up to the last issued read-back arrive a few steps later (the step loop never waits for
// them), and then the checkpoint goes to the background writer (writer.h). Two snapshot
// buffers alternate, so the step loop stands still only for the host copies and the hand-over
// (reported as CheckpointReport::pause_ms); a checkpoint due while the previous one is still
// waiting for its figures is skipped (sharded: its figures are read back at once instead, so that
// every rank writes every one). A stop waits for the figures and for the write.
// Data parallel (Run::comm): every rank runs a Checkpointer at the same steps, rank 0 alone
// writes; with --zero 1 the optimizer state is gathered from its owners (a collective) before
// rank 0 snapshots it. Sharded checkpoints (--checkpoint-format sharded, shard_files.h):
// every rank snapshots the part of the state it holds (shard_capture.h), no collective, and
// its own writer writes it; rank 0's completes the checkpoint. A stop signal is agreed over the ranks every TrainConfig::log_interval
// steps (and at an epoch's last step), so that every rank stops after the same step.
// Thread-safety: the training thread.
#pragma once

#include <array>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tandem/train/trainer.h"
#include "train/checkpoint/snapshot.h"
#include "train/checkpoint/writer.h"
#include "train/run_builder.h"
#include "train/step_loop.h"

namespace tandem::train::checkpoint {

/// Thrown through the step loop after a stop signal's checkpoint was written.
struct StopRequested {
  int signal;
};

class Checkpointer final : public StepObserver {
 public:
  /// Prepares cfg.checkpoint_dir (when set; prepare_checkpoint_dir). Throws Error(io) for a
  /// folder that cannot be made.
  Checkpointer(Run& run, const TrainCallbacks& cb);
  ~Checkpointer() override;

  void after_step(const StepView& view) override;
  void window_done(int64_t last_step, double loss_sum, int64_t correct, int64_t samples) override;

  /// The figures of the finished epochs (recorded in every checkpoint).
  void set_history(const TrainResult& so_far) { history_ = &so_far; }
  /// Before a resumed epoch: the figures it starts from (read back every `interval` steps).
  void resume_epoch(const EpochStart& start, int64_t interval);
  /// After epoch `epoch`'s evaluation: checkpoints the start of the next epoch, or, when
  /// --max-steps ended the epoch early, the position reached (epoch, its step, global step).
  void epoch_end(int epoch, int64_t global_step);
  /// Waits for the last write; rethrows a write error. Fills the result's checkpoint figures.
  void finish(TrainResult& result);

 private:
  struct Pending {
    std::shared_ptr<Snapshot> snapshot;
    nlohmann::json state;
    nlohmann::json pieces;  // sharded: the snapshot's pieces (shard_files.h)
    int64_t need_through = 0;  // the read-back the figures wait for
    CheckpointReport report;
    double pause_s = 0;
  };
  nlohmann::json base_state(int epoch, int64_t step, int64_t steps_in_epoch, int64_t global_step, double seconds);
  void capture(const StepView* view, int epoch, int64_t step, int64_t global_step, bool stop);
  void submit();
  int agreed_stop_signal(const StepView& v);
  std::string name_of(int64_t global_step) const;  // the checkpoint's file or folder name

  Run& run_;
  const TrainCallbacks& cb_;
  const TrainResult* history_ = nullptr;
  bool active_ = false;  // --checkpoint-dir given (on every rank; writer_ on rank 0 only)
  bool dist_ = false;    // a data-parallel run: the ranks agree on stops
  bool sharded_ = false;  // --checkpoint-format sharded: every rank writes its shard
  std::unique_ptr<Writer> writer_;
  std::shared_ptr<Snapshot> gathered_for_;   // the snapshot copying the home's last gathered state
  std::array<std::shared_ptr<Snapshot>, 2> snapshots_;
  size_t next_ = 0;
  bool has_pending_ = false;
  int64_t last_global_step_ = -1;  // of the last capture
  Pending pending_;
  int64_t folded_through_ = 0;  // the last step of the epoch whose window the tally holds
  double loss_sum_ = 0;
  int64_t correct_ = 0, samples_ = 0;
  int count_ = 0;
  double pause_sum_s_ = 0, pause_max_s_ = 0;
};

}  // namespace tandem::train::checkpoint
