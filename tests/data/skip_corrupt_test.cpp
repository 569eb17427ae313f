// LoaderOptions::skip_corrupt: a sample whose get() throws io/format errors is replaced by the
// next index that works, the same way for any num_workers, and listed in skipped_samples();
// other errors still stop the epoch, and without the option the first bad sample does.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "data/synthetic_datasets.h"
#include "tandem/data/loader.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using namespace tandem::testing;

namespace {

constexpr ImageDims kDims{1, 4, 4};

// IndexedDataset whose get() throws Error(code) for every index in `bad`.
class BadSetDataset final : public IndexedDataset {
 public:
  BadSetDataset(int64_t n, std::set<int64_t> bad, ErrorCode code = ErrorCode::format)
      : IndexedDataset(n, kDims), bad_(std::move(bad)), code_(code) {}
  Sample get(int64_t index, std::vector<uint8_t>& scratch) const override {
    if (bad_.count(index)) throw_error(code_, "test-image", "file " + std::to_string(index) + " is truncated");
    return IndexedDataset::get(index, scratch);
  }

 private:
  std::set<int64_t> bad_;
  ErrorCode code_;
};

// The labels of one epoch, in batch order.
std::vector<int64_t> epoch_labels(Loader& loader, uint64_t epoch) {
  loader.begin_epoch(epoch);
  std::vector<int64_t> labels;
  Batch b;
  while (loader.next(b))
    for (int64_t i = 0; i < b.size(); ++i) labels.push_back(b.target().data<int64_t>()[i]);
  return labels;
}

LoaderOptions opts(int workers) {
  LoaderOptions o;
  o.batch_size = 3;
  o.num_workers = workers;
  o.skip_corrupt = true;
  return o;
}

}  // namespace

TEST(SkipCorrupt, ReplacesBadSamplesByTheNextGoodIndex) {
  auto ds = std::make_shared<BadSetDataset>(10, std::set<int64_t>{2, 3, 9});
  Loader loader(ds, nullptr, opts(0));
  const std::vector<int64_t> labels = epoch_labels(loader, 0);
  // 2 and 3 become 4; 9 wraps around to 0.
  EXPECT_EQ(labels, (std::vector<int64_t>{1000, 1001, 1004, 1004, 1004, 1005, 1006, 1007, 1008, 1000}));
  const std::vector<std::string> skipped = loader.skipped_samples();
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_NE(skipped[0].find("sample 2: [test-image] file 2 is truncated"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("sample 3:"), std::string::npos);
  EXPECT_NE(skipped[2].find("sample 9:"), std::string::npos);
  // The list is per epoch: begin_epoch clears it, the next epoch fills it again.
  loader.begin_epoch(1);
  EXPECT_TRUE(loader.skipped_samples().empty());
}

TEST(SkipCorrupt, SameBatchesForAnyNumberOfWorkers) {
  std::set<int64_t> bad;
  for (int64_t i = 0; i < 200; i += 7) bad.insert(i);
  auto ds = std::make_shared<BadSetDataset>(200, bad);
  std::vector<std::vector<int64_t>> runs;
  for (int w : {0, 1, 4}) {
    LoaderOptions o = opts(w);
    o.shuffle = true;
    o.seed = 5;
    Loader loader(ds, nullptr, o);
    runs.push_back(epoch_labels(loader, 3));
    EXPECT_EQ(loader.skipped_samples().size(), bad.size()) << w << " workers";
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
  for (int64_t label : runs[0]) EXPECT_EQ(bad.count(label - 1000), 0u) << label;
}

TEST(SkipCorrupt, WithoutTheOptionTheFirstBadSampleStopsTheEpoch) {
  auto ds = std::make_shared<BadSetDataset>(10, std::set<int64_t>{4});
  LoaderOptions o = opts(1);
  o.skip_corrupt = false;
  Loader loader(ds, nullptr, o);
  loader.begin_epoch(0);
  Batch b;
  try {
    while (loader.next(b)) {
    }
    FAIL() << "expected the corrupt sample to stop the epoch";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::format);
    EXPECT_NE(std::string(e.what()).find("file 4 is truncated"), std::string::npos) << e.what();
  }
}

TEST(SkipCorrupt, OtherErrorsAndLongRunsOfBadSamplesStillFail) {
  // An internal error is a bug, not a bad file: it is not skipped.
  {
    auto ds = std::make_shared<BadSetDataset>(10, std::set<int64_t>{1}, ErrorCode::internal);
    Loader loader(ds, nullptr, opts(0));
    loader.begin_epoch(0);
    Batch b;
    EXPECT_THROW(loader.next(b), Error);
  }
  // Every sample bad: the batch fails after the replacements run out instead of looping.
  {
    std::set<int64_t> all;
    for (int64_t i = 0; i < 100; ++i) all.insert(i);
    auto ds = std::make_shared<BadSetDataset>(100, all);
    Loader loader(ds, nullptr, opts(0));
    loader.begin_epoch(0);
    Batch b;
    try {
      loader.next(b);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::format);
      EXPECT_NE(std::string(e.what()).find("--skip-corrupt gave up: 64 samples in a row failed from index 0; the "
                                           "last, index 63: [test-image] file 63 is truncated"),
                std::string::npos)
          << e.what();
    }
  }
  // A dataset smaller than the run limit, all bad: said so.
  {
    auto ds = std::make_shared<BadSetDataset>(5, std::set<int64_t>{0, 1, 2, 3, 4});
    LoaderOptions o = opts(0);
    o.shuffle = false;
    Loader loader(ds, nullptr, o);
    loader.begin_epoch(0);
    Batch b;
    try {
      loader.next(b);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("5 samples in a row failed from index 0 (every sample); the last, index 4"),
                std::string::npos)
          << e.what();
    }
  }
}
