// DevicePrefetcher on the virtual device, whose copies really run later on another thread:
// batches arrive intact and in order (ragged last batch included) over several epochs with
// throttled copies; a host slot is not refilled before the copy reading it ran; a device
// buffer is not overwritten before the compute stream finished with it; leaving an epoch
// early and destroying the prefetcher with copies in flight return promptly.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "synthetic_datasets.h"
#include "tandem/data/loader.h"
#include "tandem/data/prefetcher.h"
#include "tandem/pinned.h"
#include "tandem/virt.h"
#include "core/virt_test_util.h"

using namespace tandem;
using tandem::testing::Gate;
using tandem::testing::IndexedDataset;

namespace {

constexpr data::ImageDims kDims{1, 4, 4};
constexpr int64_t kSamples = 50, kBatch = 8;  // 7 batches, the last holds 2 samples

Device throttled_virt() {
  // 10 MB/s and 500 us per copy: every copy is still pending when the next one is issued.
  configure_virt(DeviceSpec::parse("virt:1?bw=0.01&latency_us=500"));
  return Device{DeviceKind::virt, 1};
}

std::unique_ptr<data::Loader> make_loader(const std::shared_ptr<IndexedDataset>& set, int num_workers) {
  data::LoaderOptions lo;
  lo.batch_size = kBatch;
  lo.num_workers = num_workers;
  lo.allocator = &pinned_allocator();
  return std::make_unique<data::Loader>(set, nullptr, lo);
}

// Host copies of a device batch, read on `stream` (ordered after the batch's copy).
struct HostBatch {
  Tensor images, labels;
};
HostBatch read_back(const data::DeviceBatch& b, const Stream& stream) {
  return {b.images.to(Device{}, stream), b.labels.to(Device{}, stream)};
}

// Batch `index` of an unshuffled epoch holds samples index*kBatch ...: pixels v/255, label 1000+i.
void expect_batch(const IndexedDataset& set, const HostBatch& h, int64_t index) {
  h.images.storage()->pending_write().synchronize();
  h.labels.storage()->pending_write().synchronize();
  const int64_t first = index * kBatch, n = std::min(kBatch, kSamples - first);
  ASSERT_EQ(h.images.shape(), (Shape{n, 1, 4, 4})) << "batch " << index;
  ASSERT_EQ(h.labels.shape(), (Shape{n})) << "batch " << index;
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(h.labels.data<int64_t>()[j], 1000 + first + j) << "batch " << index << " row " << j;
    const uint8_t* px = set.pixels(first + j);
    for (int64_t k = 0; k < kDims.numel(); ++k)
      ASSERT_EQ(h.images.data<float>()[j * kDims.numel() + k], static_cast<float>(px[k]) / 255.0f)
          << "batch " << index << " row " << j << " pixel " << k;
  }
}

// Reads the rest of the epoch after `got` and checks all 7 batches.
void finish_epoch_and_check(data::DevicePrefetcher& pf, std::vector<HostBatch>& got, const IndexedDataset& set) {
  data::DeviceBatch b;
  while (pf.next(b)) got.push_back(read_back(b, pf.compute_stream()));
  ASSERT_EQ(got.size(), 7u);
  for (size_t i = 0; i < got.size(); ++i) expect_batch(set, got[i], static_cast<int64_t>(i));
}

TEST(DevicePrefetcher, BatchesArriveIntactAndInOrderWithThrottledCopies) {
  const Device dev = throttled_virt();
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  for (int workers : {0, 2}) {
    auto loader = make_loader(set, workers);
    data::DevicePrefetcher pf(*loader, dev);
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      pf.begin_epoch(epoch);
      std::vector<HostBatch> got;
      data::DeviceBatch b;
      int64_t expected = 0;
      while (pf.next(b)) {
        EXPECT_EQ(b.index, expected++);
        EXPECT_EQ(b.epoch, epoch);
        EXPECT_EQ(b.images.device(), dev);
        EXPECT_LE(pf.held_slots(), 2);
        got.push_back(read_back(b, pf.compute_stream()));
      }
      ASSERT_EQ(expected, 7) << "workers " << workers;
      for (size_t i = 0; i < got.size(); ++i) expect_batch(*set, got[i], static_cast<int64_t>(i));
    }
  }
}

