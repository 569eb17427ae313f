// DevicePrefetcher on the virtual device, whose copies really run later on another thread:
// batches arrive intact and in order (ragged last batch included) over several epochs with
// throttled copies; a host slot is not refilled before the copy reading it ran; a device
// buffer is not overwritten before the compute stream finished with it; leaving an epoch
// early and destroying the prefetcher with copies in flight return promptly; host_lead
// deepens the ring so that a consumer running ahead of a stalled compute stream is not made
// to wait, while without it the same consumer waits for the compute stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
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
  return {b.input().to(Device{}, stream), b.target().to(Device{}, stream)};
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
// A 7-batch loader without workers and prefetcher options with a compute stream of its own
// (so that a test can hold it).
struct OwnComputeStream {
  Device dev = throttled_virt();
  std::shared_ptr<IndexedDataset> set = std::make_shared<IndexedDataset>(kSamples, kDims);
  std::unique_ptr<data::Loader> loader = make_loader(set, 0);
  data::PrefetcherOptions po;
  OwnComputeStream() { po.compute_stream = runtime(DeviceKind::virt).new_stream(dev.index); }
};

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
        EXPECT_EQ(b.input().device(), dev);
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
  OwnComputeStream f;
  data::PrefetcherOptions& po = f.po;
  data::DevicePrefetcher pf(*f.loader, f.dev, po);
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
  finish_epoch_and_check(pf, got, *f.set);
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

// Reads one epoch with the compute stream stalled behind a gate, the ring's buffers allocated
// by reserve() (or by a warm-up epoch). The gate opens from another thread after `open_after`
// at the latest (so a consumer that waits for the compute stream is measured, not hung).
// Returns the prefetcher's stats for the stalled epoch; the batches are checked afterwards.
data::PrefetcherStats epoch_with_stalled_compute(int host_lead, bool warm_up, std::chrono::milliseconds open_after) {
  OwnComputeStream f;
  data::PrefetcherOptions& po = f.po;
  po.host_lead = host_lead;
  data::DevicePrefetcher pf(*f.loader, f.dev, po);
  EXPECT_EQ(pf.ring_size(), 2 + host_lead + 1);
  data::DeviceBatch b;
  if (warm_up) {
    pf.begin_epoch(0);
    while (pf.next(b)) {
    }
    po.compute_stream.synchronize();
  } else {
    pf.reserve();
  }
  const data::PrefetcherStats before = pf.stats();
  Gate gate;
  gate.hold(po.compute_stream);
  std::promise<void> finished;
  std::thread opener([&gate, open_after, done = finished.get_future()] {
    done.wait_for(open_after);
    gate.open();
  });
  pf.begin_epoch(1);
  std::vector<HostBatch> got;
  while (pf.next(b)) {
    EXPECT_EQ(b.index, static_cast<int64_t>(got.size()));
    got.push_back(read_back(b, pf.compute_stream()));  // enqueued behind the gate
  }
  data::PrefetcherStats s = pf.stats();
  s.waits -= before.waits;
  s.compute_wait_seconds -= before.compute_wait_seconds;
  s.copy_wait_seconds -= before.copy_wait_seconds;
  finished.set_value();
  opener.join();
  EXPECT_EQ(got.size(), 7u);
  for (size_t i = 0; i < got.size(); ++i) expect_batch(*f.set, got[i], static_cast<int64_t>(i));
  return s;
}

TEST(DevicePrefetcher, HostLeadLetsTheConsumerRunAheadOfAStalledComputeStream) {
  // A ring of 2 + 4 + 1 = 7 buffers holds the whole 7-batch epoch: no copy has to wait for the
  // stalled compute stream, so the consumer takes every batch without waiting for it (it may
  // still wait for the throttled copies themselves). Buffers from reserve() or from an epoch.
  for (bool warm_up : {false, true}) {
    SCOPED_TRACE(warm_up ? "warm-up epoch" : "reserve()");
    const data::PrefetcherStats s = epoch_with_stalled_compute(4, warm_up, std::chrono::seconds(20));
    EXPECT_EQ(s.compute_wait_seconds, 0.0);
  }
}

TEST(DevicePrefetcher, WithoutHostLeadTheConsumerWaitsForTheComputeStream) {
  // A ring of 3: batch 3's copy goes into batch 0's buffer and waits for the compute stream,
  // so next() waits on the host until the gate opens (after 50 ms).
  const data::PrefetcherStats s = epoch_with_stalled_compute(0, false, std::chrono::milliseconds(50));
  EXPECT_GT(s.waits, 0);
  EXPECT_GT(s.compute_wait_seconds, 0.02);
}

TEST(DevicePrefetcher, FirstUseAllocationWaitsForQueuedComputeWork) {
  // Without reserve() the buffers are allocated at the first batches; memory the allocator
  // hands out may still be used by queued compute work, so those copies wait for it.
  OwnComputeStream f;
  data::PrefetcherOptions& po = f.po;
  data::DevicePrefetcher pf(*f.loader, f.dev, po);
  Gate gate;
  gate.hold(po.compute_stream);
  pf.begin_epoch(0);
  data::DeviceBatch b;
  ASSERT_TRUE(pf.next(b));
  EXPECT_FALSE(b.ready.query());  // its copy waits behind the gate on the compute stream
  gate.open();
  std::vector<HostBatch> got{read_back(b, pf.compute_stream())};
  finish_epoch_and_check(pf, got, *f.set);
}

TEST(DevicePrefetcher, RejectsBadDepth) {
  auto set = std::make_shared<IndexedDataset>(kSamples, kDims);
  auto loader = make_loader(set, 0);
  data::PrefetcherOptions po;
  po.prefetch_depth = 0;
  EXPECT_THROW({ data::DevicePrefetcher pf(*loader, throttled_virt(), po); }, Error);
  po.prefetch_depth = 2;
  po.host_lead = -1;
  EXPECT_THROW({ data::DevicePrefetcher pf(*loader, throttled_virt(), po); }, Error);
  po.host_lead = data::kMaxHostLead + 1;
  EXPECT_THROW({ data::DevicePrefetcher pf(*loader, throttled_virt(), po); }, Error);
}

}  // namespace
