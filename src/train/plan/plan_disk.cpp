// plan_disk_tier (train/plan/plan_disk.h): the disk tier's files and window, as
// optim::OffloadOptimizer lays them out with a storage::DiskStore.
#include "train/plan/plan_disk.h"

#include <algorithm>
#include <vector>

#include "tandem/optim/offload.h"
#include "tandem/storage/disk_store.h"

namespace tandem::train {

void plan_disk_tier(nn::Module& model, const PlanInputs& in, bool adam, bool momentum, MemoryPlan& p) {
  std::vector<int64_t> numels;
  for (nn::Parameter* q : model.parameters())
    if (q->requires_grad) numels.push_back(q->value.numel());
  const auto buckets = optim::plan_offload_buckets(numels, optim::bucket_cap_bytes(in.bucket_cap_mb));
  const int64_t align = storage::DiskStore::kUnitAlign;
  int64_t total = 0, largest = 0;
  for (const optim::OffloadBucket& b : buckets) {
    int64_t n = 0;
    for (size_t i : b.params) n += (numels[i] + 15) / 16 * 16;
    total = (total + align - 1) / align * align + n;
    largest = std::max(largest, n);
  }
  const auto page = [](int64_t bytes) { return std::max<int64_t>((bytes + 4095) / 4096 * 4096, 4096); };
  const int64_t state_per_element = (adam ? 2 * in.moment_bytes : 0) + (momentum ? 4 : 0);
  p.on_disk.parameters += page(4 * total);
  if (adam) p.on_disk.optimizer_state += 2 * page(in.moment_bytes * total);
  if (momentum) p.on_disk.optimizer_state += page(4 * total);
  const int64_t units = std::min<int64_t>(static_cast<int64_t>(buckets.size()), in.disk_window_units);
  p.disk_window = std::min(units * largest * (4 + state_per_element), p.on_disk.total());
  p.host_pageable += p.disk_window;
  p.offload_dir = in.offload_dir;
  if (!in.offload_dir.empty()) p.disk_available = storage::free_bytes(in.offload_dir);
}

}  // namespace tandem::train
