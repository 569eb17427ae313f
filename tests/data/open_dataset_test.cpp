// open_dataset: a folder of IDX files opens as MNIST-like train ("train-*") and test ("t10k-*")
// splits with their shape, classes and samples; a missing folder is an io error with the hint;
// every format is detected by content, an unknown folder is one error listing what was looked for.
#include "tandem/data/open_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data/dataset_test_util.h"
#include "data/temp_dir.h"
#include "tandem/data/packed.h"
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

namespace {
Bytes cifar_records(int n, int label_bytes) {
  Bytes out;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < label_bytes; ++k) out.push_back(static_cast<uint8_t>(i % 10));
    const Bytes px = pattern(3072, static_cast<uint32_t>(i));
    out.insert(out.end(), px.begin(), px.end());
  }
  return out;
}
}  // namespace

TEST(OpenDataset, DetectsEachFormatByContent) {
  TempDir idx, c10, c100, folder, nested;
  write_file(idx.file("t10k-images-idx3-ubyte"), idx_bytes({1, 2, 2}, pattern(4)));
  write_file(idx.file("t10k-labels-idx1-ubyte"), idx_bytes({1}, {3}));
  EXPECT_EQ(data::detect_format(idx.str()), data::DatasetFormat::fashion_mnist);
  EXPECT_EQ(data::open_dataset(idx.str(), data::Split::test)->class_name(3), "Dress");

  write_file(c10.file("test_batch.bin"), cifar_records(2, 1));
  EXPECT_EQ(data::detect_format(c10.str()), data::DatasetFormat::cifar10);
  EXPECT_EQ(data::open_dataset(c10.str(), data::Split::test)->size(), 2);
  {
    data::DatasetOptions coarse10;
    coarse10.label = data::CifarLabel::coarse;  // CIFAR-10 has no coarse labels: not silently fine
    const std::string m = error_of([&] { data::open_dataset(c10.str(), data::Split::test, coarse10); },
                                   ErrorCode::invalid_argument);
    EXPECT_NE(m.find("label coarse applies to CIFAR-100 binary files, but " + c10.str() + " is cifar10"),
              std::string::npos)
        << m;
  }

  write_file(c100.file("test.bin"), cifar_records(3, 2));
  EXPECT_EQ(data::detect_format(c100.str()), data::DatasetFormat::cifar100);
  data::DatasetOptions coarse;
  coarse.label = data::CifarLabel::coarse;
  EXPECT_EQ(data::open_dataset(c100.str(), data::Split::test, coarse)->num_classes(), 20);
  // A test.bin of CIFAR-10-sized records is not CIFAR-100.
  write_file(c100.file("test.bin"), cifar_records(3, 1));
  EXPECT_THROW(data::detect_format(c100.str()), Error);

  std::filesystem::create_directories(nested.file("cifar-10-batches-bin"));
  write_file(nested.file("cifar-10-batches-bin/test_batch.bin"), cifar_records(4, 1));
  EXPECT_EQ(data::detect_format(nested.str()), data::DatasetFormat::cifar10);
  EXPECT_EQ(data::open_dataset(nested.str(), data::Split::test)->size(), 4);

  std::filesystem::create_directories(folder.file("a"));
  std::filesystem::create_directories(folder.file("b"));
  write_file(folder.file("a/1.jpg"), fake_jpeg(1));
  write_file(folder.file("b/2.png"), fake_png(2));
  EXPECT_EQ(data::detect_format(folder.str()), data::DatasetFormat::folder);
  data::DatasetOptions split;
  split.val_split = 0.5;
  EXPECT_EQ(data::open_dataset(folder.str(), data::Split::test, split)->size(), 2);  // round(0.5) = 1 per class
  // val_split on a format that has no use for it.
  error_of([&] { data::open_dataset(c10.str(), data::Split::test, split); }, ErrorCode::invalid_argument);

  const auto train = data::open_dataset(folder.str(), data::Split::train);
  data::write_packed({{"train", train.get()}}, folder.file("packed"));
  EXPECT_EQ(data::detect_format(folder.file("packed")), data::DatasetFormat::packed);
  EXPECT_EQ(data::open_dataset(folder.file("packed"), data::Split::train)->class_name(1), "b");
}

TEST(OpenDataset, UnknownFolderListsWhatWasLookedFor) {
  TempDir dir;
  write_file(dir.file("notes.txt"), {1});
  const std::string msg = error_of([&] { data::open_dataset(dir.str(), data::Split::train); }, ErrorCode::format);
  for (const char* what : {"manifest.json", "train-images-idx3-ubyte", "data_batch_1.bin", "train.bin", "class folders"})
    EXPECT_NE(msg.find(what), std::string::npos) << what << " in " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(OpenDataset, ExplicitFormatAndNames) {
  TempDir dir;
  write_file(dir.file("test_batch.bin"), cifar_records(1, 1));
  data::DatasetOptions opt;
  opt.format = data::DatasetFormat::cifar100;  // not what is there: the reader says so
  error_of([&] { data::open_dataset(dir.str(), data::Split::test, opt); }, ErrorCode::io);
  for (const char* name : {"auto", "fashion-mnist", "cifar10", "cifar100", "folder", "packed"})
    EXPECT_STREQ(data::format_name(data::parse_dataset_format(name)), name);
  error_of([&] { data::parse_dataset_format("imagenet"); }, ErrorCode::invalid_argument);
  EXPECT_EQ(data::parse_cifar_label("coarse"), data::CifarLabel::coarse);
  error_of([&] { data::parse_cifar_label("medium"); }, ErrorCode::invalid_argument);
}
