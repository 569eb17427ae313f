// SyntheticDataset: each image carries its class as a bright bar at row 2c + 4 over noise
// below 60, every class occurs, the same seed gives the same data, and bad input is refused.
#include "tandem/data/synthetic_dataset.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

TEST(SyntheticDataset, BarRowIsTheLabelAndSeedsRepeat) {
  SyntheticDataset a(500, 9), b(500, 9), c(500, 10);
  std::vector<uint8_t> scratch;
  int counts[10] = {};
  bool differs = false;
  for (int64_t i = 0; i < a.size(); ++i) {
    const Sample s = a.get(i, scratch);
    ASSERT_GE(s.label, 0);
    ASSERT_LT(s.label, a.num_classes());
    ++counts[s.label];
    for (int row = 0; row < 28; ++row) {
      const bool bar = row == 2 * s.label + 4;
      for (int x = 0; x < 28; ++x) {
        const uint8_t v = s.pixels[row * 28 + x];
        ASSERT_TRUE(bar ? v == 255 : v < 60) << "sample " << i << " row " << row;
      }
    }
    const Sample t = b.get(i, scratch);
    EXPECT_EQ(t.label, s.label);
    EXPECT_EQ(std::memcmp(t.pixels, s.pixels, 784), 0);
    differs |= std::memcmp(c.get(i, scratch).pixels, s.pixels, 784) != 0;
  }
  for (int k = 0; k < 10; ++k) EXPECT_GT(counts[k], 20) << "class " << k;
  EXPECT_TRUE(differs);
  EXPECT_EQ(a.dims(), (ImageDims{1, 28, 28}));
  EXPECT_EQ(a.num_classes(), 10);
}

TEST(SyntheticDataset, RefusesBadInput) {
  EXPECT_THROW(SyntheticDataset(-1, 0), Error);
  EXPECT_THROW(SyntheticDataset(4, 0, std::chrono::microseconds(-1)), Error);
  SyntheticDataset d(4, 0);
  std::vector<uint8_t> scratch;
  try {
    d.get(4, scratch);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[synthetic-dataset] index 4 out of range [0, 4)"), std::string::npos);
  }
}
