// BatchFeed: the batches of the step loop and of evaluation, as tensors on the run's device.
// On the host they come straight from the Loader; on a device through a DevicePrefetcher
// (pinned loader slots, copy stream, kPrefetchDepth batches ahead, a device ring deep enough
// for the step loop's run-ahead so that the prefetcher itself never makes it wait; see
// host_lead). make_train_feed / make_test_feed build one from a TrainConfig.
// Thread-safety: one thread drives a feed; the loader's workers are internal.
#pragma once

#include <cstdint>
#include <memory>

#include "tandem/data/field_batch.h"
#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"
#include "tandem/device.h"
#include "tandem/train/config.h"

namespace tandem::train {

/// Batches copied to the device ahead of the step.
inline constexpr int kPrefetchDepth = 2;

/// How far (in batches) the step loop may run ahead of the compute stream for a read-back
/// every `interval` steps (K): 2K, but never more than an epoch has batches, nor
/// data::kMaxHostLead, nor 256 MiB of batches (every field of the loader's largest batch: f32
/// images + i64 labels for image classification).
int host_lead(int64_t interval, const data::Loader& loader);

class BatchFeed {
 public:
  /// `op` and `knobs` word the Error(out_of_memory) raised when the device cannot hold the
  /// batch buffers, e.g. ("train", "training batches: lower --log-interval or --batch-size").
  BatchFeed(std::unique_ptr<data::Loader> loader, Device device, int64_t interval, const char* op,
            const char* knobs);
  data::Loader& loader() { return *loader_; }
  const data::Loader& loader() const { return *loader_; }
  /// Null on the host.
  data::DevicePrefetcher* prefetcher() { return prefetcher_.get(); }
  const data::DevicePrefetcher* prefetcher() const { return prefetcher_.get(); }
  /// Starts epoch `epoch` (0-based) of the loader (shuffle and augmentation are keyed by it),
  /// from batch `first_batch` (a resumed run; data::Loader::begin_epoch).
  void begin_epoch(uint64_t epoch, int64_t first_batch = 0);
  /// The next batch as its fields, on the device (image classification: images [B, C, H, W]
  /// and labels [B] i64; token windows: tokens [B, T] i32 and targets [B, T] i64; pick them
  /// with FieldBatch::get), valid until the next call or release(); null at the end of the
  /// epoch. Loader and prefetcher errors propagate.
  const data::FieldBatch* next();
  /// Drops the feed's references to the last batch (its slot can be reused; the FieldBatch
  /// next() returned becomes empty).
  void release();
  /// The stream the step's ops run on (the one that waits for each batch's copy).
  Stream compute_stream() const;

 private:
  std::unique_ptr<data::Loader> loader_;  // declared first: the prefetcher is destroyed before it
  std::unique_ptr<data::DevicePrefetcher> prefetcher_;
  data::Batch host_batch_;
  data::DeviceBatch device_batch_;
  data::FieldBatch batch_;  // the fields of host_batch_ or device_batch_
};

/// A rank's share of the data in a distributed run (rank 0 of 1: all of it).
struct Shard {
  int rank = 0, world_size = 1;
};

/// The training feed of a data set of typed fields (image fields: images [C, H, W] and labels
/// []; token windows: tokens i32 [T], targets i64 [T]): cfg.batch_size (per rank), shuffled
/// with cfg.seed (--shuffle full; --shuffle block for packed shards: train_sampler), drop_last,
/// cfg.num_workers and cfg.prefetch_factor (not auto: see pipeline_start), cfg.skip_corrupt.
/// With several ranks the order is data::DistributedSampler's (the same shuffle on every rank,
/// rank r taking positions r, r + N, ...), so N ranks of batch B/N see the samples one rank of
/// batch B sees. `pinned_slots`: the loader's slots are pinned even on the host (a split run
/// copies parts of them to devices). Throws Error(invalid_argument) when the batch is larger
/// than the set (no batch), Error(out_of_memory) as BatchFeed.
std::unique_ptr<BatchFeed> make_train_feed(const std::shared_ptr<const data::FieldDataset>& set,
                                           const TrainConfig& cfg, Device device, Shard shard = {},
                                           bool pinned_slots = false);

/// The test feed: cfg.eval_batch_size, in order, every sample once (no drop_last); with several
/// ranks rank r's share (data::ShardSampler: every sample on exactly one rank). `op` and
/// `knobs`: see BatchFeed (the eval command calls --eval-batch-size --batch-size). Throws
/// Error(invalid_argument, "[<op>] the test set holds no samples: ...") for an empty set.
std::unique_ptr<BatchFeed> make_test_feed(const std::shared_ptr<const data::FieldDataset>& set,
                                          const TrainConfig& cfg, Device device, const char* op, const char* knobs,
                                          Shard shard = {});

}  // namespace tandem::train
