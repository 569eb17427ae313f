#include "tandem/data/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data/synthetic_datasets.h"
#include "tandem/data/fused_image_transform.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;
using namespace std::chrono_literals;

namespace {

struct EpochData {
  std::vector<int64_t> sizes;
  std::vector<int64_t> labels;
  std::vector<uint32_t> image_bits;  // every image value's f32 bit pattern, in order
};

EpochData run_epoch(Loader& loader, uint64_t epoch) {
  EpochData d;
  loader.begin_epoch(epoch);
  Batch b;
  int64_t expect_index = 0;
  while (loader.next(b)) {
    EXPECT_EQ(b.index, expect_index++);
    EXPECT_EQ(b.epoch, epoch);
    d.sizes.push_back(b.size());
    const int64_t* l = b.target().data<int64_t>();
    d.labels.insert(d.labels.end(), l, l + b.size());
    const float* p = b.input().data<float>();
    for (int64_t k = 0; k < b.input().numel(); ++k) {
      uint32_t u;
      std::memcpy(&u, p + k, 4);
      d.image_bits.push_back(u);
    }
  }
  EXPECT_EQ(expect_index, loader.num_batches());
  return d;
}

LoaderOptions opts(int64_t batch_size, int num_workers, bool shuffle = true, bool drop_last = false,
                   uint64_t seed = 5) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.num_workers = num_workers;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.seed = seed;
  return o;
}

// An allocator that counts allocations, to show there are none per batch.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    ++allocs;
    return host_allocator().allocate(bytes);
  }
  void deallocate(void* p, size_t bytes) override { host_allocator().deallocate(p, bytes); }
  AllocatorStats stats() const override { return host_allocator().stats(); }
  Device device() const override { return Device{}; }
  std::atomic<int> allocs{0};
};

}  // namespace

TEST(Loader, EverySampleExactlyOncePerEpochWithMatchingImages) {
  auto ds = std::make_shared<IndexedDataset>(103, ImageDims{1, 3, 4});
  for (int workers : {0, 1, 4}) {
    Loader loader(ds, nullptr, opts(8, workers));  // null transform: v / 255
    for (uint64_t epoch : {0, 1}) {
      const EpochData d = run_epoch(loader, epoch);
      ASSERT_EQ(d.labels.size(), 103u);
      std::vector<int64_t> sorted = d.labels;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < 103; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], 1000 + i);
      // Labels untouched by the transform and images belong to the same sample as the label.
      for (size_t j = 0; j < d.labels.size(); ++j) {
        const int64_t idx = d.labels[j] - 1000;
        for (int k = 0; k < 12; ++k) {
          float v;
          std::memcpy(&v, &d.image_bits[j * 12 + static_cast<size_t>(k)], 4);
          ASSERT_EQ(v, static_cast<float>(ds->pixels(idx)[k]) / 255.0f) << "sample " << idx << " pixel " << k;
        }
      }
    }
  }
}

TEST(Loader, OrderIsAPureFunctionOfSeedAndEpoch) {
  auto ds = std::make_shared<IndexedDataset>(200, ImageDims{1, 2, 2});
  Loader a(ds, nullptr, opts(16, 2)), b(ds, nullptr, opts(16, 0)), c(ds, nullptr, opts(16, 2, true, false, 6));
  const auto a0 = run_epoch(a, 0).labels, a1 = run_epoch(a, 1).labels, a0again = run_epoch(a, 0).labels;
  EXPECT_NE(a0, a1);
  EXPECT_EQ(a0, a0again);
  EXPECT_EQ(run_epoch(b, 1).labels, a1);
  EXPECT_NE(run_epoch(c, 0).labels, a0);
  Loader seq(ds, nullptr, opts(16, 2, false));
  const auto s = run_epoch(seq, 3).labels;
  for (int64_t i = 0; i < 200; ++i) EXPECT_EQ(s[static_cast<size_t>(i)], 1000 + i);
}

