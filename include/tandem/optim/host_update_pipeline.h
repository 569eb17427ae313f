// HostUpdatePipeline: the one host-update pipeline, gradients down -> CPU update on a host
// thread -> parameters up, with the optional one-step delayed update (ZeRO-Offload's DPU, Ren
// et al. 2021, section 5). Its owners are the offloaded optimizer (tandem/optim/offload.h; units
// are its gradient buckets) and the streamed parameters (train/place/param_stream.h; units are
// the model's parts). It owns the update thread (HostUpdateThread, tandem/optim/
// host_update_thread.h), the delay policy, the per-unit bookkeeping (an update queued, its update
// ran, its upload enqueued or owed to the next step), the events a unit's update waits for and
// records, the waits and the errors. The owner supplies hooks: the update of a unit (the
// Optimizer's update_part maths over the unit's parameters) and, optionally, how a unit's
// parameters go up. An owner without an upload hook uploads on its own (from the training
// thread), after wait_unit() where it needs the update's values.
//
// Schedule of one update, queued by the training thread with queue() once the unit's gradients
// are on their way to the host (their copy records HostUpdate::grads); on the thread, in order:
//  1. with an upload owed by the unit's previous update (delay 1): that upload, after the gate
//     event queue() was given (the device no longer reads the parameters it overwrites);
//  2. a host wait for the gradients (HostUpdate::grads) and for the unit's last upload (it has
//     read the master values the update rewrites);
//  3. the update hook;
//  4. without delay (delay_of(step) == 0): the upload of this update; else it is owed to the
//     unit's next update or to upload_owed().
// The delay rule: update `step` (1-based) is delayed when delay is 1 and step > the warm-up
// steps (delay_of()). The step ends with finish_step(step): without delay it waits until every
// queued update ran (and its upload was enqueued); with delay, with an upload hook, until every
// unit's previous update was uploaded, without one for nothing.
// Errors: the first exception a hook throws is kept; the tasks after it skip their work (their
// bookkeeping still runs). With keep_errors (the offloaded optimizer) the pipeline fails for
// good: every wait and check() rethrows it, and waits stop waiting at it. Without (the streamed
// parameters) the wait that reports it takes it, after every queued update ran, and the tasks
// after it run again. wait_unit() never throws: the error surfaces at the step's wait.
// Thread-safety: the training-thread members (queue, the waits, the bookkeeping readers) from
// one thread, the owner's; the hooks run on the update thread, one task at a time, in the order
// the tasks were queued.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tandem/optim/host_update_thread.h"
#include "tandem/stream.h"

namespace tandem::optim {

/// One unit's update as queue() takes it and the update hook sees it.
struct HostUpdate {
  int unit = 0;       // [0, units)
  int64_t step = 0;   // 1-based update number (the optimizer's step_count() + 1)
  double lr = 0;      // the step's learning rate, captured when queued
  int slot = 0;       // the owner's: the buffer this update's gradients (or outputs) are in
  Event grads;        // completes once the unit's gradients are on the host (null: they are)
};

struct HostUpdateHooks {
  /// Update thread: the update of a unit, after its gradients arrived. Required.
  std::function<void(const HostUpdate&)> update;
  /// Update thread: enqueues the upload of the unit's parameters of update `step` (after the
  /// device event `gate`; null: none) and returns the event the copies complete at. Optional:
  /// without it the owner uploads, and no upload is ever owed.
  std::function<Event(int unit, const Event& gate, int64_t step)> upload;
};

struct HostUpdateOptions {
  /// The thread's name in the profiler, and its OpenMP threads (0: the default).
  std::string thread_name = "host update";
  int num_threads = 0;
  /// Units (buckets, parts), numbered 0 .. units - 1; >= 0.
  int units = 0;
  /// 0, or 1: the one-step delayed update after `delay_warmup_steps` updates without (>= 0).
  int delay = 0;
  int64_t delay_warmup_steps = 0;
  /// The error rule (the top of this header): true, the pipeline fails for good at an error.
  bool keep_errors = true;
};

class HostUpdatePipeline {
 public:
  /// Starts the thread. Throws Error(invalid_argument) for units < 0, a delay other than 0 or
  /// 1, delay_warmup_steps < 0 or no update hook.
  HostUpdatePipeline(HostUpdateOptions options, HostUpdateHooks hooks);
  /// stop().
  ~HostUpdatePipeline();
  HostUpdatePipeline(const HostUpdatePipeline&) = delete;
  HostUpdatePipeline& operator=(const HostUpdatePipeline&) = delete;
  /// Lets the thread run the queued tasks with their work skipped (their bookkeeping runs) and
  /// joins it. Never throws; nothing queued later runs.
  void stop() noexcept;

