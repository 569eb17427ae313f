#include "tandem/optim/host_update_thread.h"

#include <utility>

#include "tandem/cpu_binding.h"
#include "tandem/ops.h"
#include "tandem/profile/profiler.h"

namespace tandem::optim {

HostUpdateThread::HostUpdateThread(std::string name, int num_threads)
    : thread_([this, name = std::move(name), num_threads] { loop(name, num_threads); }) {}

HostUpdateThread::~HostUpdateThread() {
  stop();
}

void HostUpdateThread::stop() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  jobs_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HostUpdateThread::push(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    ++pushed_;
  }
  jobs_cv_.notify_one();
}

void HostUpdateThread::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  progress_cv_.wait(lock, [&] { return done_ == pushed_; });
}

std::exception_ptr HostUpdateThread::wait(const std::function<bool()>& ready, bool until_error) {
  std::unique_lock<std::mutex> lock(mu_);
  progress_cv_.wait(lock, [&] { return (until_error && error_) || ready(); });
  return error_;
}

void HostUpdateThread::locked(const std::function<void()>& f) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }
  progress_cv_.notify_all();
}

void HostUpdateThread::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::move(error);
  }
  progress_cv_.notify_all();
}

std::exception_ptr HostUpdateThread::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::exception_ptr HostUpdateThread::take_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(error_, nullptr);
}

uint64_t HostUpdateThread::pushed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pushed_;
}

uint64_t HostUpdateThread::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void HostUpdateThread::loop(const std::string& name, int num_threads) {
  profile::Profiler::global().name_this_thread(name);
  bind_this_thread();  // --bind: before its OpenMP team starts, which inherits the binding
  if (num_threads > 0) ops::set_num_threads(num_threads);
  for (;;) {
    Task task;
    bool skip;
    {
      std::unique_lock<std::mutex> lock(mu_);
      jobs_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      skip = error_ != nullptr || stop_;
    }
    try {
      task(skip);
    } catch (...) {
      fail(std::current_exception());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
    }
    progress_cv_.notify_all();
  }
}

}  // namespace tandem::optim