TEST(Loader, BatchesAreBitIdenticalForAnyNumberOfWorkers) {
  auto ds = std::make_shared<IndexedDataset>(150, ImageDims{1, 6, 5});
  std::vector<EpochData> ref;
  {
    Loader l0(ds, test_augment(), opts(7, 0));
    ref = {run_epoch(l0, 0), run_epoch(l0, 1)};
  }
  EXPECT_NE(ref[0].image_bits, ref[1].image_bits);
  for (int workers : {1, 4}) {
    for (int prefetch : {1, 3}) {
      LoaderOptions o = opts(7, workers);
      o.prefetch_factor = prefetch;
      Loader l(ds, test_augment(), o);
      for (uint64_t e = 0; e < 2; ++e) {
        const EpochData d = run_epoch(l, e);
        EXPECT_EQ(d.labels, ref[e].labels) << workers << " workers";
        EXPECT_TRUE(d.image_bits == ref[e].image_bits) << workers << " workers, epoch " << e;
      }
    }
  }
}

TEST(Loader, LastBatchShapesWithAndWithoutDropLast) {
  auto ds = std::make_shared<IndexedDataset>(10, ImageDims{1, 3, 2});
  for (int workers : {0, 2}) {
    Loader keep(ds, nullptr, opts(4, workers, true, false));
    EXPECT_EQ(keep.num_batches(), 3);
    keep.begin_epoch(0);
    Batch b;
    std::vector<Shape> shapes;
    while (keep.next(b)) {
      shapes.push_back(b.input().shape());
      EXPECT_EQ(b.target().shape(), (Shape{b.size()}));
      EXPECT_EQ(b.target().dtype(), DType::i64);
      EXPECT_EQ(b.input().dtype(), DType::f32);
    }
    EXPECT_EQ(shapes, (std::vector<Shape>{{4, 1, 3, 2}, {4, 1, 3, 2}, {2, 1, 3, 2}}));
    EXPECT_FALSE(keep.next(b));  // stays at the end

    Loader drop(ds, nullptr, opts(4, workers, true, true));
    EXPECT_EQ(drop.num_batches(), 2);
    const EpochData d = run_epoch(drop, 0);
    EXPECT_EQ(d.sizes, (std::vector<int64_t>{4, 4}));
    // Full-size batches again in the next epoch after a short tail.
    const EpochData again = run_epoch(keep, 1);
    EXPECT_EQ(again.sizes, (std::vector<int64_t>{4, 4, 2}));
  }
  Loader tiny(ds, nullptr, opts(32, 2, false, true));
  EXPECT_EQ(tiny.num_batches(), 0);
  EXPECT_TRUE(run_epoch(tiny, 0).sizes.empty());
}

TEST(Loader, WorkerErrorNamesTheSampleIndex) {
  auto ds = std::make_shared<ThrowingDataset>(64, ImageDims{1, 2, 2}, 37);
  for (int workers : {0, 1, 3}) {
    Loader loader(ds, nullptr, opts(5, workers));
    for (uint64_t epoch : {0, 1}) {
      loader.begin_epoch(epoch);
      Batch b;
      int64_t seen = 0;
      try {
        while (loader.next(b)) seen += b.size();
        FAIL() << "no error";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::format);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("[loader] sample 37 (batch "), std::string::npos) << msg;
        EXPECT_NE(msg.find("[test-record] corrupt record"), std::string::npos) << msg;
      }
      EXPECT_LT(seen, 64);
      EXPECT_THROW(loader.next(b), Error);  // sticky until the next epoch
    }
  }
}

