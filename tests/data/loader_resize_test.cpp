// Loader::set_num_workers / set_prefetch_factor while an epoch runs: the batches stay
// bit-identical to a run with fixed settings (order and augmentation), also when switching to
// making batches in the consumer's thread and back; surplus workers leave; slots are added
// for more batches in flight and never freed; bad values are rejected. Loader::stats() counts
// batches and busy time.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "data/synthetic_datasets.h"
#include "tandem/data/fused_image_transform.h"
#include "tandem/data/loader.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;
using namespace std::chrono_literals;

namespace {

LoaderOptions opts(int num_workers, int prefetch_factor = 2) {
  LoaderOptions o;
  o.batch_size = 5;
  o.num_workers = num_workers;
  o.prefetch_factor = prefetch_factor;
  o.shuffle = true;
  o.seed = 11;
  return o;
}

// Labels and image bits of one epoch; `change(i)` runs before batch i is requested.
template <typename Change>
std::vector<uint32_t> epoch_bits(Loader& loader, uint64_t epoch, Change change) {
  std::vector<uint32_t> bits;
  loader.begin_epoch(epoch);
  Batch b;
  for (int64_t i = 0;; ++i) {
    change(i);
    if (!loader.next(b)) break;
    EXPECT_EQ(b.index, i);
    for (int64_t j = 0; j < b.size(); ++j) bits.push_back(static_cast<uint32_t>(b.target().data<int64_t>()[j]));
    const float* p = b.input().data<float>();
    for (int64_t k = 0; k < b.input().numel(); ++k) {
      uint32_t u;
      std::memcpy(&u, p + k, 4);
      bits.push_back(u);
    }
  }
  return bits;
}

}  // namespace

TEST(LoaderResize, ChangingWorkersAndPrefetchMidEpochKeepsEveryBatch) {
  // Slow samples keep workers mid-batch when the settings change.
  auto ds = std::make_shared<SleepyDataset>(120, ImageDims{1, 6, 5}, 50us);
  Loader ref_loader(ds, test_augment(), opts(0));
  const std::vector<uint32_t> ref0 = epoch_bits(ref_loader, 0, [](int64_t) {});
  const std::vector<uint32_t> ref1 = epoch_bits(ref_loader, 1, [](int64_t) {});

  Loader loader(ds, test_augment(), opts(1));
  // Epoch 0: 1 -> 4 workers, prefetch 2 -> 4 -> 1, down to 2 workers, to 0 (consumer thread),
  // back to 3.
  const std::vector<uint32_t> got0 = epoch_bits(loader, 0, [&](int64_t i) {
    if (i == 2) loader.set_num_workers(4);
    if (i == 5) loader.set_prefetch_factor(4);
    if (i == 8) loader.set_prefetch_factor(1);
    if (i == 10) loader.set_num_workers(2);
    if (i == 13) loader.set_num_workers(0);
    if (i == 18) loader.set_num_workers(3);
  });
  EXPECT_TRUE(got0 == ref0);
  EXPECT_EQ(loader.num_workers(), 3);
  EXPECT_EQ(loader.prefetch_factor(), 1);
  // 4 workers x prefetch 4 + 1 held: the most the pool needed; nothing was freed.
  EXPECT_EQ(loader.num_slots(), 4 * 4 + 1);
  // Epoch 1 with the final settings, and one more change in its middle.
  const std::vector<uint32_t> got1 = epoch_bits(loader, 1, [&](int64_t i) {
    if (i == 7) loader.set_num_workers(1);
  });
  EXPECT_TRUE(got1 == ref1);
  EXPECT_EQ(loader.num_slots(), 17);
}

TEST(LoaderResize, StartingWithoutWorkersAndAddingThem) {
  auto ds = std::make_shared<IndexedDataset>(60, ImageDims{1, 4, 4});
  Loader ref_loader(ds, test_augment(), opts(2));
  const std::vector<uint32_t> ref = epoch_bits(ref_loader, 3, [](int64_t) {});
  Loader loader(ds, test_augment(), opts(0));
  EXPECT_EQ(loader.num_slots(), 1);
  const std::vector<uint32_t> got = epoch_bits(loader, 3, [&](int64_t i) {
    if (i == 1) loader.set_num_workers(2);
  });
  EXPECT_TRUE(got == ref);
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 1);
}

TEST(LoaderResize, ConsumerSlotsAreAllocatedUpFrontAndKeptWhileHeld) {
  // 60 samples, batch 5 (opts): 12 batches. 2 workers x prefetch 2 in flight + 1 held, then 6
  // held (a prefetcher's copies in flight): slots for all at once, and a consumer holding 6
  // batches needs no more; capped by the epoch's batches; never lowered.
  auto ds = std::make_shared<IndexedDataset>(60, ImageDims{1, 4, 4});
  Loader ref_loader(ds, test_augment(), opts(2));
  const std::vector<uint32_t> ref = epoch_bits(ref_loader, 2, [](int64_t) {});
  Loader loader(ds, test_augment(), opts(2));
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 1);
  loader.set_consumer_slots(6);
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 6);
  loader.begin_epoch(2);
  std::vector<Batch> held(6);
  for (int round = 0; round < 2; ++round)
    for (Batch& b : held) ASSERT_TRUE(loader.next(b));  // the previous batch in b goes back
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 6);
  held.clear();
  loader.set_consumer_slots(2);  // not lowered
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 6);
  loader.set_consumer_slots(100);
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 12);
  EXPECT_TRUE(epoch_bits(loader, 2, [](int64_t) {}) == ref);  // same batches either way
  EXPECT_THROW(loader.set_consumer_slots(0), Error);
}

TEST(LoaderResize, DestroyingRightAfterAReductionDoesNotHang) {
  auto slow = std::make_shared<SleepyDataset>(400, ImageDims{1, 2, 2}, 300us);
  Loader loader(slow, nullptr, opts(4));
  loader.begin_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  loader.set_num_workers(1);  // three workers leave after their current batch
  ASSERT_TRUE(loader.next(b));
  loader.set_num_workers(3);
  ASSERT_TRUE(loader.next(b));
}

TEST(LoaderResize, StatsCountBatchesAndBusyTime) {
  auto slow = std::make_shared<SleepyDataset>(40, ImageDims{1, 2, 2}, 200us);
  Loader loader(slow, nullptr, opts(2));
  epoch_bits(loader, 0, [](int64_t) {});
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.batches, 8);
  // Every sample sleeps 200 us, so making the 40 samples took at least 8 ms of worker time.
  EXPECT_GE(s.busy_seconds, 40 * 200e-6);
  // The consumer takes each batch as it comes and does nothing else: it waited for most of them.
  EXPECT_GT(s.wait_seconds, 0.0);
  EXPECT_LE(s.wait_seconds, 60.0);
}

TEST(LoaderResize, RejectsBadValues) {
  auto ds = std::make_shared<IndexedDataset>(10, ImageDims{1, 2, 2});
  Loader loader(ds, nullptr, opts(1));
  try {
    loader.set_num_workers(-1);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("[loader] set_num_workers: expected num_workers >= 0, found -1"),
              std::string::npos);
  }
  EXPECT_THROW(loader.set_prefetch_factor(0), Error);
  EXPECT_EQ(loader.num_workers(), 1);
  EXPECT_EQ(loader.prefetch_factor(), 2);
}
