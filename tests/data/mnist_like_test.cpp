#include "tandem/data/mnist_like.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "data/temp_dir.h"

using namespace tandem;
using namespace tandem::testing;
using tandem::data::MnistLike;

namespace {

Error load_error(const std::string& dir, const std::string& split = "train") {
  try {
    MnistLike ds(dir, split);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "MnistLike(" << dir << ") did not throw";
  return Error(ErrorCode::internal, "");
}

bool contains(const Error& e, const std::string& needle) {
  return std::string(e.what()).find(needle) != std::string::npos;
}

}  // namespace

TEST(MnistLike, LoadsGzipImagesAndRawLabels) {
  TempDir dir;
  const Bytes pixels = pattern(5 * 4 * 3);
  write_file(dir.file("train-images-idx3-ubyte.gz"), gzip(idx_bytes({5, 4, 3}, pixels)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5}, {3, 1, 4, 1, 5}));
  MnistLike ds(dir.str(), "train");
  EXPECT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.dims(), (data::ImageDims{1, 4, 3}));
  std::vector<uint8_t> scratch;
  const data::Sample s = ds.get(2, scratch);
  EXPECT_EQ(s.label, 4);
  for (int k = 0; k < 12; ++k) EXPECT_EQ(s.pixels[k], pixels[24 + static_cast<size_t>(k)]);
  EXPECT_THROW(ds.get(5, scratch), Error);
}

TEST(MnistLike, CountMismatchNamesBothFilesAndCounts) {
  TempDir dir;
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes({5, 2, 2}, pattern(20)));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({4}, {0, 1, 2, 3}));
  const Error e = load_error(dir.str(), "t10k");
  EXPECT_EQ(e.code(), ErrorCode::format);
  EXPECT_TRUE(contains(e, dir.file("t10k-images-idx3-ubyte") + " holds 5 images")) << e.what();
  EXPECT_TRUE(contains(e, dir.file("t10k-labels-idx1-ubyte") + " holds 4 labels")) << e.what();
}

TEST(MnistLike, RejectsBadRanksAndLabels) {
  TempDir dir;
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({5, 4}, pattern(20)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5}, {0, 1, 2, 3, 4}));
  Error e = load_error(dir.str());
  EXPECT_EQ(e.code(), ErrorCode::format);
  EXPECT_TRUE(contains(e, "expected rank 3 (magic 0x00000803), found rank 2 (magic 0x00000802)")) << e.what();
  EXPECT_TRUE(contains(e, dir.file("train-images-idx3-ubyte"))) << e.what();

  // Rank 4 is refused before its dimensions are read as sizes (a 4th dimension would
  // otherwise claim gigabytes of payload).
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({5, 2, 2, 1}, pattern(20)));
  e = load_error(dir.str());
  EXPECT_TRUE(contains(e, "expected rank 3 (magic 0x00000803), found rank 4 (magic 0x00000804)")) << e.what();

  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({5, 2, 2}, pattern(20)));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5, 1}, {0, 1, 2, 3, 4}));
  e = load_error(dir.str());
  EXPECT_TRUE(contains(e, dir.file("train-labels-idx1-ubyte") + ": expected rank 1 (magic 0x00000801), found rank 2"))
      << e.what();

  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5}, {0, 9, 2, 10, 11}));
  e = load_error(dir.str());
  EXPECT_EQ(e.code(), ErrorCode::format);
  EXPECT_TRUE(contains(e, dir.file("train-labels-idx1-ubyte") + ": expected labels in [0, 10), found 10 at index 3"))
      << e.what();
}

TEST(MnistLike, MissingDirectoryOrFileIsAnIoErrorWithAHint) {
  TempDir dir;
  Error e = load_error(dir.file("does-not-exist"));
  EXPECT_EQ(e.code(), ErrorCode::io);
  EXPECT_TRUE(contains(e, "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR"))
      << e.what();
  EXPECT_TRUE(contains(e, dir.file("does-not-exist"))) << e.what();

  write_file(dir.file("train-images-idx3-ubyte.gz"), gzip(idx_bytes({1, 2, 2}, pattern(4))));
  e = load_error(dir.str());
  EXPECT_EQ(e.code(), ErrorCode::io);
  EXPECT_TRUE(contains(e, "expected train-labels-idx1-ubyte.gz or train-labels-idx1-ubyte")) << e.what();
}

TEST(MnistLike, RealFashionMnist) {
  const std::string dir = data::kDefaultFashionMnistDir;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << dir << " not present (apt-get install dataset-fashion-mnist)";
  MnistLike train(dir, "train"), test(dir, "t10k");
  EXPECT_EQ(train.images().shape(), (Shape{60000, 28, 28}));
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.images().shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(test.size(), 10000);
  // Known values (read with numpy from the same files).
  std::vector<uint8_t> scratch;
  const std::vector<int64_t> train_first{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, test_first{9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(train.get(i, scratch).label, train_first[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(test.get(i, scratch).label, test_first[static_cast<size_t>(i)]) << i;
  }
  EXPECT_EQ(train.get(59999, scratch).label, 5);
  EXPECT_EQ(test.get(9999, scratch).label, 5);
  EXPECT_EQ(train.get(0, scratch).pixels[14 * 28 + 14], 217);
  int64_t sum = 0;
  for (int k = 0; k < 784; ++k) sum += train.get(0, scratch).pixels[k];
  EXPECT_EQ(sum, 76247);
  // Balanced classes: 6000 per class in train.
  std::vector<int64_t> count(10, 0);
  for (int64_t i = 0; i < train.size(); ++i) ++count[static_cast<size_t>(train.get(i, scratch).label)];
  for (int64_t c : count) EXPECT_EQ(c, 6000);
}

TEST(MnistLike, RejectsEmptySplitsNamingTheFile) {
  TempDir dir;
  write_file(dir.file("t10k-images-idx3-ubyte"), idx_bytes({0, 28, 28}, {}));
  write_file(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({0}, {}));
  const Error e = load_error(dir.str(), "t10k");
  EXPECT_EQ(e.code(), ErrorCode::format);
  EXPECT_TRUE(contains(e, dir.file("t10k-images-idx3-ubyte") + ": expected at least one image")) << e.what();
}