namespace {
// IndexedDataset that claims `classes` classes and gives sample `bad` the label `label`
// (every other sample: index % classes).
class MislabelledDataset final : public IndexedDataset {
 public:
  MislabelledDataset(int64_t n, int64_t classes, int64_t bad, int64_t label)
      : IndexedDataset(n, ImageDims{1, 2, 2}), classes_(classes), bad_(bad), label_(label) {}
  int64_t num_classes() const override { return classes_; }
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    Sample s = IndexedDataset::get(index, scratch);
    s.label = index == bad_ ? label_ : index % classes_;
    return s;
  }

 private:
  int64_t classes_, bad_, label_;
};
}  // namespace

// A label outside the dataset's classes used to reach the loss, which named an op and a
// batch row (cpu) or only counted it (devices, read back steps later); the loader now refuses
// it where it is read, naming the sample.
TEST(Loader, LabelOutsideTheDatasetsClassesNamesTheSample) {
  for (int64_t label : {int64_t{4}, int64_t{-1}, int64_t{1} << 40}) {
    auto ds = std::make_shared<MislabelledDataset>(40, 4, 13, label);
    for (int workers : {0, 2}) {
      Loader loader(ds, nullptr, opts(8, workers));
      loader.begin_epoch(0);
      Batch b;
      try {
        while (loader.next(b)) {
        }
        FAIL() << "no error for label " << label;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::format);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("[loader] sample 13 (batch "), std::string::npos) << msg;
        EXPECT_NE(msg.find("label " + std::to_string(label) +
                           " is outside the dataset's 4 classes: expected [0, 4)"),
                  std::string::npos)
            << msg;
      }
    }
  }
  // Labels at the edges pass.
  Loader ok(std::make_shared<MislabelledDataset>(40, 4, 13, 3), nullptr, opts(8, 0, false));
  EXPECT_EQ(run_epoch(ok, 0).labels[13], 3);
}

TEST(Loader, LeavingAnEpochEarlyAndDestroyingMidEpochReturnPromptly) {
  // Slow samples keep workers mid-batch; a consumer that stops reading leaves them blocked on
  // a full queue. Neither may hang begin_epoch() or the destructor.
  auto slow = std::make_shared<SleepyDataset>(400, ImageDims{1, 2, 2}, 300us);
  {
    Loader loader(slow, nullptr, opts(4, 4));
    loader.begin_epoch(0);
    Batch b;
    ASSERT_TRUE(loader.next(b));
    std::this_thread::sleep_for(20ms);  // let the workers fill every slot and block
    loader.begin_epoch(1);              // abandon epoch 0 mid-way; b stays valid
    EXPECT_EQ(b.size(), 4);
    EXPECT_EQ(b.epoch, 0u);
    const EpochData d = run_epoch(loader, 1);  // the new epoch is complete and correct
    std::vector<int64_t> sorted = d.labels;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted.size(), 400u);
    for (int64_t i = 0; i < 400; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], 1000 + i);
    loader.begin_epoch(2);
    ASSERT_TRUE(loader.next(b));
  }  // destroyed mid-epoch, workers busy
  for (int workers : {1, 4}) {
    Batch kept;
    {
      Loader loader(slow, nullptr, opts(4, workers));
      loader.begin_epoch(0);
      ASSERT_TRUE(loader.next(kept));
      std::this_thread::sleep_for(20ms);
    }  // destroyed with a full queue
    EXPECT_EQ(kept.target().size(0), 4);  // a batch outlives its loader
    EXPECT_GE(kept.target().data<int64_t>()[0], 1000);
    kept.release();
  }
}

