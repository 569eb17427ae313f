// open_dataset: a folder of IDX files opens as MNIST-like train ("train-*") and test ("t10k-*")
// splits with their shape, classes and samples; a missing folder is an io error with the hint.
#include "tandem/data/open_dataset.h"

#include <gtest/gtest.h>

#include <string>

#include "data/temp_dir.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::testing;

TEST(OpenDataset, IdxFolderOpensBothSplits) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte.gz"), gzip(idx_bytes({3, 5, 6}, pattern(90))));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({3}, {9, 0, 4}));
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes({2, 5, 6}, pattern(60, 2)));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({2}, {7, 1}));
  const auto train = data::open_dataset(dir.str(), data::Split::train);
  const auto test = data::open_dataset(dir.str(), data::Split::test);
  EXPECT_EQ(train->size(), 3);
  EXPECT_EQ(test->size(), 2);
  EXPECT_EQ(train->dims(), (data::ImageDims{1, 5, 6}));
  EXPECT_EQ(test->dims(), (data::ImageDims{1, 5, 6}));
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_EQ(test->num_classes(), 10);
  std::vector<uint8_t> scratch;
  EXPECT_EQ(train->get(2, scratch).label, 4);
  const data::Sample s = test->get(1, scratch);
  EXPECT_EQ(s.label, 1);
  const Bytes px = pattern(60, 2);
  for (int k = 0; k < 30; ++k) EXPECT_EQ(s.pixels[k], px[30 + static_cast<size_t>(k)]) << k;
  EXPECT_STREQ(data::split_name(data::Split::train), "train");
  EXPECT_STREQ(data::split_name(data::Split::test), "test");
}

TEST(OpenDataset, MissingFolderIsAnIoErrorWithTheInstallHint) {
  try {
    data::open_dataset("/nonexistent/tandem-data", data::Split::test);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
  }
}
