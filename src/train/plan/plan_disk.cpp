// plan_disk_tier (train/plan/plan_disk.h): the disk tier's files and window, as
// optim::OffloadOptimizer lays them out with a storage::DiskStore.
#include "train/plan/plan_disk.h"

#include <algorithm>
#include <vector>

#include "tandem/optim/offload.h"
#include "tandem/storage/disk_store.h"

namespace tandem::train {

namespace {

// The files of `total` elements (the master copy's when `master`, the moments or momentum),
// and a window of in.disk_window_units units of `largest` elements of each in pageable memory.
void add_files(int64_t total, int64_t largest, int64_t units, bool master, const PlanInputs& in, bool adam,
               bool momentum, MemoryPlan& p) {
  const auto page = [](int64_t bytes) { return std::max<int64_t>((bytes + 4095) / 4096 * 4096, 4096); };
  const int64_t state_per_element = (adam ? 2 * in.moment_bytes : 0) + (momentum ? 4 : 0);
  if (master) p.on_disk.parameters += page(4 * total);
  if (adam) p.on_disk.optimizer_state += 2 * page(in.moment_bytes * total);
  if (momentum) p.on_disk.optimizer_state += page(4 * total);
  const int64_t window = std::min<int64_t>(units, in.disk_window_units);
  p.disk_window = std::min(window * largest * ((master ? 4 : 0) + state_per_element), p.on_disk.total());
  p.host_pageable += p.disk_window;
  p.offload_dir = in.offload_dir;
  if (!in.offload_dir.empty()) p.disk_available = storage::free_bytes(in.offload_dir);
}

}  // namespace

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
  add_files(total, largest, static_cast<int64_t>(buckets.size()), true, in, adam, momentum, p);
}

void plan_streamed_disk_tier(const std::vector<std::vector<int64_t>>& parts, bool copies, const PlanInputs& in,
                             bool adam, bool momentum, MemoryPlan& p) {
  const int64_t align = storage::DiskStore::kUnitAlign;
  int64_t total = 0, largest = 0, units = 0;
  for (const std::vector<int64_t>& part : parts) {
    if (part.empty()) continue;
    int64_t n = 0;
    for (int64_t e : part) n += (e + 15) / 16 * 16;
    total = (total + align - 1) / align * align + n;
    largest = std::max(largest, n);
    ++units;
  }
  add_files(total, largest, units, copies, in, adam, momentum, p);
}

}  // namespace tandem::train
