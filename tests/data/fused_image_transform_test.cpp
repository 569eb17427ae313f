#include "tandem/data/fused_image_transform.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// float64 reference: pad with zeros (in [0, 1] units), crop at (dy, dx), flip W, normalize.
std::vector<double> reference(const std::vector<uint8_t>& in, const ImageDims& d, int64_t pad, int64_t ch, int64_t cw,
                              const AugmentParams& p, const std::vector<double>& mean, const std::vector<double>& std) {
  std::vector<double> out(static_cast<size_t>(d.channels * ch * cw));
  for (int64_t c = 0; c < d.channels; ++c) {
    const double m = mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(c)];
    const double s = std.size() == 1 ? std[0] : std[static_cast<size_t>(c)];
    for (int64_t y = 0; y < ch; ++y)
      for (int64_t x = 0; x < cw; ++x) {
        const int64_t cx = p.flip ? cw - 1 - x : x;  // column of the crop this output shows
        const int64_t sy = y + p.dy - pad, sx = cx + p.dx - pad;
        double v = 0.0;
        if (sy >= 0 && sy < d.height && sx >= 0 && sx < d.width)
          v = in[static_cast<size_t>((c * d.height + sy) * d.width + sx)] / 255.0;
        out[static_cast<size_t>((c * ch + y) * cw + x)] = (v - m) / s;
      }
  }
  return out;
}

std::vector<uint8_t> random_image(const ImageDims& d, uint32_t salt) {
  std::vector<uint8_t> v(static_cast<size_t>(d.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + salt * 97u) >> 11);
  return v;
}

}  // namespace

TEST(FusedImageTransform, NormalizationMatchesPyTorchBitForBit) {
  // tests/golden/fmnist_normalize.txt: scripts/golden_fmnist_normalize.py (torch 1.13).
  std::ifstream f(std::string(TANDEM_SOURCE_DIR) + "/tests/golden/fmnist_normalize.txt");
  ASSERT_TRUE(f) << "missing golden file";
  FusedImageTransform t(FusedImageTransform::fashion_mnist_train());
  std::string line;
  int checked = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream is(line);
    std::string key;
    std::string hex;
    is >> key >> hex;
    const uint32_t want = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
    if (key == "pad") {
      EXPECT_EQ(bits(t.normalized(0, 0)), want) << "padded pixel";
    } else {
      const int v = std::stoi(key);
      EXPECT_EQ(bits(t.normalized(0, static_cast<uint8_t>(v))), want) << "value " << v;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 257);
}

TEST(FusedImageTransform, MatchesFloat64ReferenceOnNonSquareMultiChannelImages) {
  const ImageDims d{3, 5, 7};
  FusedImageTransformOptions o;
  o.pad = 3;
  o.crop_height = 4;
  o.crop_width = 6;
  o.flip_p = 0.5f;
  o.mean = {0.1f, 0.5f, 0.9f};
  o.std = {0.2f, 0.25f, 2.0f};
  FusedImageTransform t(o);
  ASSERT_EQ(t.output_dims(d), (ImageDims{3, 4, 6}));
  const std::vector<double> mean{0.1f, 0.5f, 0.9f}, std{0.2f, 0.25f, 2.0f};
  std::vector<float> out(3 * 4 * 6);
  for (int64_t i = 0; i < 300; ++i) {
    const auto img = random_image(d, static_cast<uint32_t>(i));
    const SampleKey key{11, 3, i};
    t.apply(img.data(), d, out.data(), key);
    const AugmentParams p = t.params(key, d);
    ASSERT_GE(p.dy, 0);
    ASSERT_LE(p.dy, 5 + 6 - 4);
    ASSERT_GE(p.dx, 0);
    ASSERT_LE(p.dx, 7 + 6 - 6);
    // Exactly the reported (dy, dx, flip) among all candidates reproduces the output.
    int matches = 0;
    for (int64_t dy = 0; dy <= 7; ++dy)
      for (int64_t dx = 0; dx <= 7; ++dx)
        for (bool flip : {false, true}) {
          const auto ref = reference(img, d, 3, 4, 6, {dy, dx, flip}, mean, std);
          bool same = true;
          for (size_t k = 0; k < ref.size() && same; ++k) same = std::abs(ref[k] - out[k]) <= 1e-5 * (1 + std::abs(ref[k]));
          if (same) {
            ++matches;
            EXPECT_TRUE(dy == p.dy && dx == p.dx && flip == p.flip) << "sample " << i;
          }
        }
    EXPECT_EQ(matches, 1) << "sample " << i;
  }
}

TEST(FusedImageTransform, FlipReversesTheWidthAxis) {
  const ImageDims d{1, 3, 5};
  std::vector<uint8_t> img(15);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x) img[static_cast<size_t>(y * 5 + x)] = static_cast<uint8_t>(10 * y + x);
  FusedImageTransformOptions o;
  o.flip_p = 1.0f;
  FusedImageTransform t(o);
  std::vector<float> out(15);
  t.apply(img.data(), d, out.data(), {0, 0, 0});
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x)
      EXPECT_EQ(out[static_cast<size_t>(y * 5 + x)], static_cast<float>(10 * y + (4 - x)) / 255.0f) << y << "," << x;
}

