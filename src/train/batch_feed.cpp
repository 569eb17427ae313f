#include "train/batch_feed.h"

#include <algorithm>

#include <fmt/format.h>

#include "tandem/device_traits.h"
#include "tandem/error.h"
#include "train/data_recipe.h"
#include "tandem/pinned.h"
#include "tandem/stream.h"

namespace tandem::train {

// Each step of lead costs one batch of device memory and one of pinned host memory; beyond
// kLeadBudget bytes of either the lead is shortened and the prefetcher's back-pressure
// throttles the host instead (large batches, or a long --log-interval).
static constexpr int64_t kLeadBudget = int64_t{256} << 20;

int host_lead(int64_t interval, const data::Loader& loader) {
  const int64_t batch_bytes = loader.max_batch_size() * static_cast<int64_t>(data::sample_bytes(loader.fields()));
  const int64_t two_k = 2 * std::min<int64_t>(interval, data::kMaxHostLead);  // no overflow for huge K
  return static_cast<int>(std::min<int64_t>({two_k, loader.num_batches(), data::kMaxHostLead, kLeadBudget / batch_bytes}));
}

BatchFeed::BatchFeed(std::unique_ptr<data::Loader> loader, Device device, int64_t interval, const char* op,
                     const char* knobs)
    : loader_(std::move(loader)) {
  if (device.is_host()) return;
  data::PrefetcherOptions po;
  po.prefetch_depth = kPrefetchDepth;
  po.host_lead = host_lead(interval, *loader_);
  prefetcher_ = std::make_unique<data::DevicePrefetcher>(*loader_, device, po);
  prefetcher_->compute_stream().set_label("compute");
  try {
    prefetcher_->reserve();  // now, not inside the first steps: fresh buffers wait for compute
  } catch (const Error& e) {
    if (e.code() != ErrorCode::out_of_memory) throw;
    throw_error(ErrorCode::out_of_memory, op, fmt::format("{}; {}", e.what(), knobs));
  }
}

void BatchFeed::begin_epoch(uint64_t epoch, int64_t first_batch) {
  if (prefetcher_) {
    prefetcher_->begin_epoch(epoch, first_batch);
  } else {
    loader_->begin_epoch(epoch, first_batch);
  }
}

const data::FieldBatch* BatchFeed::next() {
  if (prefetcher_) {
    if (!prefetcher_->next(device_batch_)) return nullptr;
    batch_ = data::FieldBatch(loader_->fields(), device_batch_.fields);
    return &batch_;
  }
  if (!loader_->next(host_batch_)) return nullptr;
  batch_ = data::FieldBatch(loader_->fields(), host_batch_.fields);
  return &batch_;
}

void BatchFeed::release() {
  batch_.clear();
  host_batch_.release();
  device_batch_ = data::DeviceBatch();
}

Stream BatchFeed::compute_stream() const {
  return prefetcher_ ? prefetcher_->compute_stream() : host_stream();
}

// Batch slots in pinned memory when batches are copied to a device.
static Allocator* slot_allocator(Device device) { return device.is_host() ? nullptr : &pinned_allocator(); }

// The training loader's options for a set of `size` samples (sampler: the caller's, or the
// distributed one with several ranks).
static data::LoaderOptions train_options(int64_t size, std::shared_ptr<const data::Sampler> sampler,
                                         const TrainConfig& cfg, Device device, Shard shard, bool pinned_slots) {
  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.num_workers = cfg.num_workers;
  lo.prefetch_factor = cfg.prefetch_factor;
  lo.drop_last = true;
  lo.sampler = std::move(sampler);
  if (shard.world_size > 1) {
    TD_CHECK_ARG(lo.sampler == nullptr, "train", "--shuffle {}: a distributed run takes --shuffle full", cfg.shuffle);
    lo.sampler = std::make_shared<data::DistributedSampler>(size, shard.world_size, shard.rank, true, cfg.seed);
  }
  lo.shuffle = lo.sampler == nullptr;
  lo.seed = cfg.seed;
  lo.allocator = pinned_slots ? &pinned_allocator() : slot_allocator(device);
  lo.skip_corrupt = cfg.skip_corrupt;
  // E.g. a --val-split that holds out every file of a folder of one-image classes.
  TD_CHECK_ARG(size > 0, "train", "the training set holds no samples: expected at least one to train on");
  return lo;
}

static std::unique_ptr<BatchFeed> train_feed(std::unique_ptr<data::Loader> loader, const TrainConfig& cfg,
                                             Device device, int64_t size) {
  TD_CHECK_ARG(loader->num_batches() > 0, "train",
               "--batch-size {} is larger than the {} training samples (drop_last leaves no batch)", cfg.batch_size,
               size);
  return std::make_unique<BatchFeed>(std::move(loader), device, cfg.log_interval, "train",
                                     "training batches: lower --log-interval or --batch-size");
}

std::unique_ptr<BatchFeed> make_train_feed(const std::shared_ptr<const data::FieldDataset>& set,
                                           const TrainConfig& cfg, Device device, Shard shard, bool pinned_slots) {
  data::LoaderOptions lo = train_options(set->size(), train_sampler(*set, cfg), cfg, device, shard, pinned_slots);
  return train_feed(std::make_unique<data::Loader>(set, std::move(lo)), cfg, device, set->size());
}

// The test loader's options: every sample once, in order (a rank's share with several ranks).
static data::LoaderOptions test_options(int64_t size, const TrainConfig& cfg, Device device, const char* op,
                                        Shard shard) {
  // Loss and accuracy over no samples would be reported as 0 and 0%: a figure of nothing.
  TD_CHECK_ARG(size > 0, op, "the test set holds no samples: expected at least one to evaluate");
  data::LoaderOptions lo;
  lo.allocator = slot_allocator(device);
  lo.batch_size = cfg.eval_batch_size;
  lo.num_workers = cfg.num_workers;
  lo.prefetch_factor = cfg.prefetch_factor;
  lo.drop_last = false;  // every test sample counts exactly once
  lo.name = "eval loader";
  lo.shuffle = false;
  if (shard.world_size > 1) lo.sampler = std::make_shared<data::ShardSampler>(size, shard.world_size, shard.rank);
  lo.skip_corrupt = cfg.skip_corrupt;
  return lo;
}

std::unique_ptr<BatchFeed> make_test_feed(const std::shared_ptr<const data::FieldDataset>& set,
                                          const TrainConfig& cfg, Device device, const char* op, const char* knobs,
                                          Shard shard) {
  return std::make_unique<BatchFeed>(std::make_unique<data::Loader>(set, test_options(set->size(), cfg, device, op, shard)),
                                     device, cfg.log_interval, op, knobs);
}

}  // namespace tandem::train
