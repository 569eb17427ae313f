// MetricsReadback: loss and accuracy of a run of steps, accumulated on the device into
// metrics [4] f32 (loss sum, correct, samples, bad labels; see
// ops::softmax_cross_entropy_accumulate) and read back asynchronously. issue() enqueues, on
// the compute stream, a copy of the accumulator into a pinned host slot, clears the
// accumulator and records an event; the host reads a slot once its event completed (poll),
// and issue() then waits for the read-back issued before -- `interval` steps earlier, normally
// complete by then. That wait is the step loop's only host wait on the compute stream and its
// throttle: when the device is the bottleneck the host runs K to 2K steps ahead of it (the
// device always has at least K steps queued), never further. Two slots.
// Thread-safety: one thread (the one driving the step loop or the evaluation).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "tandem/device.h"
#include "tandem/stream.h"
#include "tandem/tensor.h"

namespace tandem::train {

class MetricsReadback {
 public:
  /// The figures of one read-back: steps [first_step, last_step] of the epoch.
  struct Window {
    int64_t first_step = 0, last_step = 0;  // 1-based steps of the epoch, inclusive
    double loss_sum = 0;                    // sum of per-sample losses (NaN/inf propagate)
    int64_t correct = 0, samples = 0, bad_labels = 0;
    // With a loss scaler (set_scaler_state): its scale and skipped steps at the window's end.
    bool has_scaler = false;
    float scale = 0;
    int64_t skipped_steps = 0;
  };

  /// Reads back every `interval` steps (K) the accumulator on `device`, copied on `stream`.
  MetricsReadback(Device device, Stream stream, int64_t interval);
  /// Waits for the copies into its pinned slots.
  ~MetricsReadback();
  MetricsReadback(const MetricsReadback&) = delete;
  MetricsReadback& operator=(const MetricsReadback&) = delete;

  /// The accumulator [4] f32 on the device the step's loss adds into.
  const Tensor& accumulator() const { return acc_; }
  /// Copies `state` (a loss scaler's [4] f32 on the device, tandem/amp_ops.h) with every
  /// read-back into the same pinned slot (not cleared), so its scale and skipped steps reach
  /// the host without a read of their own. Call before the first step_done.
  void set_scaler_state(const Tensor& state) { scaler_state_ = state; }

  /// After `step` (1-based) steps: every `interval` steps, issues the window's read-back.
  void step_done(int64_t step, std::deque<Window>& done);
  /// After the last of `steps` steps: reads back the rest and waits for every read-back.
  void finish(int64_t steps, std::deque<Window>& done);
  /// Moves the read-backs whose copies completed into `done`, oldest first; never blocks.
  void poll(std::deque<Window>& done);
  /// Waits for every read-back issued so far and moves it into `done` (issues none).
  void wait_all(std::deque<Window>& done);
  /// The last step whose window's read-back was issued (0 before the first).
  int64_t read_through() const { return window_first_ - 1; }
  /// A resumed epoch: continues after `step` steps, the accumulator holding `values` ([4]:
  /// the steps since the last read-back; empty = zeros), so the windows and their sums are
  /// those of the uninterrupted epoch. Waits for the copy. Call before the first step_done.
  void resume_at(int64_t step, const std::vector<float>& values);

 private:
  struct Slot {
    Tensor host;  // [4] f32, pinned when the device is not the host
    Event copied;
  };
  struct Pending {
    size_t slot;
    int64_t first_step, last_step;
  };
  void issue(int64_t first_step, int64_t last_step, std::deque<Window>& done);
  void wait_oldest(std::deque<Window>& done);
  void take(std::deque<Window>& done);

  Device device_;
  Stream stream_;
  int64_t interval_;
  int64_t window_first_ = 1;  // first step of the window being accumulated
  Tensor acc_;
  Tensor scaler_state_;  // undefined without a loss scaler
  std::array<Slot, 2> slots_;
  size_t next_slot_ = 0;
  std::deque<Pending> pending_;
};

}  // namespace tandem::train