TEST(FusedImageTransform, PaddedAreaIsNormalizedZero) {
  const ImageDims d{1, 28, 28};
  const std::vector<uint8_t> white(784, 255);
  FusedImageTransform t(FusedImageTransform::fashion_mnist_train());
  const float pad_value = (0.0f - 0.2860f) / 0.3530f, white_value = (1.0f - 0.2860f) / 0.3530f;
  std::vector<float> out(784);
  for (int64_t i = 0; i < 200; ++i) {
    const SampleKey key{1, 0, i};
    t.apply(white.data(), d, out.data(), key);
    const AugmentParams p = t.params(key, d);
    // Rows/columns from the padding: |dy - 2| of them on one side, same for columns.
    const int64_t pad_rows = std::abs(p.dy - 2), pad_cols = std::abs(p.dx - 2);
    int64_t n_pad = 0;
    for (float v : out) {
      ASSERT_TRUE(v == pad_value || v == white_value) << v;
      n_pad += v == pad_value;
    }
    EXPECT_EQ(n_pad, 784 - (28 - pad_rows) * (28 - pad_cols)) << "dy " << p.dy << " dx " << p.dx;
    // The padded rows are at the top when dy < 2 and at the bottom when dy > 2.
    const int64_t row = p.dy < 2 ? 0 : 27;
    if (pad_rows) {
      EXPECT_EQ(out[static_cast<size_t>(row * 28 + 13)], pad_value);
    }
  }
}

TEST(FusedImageTransform, DrawsAreUniformAndKeyedBySeedEpochIndex) {
  FusedImageTransform t(FusedImageTransform::fashion_mnist_train());
  const ImageDims d{1, 28, 28};
  int flips = 0;
  std::vector<int> dy_count(5, 0), dx_count(5, 0);
  const int n = 20000;
  for (int64_t i = 0; i < n; ++i) {
    const AugmentParams p = t.params({7, 2, i}, d);
    flips += p.flip;
    ++dy_count[static_cast<size_t>(p.dy)];
    ++dx_count[static_cast<size_t>(p.dx)];
  }
  EXPECT_GT(flips, n * 0.48);  // about half; sd 0.35%
  EXPECT_LT(flips, n * 0.52);
  for (int k = 0; k < 5; ++k) {
    EXPECT_GT(dy_count[static_cast<size_t>(k)], n * 0.18) << k;
    EXPECT_LT(dy_count[static_cast<size_t>(k)], n * 0.22) << k;
    EXPECT_GT(dx_count[static_cast<size_t>(k)], n * 0.18) << k;
    EXPECT_LT(dx_count[static_cast<size_t>(k)], n * 0.22) << k;
  }
  // Same key, same draw; another epoch or seed changes the draws of most samples.
  int same_epoch = 0, same_seed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const AugmentParams a = t.params({7, 2, i}, d), b = t.params({7, 2, i}, d);
    ASSERT_TRUE(a.dy == b.dy && a.dx == b.dx && a.flip == b.flip);
    const AugmentParams e = t.params({7, 3, i}, d), s = t.params({8, 2, i}, d);
    same_epoch += a.dy == e.dy && a.dx == e.dx && a.flip == e.flip;
    same_seed += a.dy == s.dy && a.dx == s.dx && a.flip == s.flip;
  }
  EXPECT_LT(same_epoch, 100);  // 1/50 expected by chance
  EXPECT_LT(same_seed, 100);
}

TEST(FusedImageTransform, EvalIsNormalizeOnly) {
  FusedImageTransform t(FusedImageTransform::fashion_mnist_eval());
  const ImageDims d{1, 28, 28};
  const auto img = random_image(d, 3);
  std::vector<float> out(784);
  t.apply(img.data(), d, out.data(), {5, 5, 5});
  for (size_t k = 0; k < 784; ++k) EXPECT_EQ(out[k], (static_cast<float>(img[k]) / 255.0f - 0.2860f) / 0.3530f);
}

TEST(FusedImageTransform, RejectsBadOptions) {
  FusedImageTransformOptions o;
  o.pad = -1;
  EXPECT_THROW(FusedImageTransform{o}, Error);
  o = {};
  o.flip_p = 1.5f;
  EXPECT_THROW(FusedImageTransform{o}, Error);
  o = {};
  o.std = {0.0f};
  EXPECT_THROW(FusedImageTransform{o}, Error);
  o = {};
  o.mean = {0.1f, 0.2f};
  EXPECT_THROW(FusedImageTransform{o}, Error);  // std has one value
  o.std = {1.0f, 1.0f};
  FusedImageTransform two(o);
  EXPECT_THROW(two.output_dims({3, 4, 4}), Error);  // 2 means for 3 channels
  o = {};
  o.pad = 1;
  o.crop_height = 7;
  FusedImageTransform big(o);
  EXPECT_THROW(big.output_dims({1, 4, 4}), Error);  // crop 7 > padded 6
  EXPECT_EQ(big.output_dims({1, 5, 4}), (ImageDims{1, 7, 4}));
}
