// Internal: a thread that destroys objects handed to it. A CUDA host function
// (cudaLaunchHostFunc) must not call CUDA, yet the work items it runs hold tensors, events
// and pinned blocks whose destructors do (cudaEventDestroy, an event query when a pinned
// block goes back to its pool); the host function hands its item over instead and returns.
// Plain C++ without CUDA headers, so that it is tested in every build
// (tests/cuda/deferred_release_test.cpp).
// Thread-safety: every method may be called from any thread; hand_over() only takes a mutex
// and may allocate, so it is safe inside a host function.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace tandem::cuda_detail {

class DeferredRelease {
 public:
  DeferredRelease() : thread_([this] { loop(); }) {}
  /// Destroys what is still queued (on the release thread), then joins it.
  ~DeferredRelease() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  DeferredRelease(const DeferredRelease&) = delete;
  DeferredRelease& operator=(const DeferredRelease&) = delete;

  /// Takes `item` and destroys it later on the release thread. A null item is ignored.
  template <typename T>
  void hand_over(std::unique_ptr<T> item) {
    if (!item) return;
    Item erased(item.release(), [](void* p) { delete static_cast<T*>(p); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(erased));
      ++handed_;
    }
    wake_.notify_one();
  }

  /// Blocks until every item handed over before the call has been destroyed. Returns at once
  /// on the release thread itself (a destructor that flushes must not wait for itself).
  void flush() {
    if (std::this_thread::get_id() == thread_.get_id()) return;
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = handed_;
    done_.wait(lock, [&] { return released_ >= target; });
  }

  /// Whether the calling thread is the release thread.
  bool on_release_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  using Item = std::unique_ptr<void, void (*)(void*)>;

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      Item item = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      item.reset();  // outside the lock: a destructor may hand over more items
      lock.lock();
      ++released_;
      done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::deque<Item> queue_;
  uint64_t handed_ = 0, released_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace tandem::cuda_detail
