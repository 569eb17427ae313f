// A fixed-size thread pool for host work (data loading, CPU-side updates).
// Compute kernels use OpenMP (shared with oneDNN) so that the two do not oversubscribe.
// Thread-safety: submit() and parallel_for() may be called from any thread except a pool
// thread (no nested waits). The destructor finishes queued tasks, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  /// num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  /// Runs fn on a pool thread; the future carries its result or exception.
  std::future<void> submit(std::function<void()> fn);

  /// Splits [0, n) into about size() contiguous chunks, runs fn(begin, end) on each, waits,
  /// and rethrows the first exception.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void loop();
  std::vector<std::thread> threads_;
  std::deque<std::packaged_task<void()>> tasks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

/// Number of CPU cores available to this process (sched affinity), >= 1.
int available_cores();

}  // namespace tandem
