// scripts/fmnist-to-cifar.py: Fashion-MNIST written as CIFAR-10 binary reads back through
// Cifar10 (and open_dataset's detection) with the real labels, each 28x28 image padded by 2
// black pixels on every side and replicated to 3 channels. Skipped without python3 or the data.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/temp_dir.h"
#include "data/io/file_read.h"
#include "tandem/data/cifar.h"
#include "tandem/data/mnist_like.h"
#include "tandem/data/open_dataset.h"

using namespace tandem;
using namespace tandem::testing;

TEST(FmnistToCifar, ScriptOutputMatchesTheIdxFiles) {
  if (!data::io::exists(std::string(data::kDefaultFashionMnistDir) + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "no Fashion-MNIST in " << data::kDefaultFashionMnistDir;
  if (std::system("python3 -c pass > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  TempDir dir;
  const std::string cmd = std::string("python3 ") + TANDEM_SOURCE_DIR + "/scripts/fmnist-to-cifar.py --limit 50 " +
                          dir.str() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(data::detect_format(dir.str()), data::DatasetFormat::cifar10);
  const data::MnistLike idx(data::kDefaultFashionMnistDir, "t10k");
  const data::Cifar10 cifar(dir.str(), data::Split::test);
  ASSERT_EQ(cifar.size(), 50);
  EXPECT_EQ(cifar.class_name(9), "Ankle boot");
  EXPECT_EQ(data::Cifar10(dir.str(), data::Split::train).size(), 50);  // 10 in each of 5 batches
  std::vector<uint8_t> scratch;
  for (int64_t i = 0; i < cifar.size(); ++i) {
    const data::Sample a = idx.get(i, scratch), b = cifar.get(i, scratch);
    ASSERT_EQ(a.label, b.label) << i;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) {
          const bool inside = y >= 2 && y < 30 && x >= 2 && x < 30;
          const uint8_t want = inside ? a.pixels[(y - 2) * 28 + (x - 2)] : 0;
          ASSERT_EQ(b.pixels[(c * 32 + y) * 32 + x], want) << i << " " << c << " " << y << " " << x;
        }
  }
}
