// HostUpdateThread: the thread of the host-update pipeline (HostUpdatePipeline,
// tandem/optim/host_update_pipeline.h: gradient down -> CPU update -> parameters up, for the
// offloaded optimizer's buckets and the streamed parameters' parts). A FIFO of tasks run in
// order on one thread, named in the profiler, with its own OpenMP thread count for the update
// kernels. Its owner keeps the state its waiters look at (uploads enqueued, units updated)
// under the thread's mutex (locked(), wait()), so that a waiter wakes after every task, at
// locked() and when a task fails.
// Errors: the first exception a task throws is kept; the tasks after it run with `skip` set
// (their bookkeeping, not their work) until the owner takes the error (take_error()).
// Thread-safety: every member from any thread; tasks run on the thread, one at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::optim {

class HostUpdateThread {
 public:
  /// A task; `skip` is set after an error not yet taken and while the thread stops.
  using Task = std::function<void(bool skip)>;

  /// Starts the thread, named `name` in the profiler; `num_threads` > 0 sets its OpenMP
  /// threads (ops::set_num_threads), 0 leaves the default.
  explicit HostUpdateThread(std::string name, int num_threads = 0);
  /// stop().
  ~HostUpdateThread();
  /// Runs the tasks still queued with `skip` set and joins the thread (the tasks may still
  /// call this object meanwhile); later pushes are never run. Never throws.
  void stop() noexcept;
  HostUpdateThread(const HostUpdateThread&) = delete;
  HostUpdateThread& operator=(const HostUpdateThread&) = delete;

  /// Queues `task` after the others.
  void push(Task task);
  /// Blocks until every task pushed so far ran (or was skipped).
  void wait_idle();
  /// Blocks until `ready()` (called under the thread's mutex, after each task and locked()),
  /// or with `until_error` until an error is kept; returns the kept error without taking it.
  std::exception_ptr wait(const std::function<bool()>& ready, bool until_error = true);
  /// Runs `f` under the thread's mutex (the owner's shared state), then wakes the waiters.
  void locked(const std::function<void()>& f);
  /// Keeps `error` unless an error is kept already (a task that reports its failure itself
  /// before telling its waiters that it ran), and wakes the waiters.
  void fail(std::exception_ptr error);
  /// The kept error (null: none), and taking it: the tasks after it run again.
  std::exception_ptr error() const;
  std::exception_ptr take_error();
  /// Tasks pushed and run so far.
  uint64_t pushed() const;
  uint64_t done() const;

 private:
  void loop(const std::string& name, int num_threads);
  mutable std::mutex mu_;
  std::condition_variable jobs_cv_, progress_cv_;
  std::deque<Task> tasks_;
  bool stop_ = false;
  uint64_t pushed_ = 0, done_ = 0;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace tandem::optim