  int units() const { return options_.units; }
  int delay() const { return options_.delay; }
  int64_t delay_warmup_steps() const { return options_.delay_warmup_steps; }
  /// The delay update `step` (1-based) gets: 1 when delay is 1 and step > delay_warmup_steps.
  int delay_of(int64_t step) const { return options_.delay == 1 && step > options_.delay_warmup_steps ? 1 : 0; }

  /// Training thread: queues the update `u` of unit u.unit (the schedule at the top of this
  /// header); `gate` is the device event an upload owed by the unit's previous update waits
  /// for. The unit counts as queued in this step until finish_step().
  void queue(HostUpdate u, const Event& gate = Event());
  /// Training thread: whether unit `unit` (all units: the count) was queued since the last
  /// finish_step().
  bool queued_in_step(int unit) const { return queued_in_step_[static_cast<size_t>(unit)] != 0; }
  int queued_in_step_count() const;
  /// Training thread: the gradients event of the unit's last queued update (null before one).
  const Event& grads_event(int unit) const { return grads_[static_cast<size_t>(unit)]; }
  /// The event of the unit's last enqueued upload (null before one, or without an upload hook).
  Event upload_event(int unit) const;
  /// Training thread: whether some unit's last update waits for its upload (delay 1).
  bool upload_pending() const;
  /// Training thread: queues the validation of the speculative updates of step `step` (SuperOffload's
  /// speculation, then validation) after the tasks queued before it. `check` runs on the
  /// update thread once those updates ran and returns the units whose parameters it changed
  /// (restored, or updated again); where update `step` is not delayed (delay_of) their uploads
  /// are enqueued again after it, as the update's own were; with delay the owed uploads, queued
  /// later, carry its result. Every unit counts as updating until it ran (updating(),
  /// wait_unit() and finish_step() wait for it). Its exception is the pipeline's error.
  void queue_check(std::function<std::vector<int>()> check, int64_t step);
  /// Training thread: queues the owed uploads (after `gate`; they carry update `step`), as the
  /// unit's next update would have run them; none owed after it.
  void upload_owed(const Event& gate, int64_t step);
  /// Training thread, the pipeline idle: every unit's last upload carries update `step - 1`
  /// with `pending` (its upload of `step` owed) and `step` without (a restored state).
  void reset_uploads(int64_t step, bool pending);

  /// Whether the unit's queued update has not run yet.
  bool updating(int unit) const;
  /// Blocks until the unit's queued updates ran (or were skipped after an error), under a
  /// profiler span named `span` (null: none) when it waits. Never throws.
  void wait_unit(int unit, const char* span = nullptr);
  /// Training thread: ends step `step` (1-based, the update number the step queued) as the
  /// top of this header says, resets queued_in_step() and rethrows a hook's error (the error
  /// rule). `span` (null: none) names the wait's profiler span.
  void finish_step(int64_t step, const char* span = nullptr);
  /// Blocks until every queued update ran; rethrows a hook's error (the error rule).
  void wait_updates(const char* span = nullptr);
  /// Blocks until every task queued so far ran (owed uploads included); rethrows a hook's error.
  void wait_idle();
  /// Rethrows the kept error, taking it without keep_errors.
  void check();
  /// Runs `work` on the update thread after the tasks queued before it (in their FIFO: a
  /// collective the owner orders among the updates) and waits for it; its exception is the
  /// pipeline's error (the error rule), rethrown here. Skipped after an error not yet taken.
  void run(std::function<void()> work);
  /// Tasks queued and not yet run.
  uint64_t in_flight() const { return thread_->pushed() - thread_->done(); }

 private:
  // Update thread: the upload hook, its event and step kept for the waiters.
  void upload(int unit, const Event& gate, int64_t step);
  // The error rule after a wait that returned `error`.
  void raise(std::exception_ptr error);
  bool all(const std::function<bool(size_t)>& unit_ready) const;

  HostUpdateOptions options_;
  HostUpdateHooks hooks_;
  // Training thread.
  std::vector<char> owed_, queued_in_step_;
  std::vector<Event> grads_;
  int64_t runs_queued_ = 0;
  // Under the thread's mutex (thread_->locked, thread_->wait).
  std::vector<int64_t> pending_;   // per unit: updates queued and not run
  std::vector<int64_t> uploaded_;  // per unit: the update number of its last enqueued upload
  std::vector<Event> upload_events_;
  int64_t runs_done_ = 0;
  std::unique_ptr<HostUpdateThread> thread_;  // last: stopped first
};

}  // namespace tandem::optim
