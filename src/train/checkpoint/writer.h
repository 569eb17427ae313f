// Writer: writes checkpoints on a background thread while training goes on. A job waits
// for its snapshot's copies, writes the checkpoint file (checkpoint_file.h) or this rank's
// shard (shard_files.h), then (rank 0) publishes it in the folder's manifest and drops old
// ones (checkpoint_dir.h). One job at a time:
// submit() first waits for the job before it.
// Errors (a full disk, a removed folder) are kept and rethrown on the training thread by the
// next submit() or wait_idle(); the folder then still names the last complete checkpoint.
// Thread-safety: submit(), wait_idle() and the destructor on one thread (the training one).
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "train/checkpoint/snapshot.h"

namespace tandem::train::checkpoint {

/// A sharded checkpoint's writer (shard_files.h): this rank and the ranks' count, and how long
/// rank 0 waits for the others' shards.
struct ShardSpec {
  int rank = 0, world = 1;
  double timeout_s = 300;
};

class Writer {
 public:
  /// Writes into `dir` (which must exist), keeping the newest `keep` checkpoints; with `shard`,
  /// this rank's shards of sharded checkpoints (rank 0 completes and publishes them).
  Writer(std::string dir, int keep, std::optional<ShardSpec> shard = std::nullopt);
  /// Lets the job in flight finish (its errors are dropped), then joins the thread.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  /// Queues the write of `snapshot` with `state` as `file_name`; first waits for the job in
  /// flight and rethrows its error. Returns the seconds spent waiting for it. Sharded:
  /// `pieces` describes the snapshot's tensors (write_shard's).
  double submit(std::shared_ptr<const Snapshot> snapshot, nlohmann::json state, std::string file_name,
                nlohmann::json pieces = {});
  /// Waits until no job is in flight; rethrows the error of the last one.
  void wait_idle();
  /// Whether `snapshot` belongs to the job in flight.
  bool uses(const Snapshot* snapshot);

 private:
  void loop();
  void rethrow_locked();

  std::string dir_;
  int keep_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const Snapshot> snapshot_;  // the job in flight, or null
  nlohmann::json state_;
  std::string file_name_;
  nlohmann::json pieces_;
  std::optional<ShardSpec> shard_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tandem::train::checkpoint