TEST(Loader, NoAllocationPerBatchAndPoolGrowsOnlyForHeldBatches) {
  auto ds = std::make_shared<IndexedDataset>(100, ImageDims{1, 4, 4});
  CountingAllocator alloc;
  LoaderOptions o = opts(10, 2);
  o.allocator = &alloc;
  Loader loader(ds, test_augment(), o);
  EXPECT_EQ(loader.num_slots(), 2 * 2 + 1);
  const int after_construction = alloc.allocs.load();
  EXPECT_EQ(after_construction, 2 * 5);  // images + labels per slot
  for (uint64_t e = 0; e < 3; ++e) run_epoch(loader, e);
  EXPECT_EQ(alloc.allocs.load(), after_construction);
  EXPECT_EQ(loader.num_slots(), 5);

  // Holding every batch of an epoch: the pool grows instead of deadlocking, and every held
  // batch keeps its own contents.
  loader.begin_epoch(7);
  std::vector<Batch> held;
  for (;;) {
    Batch b;
    if (!loader.next(b)) break;
    held.push_back(std::move(b));
  }
  ASSERT_EQ(held.size(), 10u);
  EXPECT_EQ(loader.num_slots(), 10);
  std::vector<int64_t> labels;
  for (const Batch& b : held) labels.insert(labels.end(), b.target().data<int64_t>(), b.target().data<int64_t>() + b.size());
  std::sort(labels.begin(), labels.end());
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(labels[static_cast<size_t>(i)], 1000 + i);
  held.clear();
  run_epoch(loader, 8);
  EXPECT_EQ(loader.num_slots(), 10);
}

TEST(Loader, SlotsAreCappedByTheBatchesOfAnEpoch) {
  // 3 batches per epoch: 8 workers x prefetch 4 need 3 in flight, not 32.
  auto ds = std::make_shared<IndexedDataset>(30, ImageDims{1, 4, 4});
  CountingAllocator alloc;
  LoaderOptions o = opts(10, 8, false);
  o.prefetch_factor = 4;
  o.allocator = &alloc;
  Loader loader(ds, test_augment(), o);
  EXPECT_EQ(loader.num_slots(), 3 + 1);
  EXPECT_EQ(alloc.allocs.load(), 2 * 4);  // images + labels per slot
  for (uint64_t e = 0; e < 2; ++e) {
    const EpochData d = run_epoch(loader, e);  // sequential: every sample once, in order
    ASSERT_EQ(d.labels.size(), 30u);
    for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(d.labels[static_cast<size_t>(i)], 1000 + i);
  }
  EXPECT_EQ(loader.num_slots(), 4);
  loader.set_prefetch_factor(8);  // more per worker: still no more than the epoch's batches
  EXPECT_EQ(loader.num_slots(), 4);
}

TEST(Loader, DistributedSamplerSplitsAnEpochAcrossRanks) {
  auto ds = std::make_shared<IndexedDataset>(25, ImageDims{1, 2, 2});
  std::vector<int64_t> all;
  for (int rank = 0; rank < 4; ++rank) {
    LoaderOptions o = opts(3, 1, false);
    o.sampler = std::make_shared<DistributedSampler>(25, 4, rank, true, 9);
    Loader l(ds, nullptr, o);
    EXPECT_EQ(l.num_samples(), 7);
    EXPECT_EQ(l.num_batches(), 3);
    const auto labels = run_epoch(l, 0).labels;
    EXPECT_EQ(labels.size(), 7u);
    all.insert(all.end(), labels.begin(), labels.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 25u);  // 28 positions, 3 padded by wrapping
}

TEST(Loader, RejectsBadOptionsAndMisuse) {
  auto ds = std::make_shared<IndexedDataset>(10, ImageDims{1, 2, 2});
  EXPECT_THROW(Loader(ds, nullptr, opts(0, 0)), Error);
  EXPECT_THROW(Loader(ds, nullptr, opts(1, -1)), Error);
  LoaderOptions o = opts(1, 1);
  o.prefetch_factor = 0;
  EXPECT_THROW(Loader(ds, nullptr, o), Error);
  o = opts(1, 1, true);
  o.sampler = std::make_shared<SequentialSampler>(10);
  EXPECT_THROW(Loader(ds, nullptr, o), Error);
  Loader l(ds, nullptr, opts(2, 1));
  Batch b;
  EXPECT_THROW(l.next(b), Error);  // before begin_epoch()
}