TEST(DevicePrefetcher, HostSlotIsNotRefilledBeforeItsCopyRan) {
  // num_workers = 0: the loader fills slots inside next(), so the order of events is fixed.
  // With the copy stream held, the prefetcher takes batches 0 and 1; had it returned batch
  // 0's slot before that copy ran, batch 1 would be collated into it and batch 0 would
  // arrive with batch 1's samples.
  const Device dev = throttled_virt();
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  auto loader = make_loader(set, 0);
  data::PrefetcherOptions po;
  po.copy_stream = runtime(DeviceKind::virt).new_stream(dev.index);
  Gate gate;
  gate.hold(po.copy_stream);
  data::DevicePrefetcher pf(*loader, dev, po);
  pf.begin_epoch(0);
  data::DeviceBatch b;
  ASSERT_TRUE(pf.next(b));
  EXPECT_FALSE(b.ready.query());  // the host did not wait for the copy
  EXPECT_EQ(pf.held_slots(), 2);
  std::vector<HostBatch> got{read_back(b, pf.compute_stream())};
  gate.open();
  finish_epoch_and_check(pf, got, *set);
}

TEST(DevicePrefetcher, DeviceBufferIsNotOverwrittenBeforeComputeUsedIt) {
  // With the compute stream held, the consumer enqueues reads of batches 0 and 1 and asks for
  // batches 2 and 3, whose copies go into the buffers of batches 0 and 1 (a ring of 3). Those
  // copies must wait until the compute stream passed the reads.
  const Device dev = throttled_virt();
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  auto loader = make_loader(set, 0);
  data::PrefetcherOptions po;
  po.compute_stream = runtime(DeviceKind::virt).new_stream(dev.index);
  data::DevicePrefetcher pf(*loader, dev, po);
  // Warm-up epoch: the ring's buffers get allocated (a copy into a fresh buffer also waits
  // for the compute stream, which would otherwise be held below).
  pf.begin_epoch(0);
  data::DeviceBatch b;
  while (pf.next(b)) {
  }
  Gate gate;
  gate.hold(po.compute_stream);
  pf.begin_epoch(1);
  std::vector<HostBatch> got;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(pf.next(b));
    EXPECT_EQ(b.index, i);
    got.push_back(read_back(b, pf.compute_stream()));
  }
  gate.open();
  finish_epoch_and_check(pf, got, *set);
}

TEST(DevicePrefetcher, EarlyExitAndDestructionMidEpochReturn) {
  const Device dev = throttled_virt();
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  auto loader = make_loader(set, 2);
  {
    data::DevicePrefetcher pf(*loader, dev);
    pf.begin_epoch(0);
    data::DeviceBatch b;
    ASSERT_TRUE(pf.next(b));
    pf.begin_epoch(1);  // copies of epoch 0 in flight
    std::vector<HostBatch> got;
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(pf.next(b));
      EXPECT_EQ(b.epoch, 1u);
      EXPECT_EQ(b.index, i);
      got.push_back(read_back(b, pf.compute_stream()));
    }
    for (size_t i = 0; i < got.size(); ++i) expect_batch(*set, got[i], static_cast<int64_t>(i));
    ASSERT_TRUE(pf.next(b));
  }  // destroyed with copies in flight and a batch held
  // The loader still works for a new prefetcher afterwards.
  data::DevicePrefetcher pf(*loader, dev);
  pf.begin_epoch(2);
  data::DeviceBatch b;
  int64_t n = 0;
  while (pf.next(b)) ++n;
  EXPECT_EQ(n, 7);
  virt_current_stream(dev.index).synchronize();
}

TEST(DevicePrefetcher, RejectsBadDepth) {
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  auto loader = make_loader(set, 0);
  data::PrefetcherOptions po;
  po.prefetch_depth = 0;
  EXPECT_THROW({ data::DevicePrefetcher pf(*loader, throttled_virt(), po); }, Error);
}

}  // namespace
