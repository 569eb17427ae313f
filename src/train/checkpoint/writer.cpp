#include "train/checkpoint/writer.h"

#include <chrono>

#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/shard_files.h"

namespace tandem::train::checkpoint {

Writer::Writer(std::string dir, int keep, std::optional<ShardSpec> shard)
    : dir_(std::move(dir)), keep_(keep), shard_(shard), thread_([this] { loop(); }) {}

Writer::~Writer() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return snapshot_ == nullptr; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Writer::rethrow_locked() {
  if (!error_) return;
  std::exception_ptr e = error_;
  error_ = nullptr;
  std::rethrow_exception(e);
}

double Writer::submit(std::shared_ptr<const Snapshot> snapshot, nlohmann::json state, std::string file_name,
                      nlohmann::json pieces) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return snapshot_ == nullptr; });
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rethrow_locked();
  snapshot_ = std::move(snapshot);
  state_ = std::move(state);
  file_name_ = std::move(file_name);
  pieces_ = std::move(pieces);
  lock.unlock();
  cv_.notify_all();
  return waited;
}

void Writer::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return snapshot_ == nullptr; });
  rethrow_locked();
}

bool Writer::uses(const Snapshot* snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_.get() == snapshot;
}

void Writer::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || snapshot_ != nullptr; });
    if (snapshot_ == nullptr) return;  // stop_ and nothing queued
    const std::shared_ptr<const Snapshot> snap = snapshot_;
    const nlohmann::json state = state_;
    const std::string name = file_name_;
    const nlohmann::json pieces = pieces_;
    lock.unlock();
    std::exception_ptr err;
    try {
      snap->wait();
      if (shard_) {
        write_shard(dir_, name, shard_->rank, shard_->world, state, pieces, snap->tensors(), shard_->timeout_s);
        if (shard_->rank == 0) publish_checkpoint(dir_, name, state, keep_);
      } else {
        write_checkpoint_file(dir_ + "/" + name, state, snap->tensors());
        publish_checkpoint(dir_, name, state, keep_);
      }
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    error_ = err;
    snapshot_ = nullptr;
    cv_.notify_all();
  }
}

}  // namespace tandem::train::checkpoint
