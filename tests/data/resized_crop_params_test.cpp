// RandomResizedCrop's box (torchvision's get_params formulas on tandem's Philox draws) and the
// keying of ImageTransform's draws by (seed, epoch, index).
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "tandem/data/image_transform.h"
#include "tandem/data/resized_crop_params.h"

using namespace tandem;
using namespace tandem::data;

namespace {

const std::array<double, 2> kScale{0.08, 1.0};
const std::array<double, 2> kRatio{3.0 / 4.0, 4.0 / 3.0};

CropBox draw(int64_t w, int64_t h, uint64_t i, std::array<double, 2> scale = kScale,
             std::array<double, 2> ratio = kRatio) {
  Philox rng(7, 3, static_cast<uint32_t>(i), 0);
  return random_resized_crop_box(w, h, scale, ratio, rng);
}

// Some real w' in [w - 0.5, w + 0.5] and h' in [h - 0.5, h + 0.5] (what round() came from)
// has w' * h' in the area range and w' / h' in the ratio range.
bool consistent(const CropBox& b, double area, std::array<double, 2> scale,
                std::array<double, 2> ratio) {
  const double w = static_cast<double>(b.w), h = static_cast<double>(b.h);
  return (w + 0.5) * (h + 0.5) >= scale[0] * area && (w - 0.5) * (h - 0.5) <= scale[1] * area &&
         (w + 0.5) / (h - 0.5) >= ratio[0] && (w - 0.5) / (h + 0.5) <= ratio[1];
}

}  // namespace

TEST(ResizedCropParams, BoxesAreValidAndWithinScaleAndRatio) {
  for (const auto [w, h] : {std::array<int64_t, 2>{500, 375}, {375, 500}, {64, 64}, {31, 17}}) {
    const double area = static_cast<double>(w * h);
    for (uint64_t i = 0; i < 3000; ++i) {
      const CropBox b = draw(w, h, i);
      ASSERT_TRUE(b.w > 0 && b.h > 0 && b.x >= 0 && b.y >= 0 && b.x + b.w <= w && b.y + b.h <= h)
          << w << "x" << h << " key " << i << ": " << b.x << "," << b.y << " " << b.w << "x" << b.h;
      // A fallback box (centred, whole width or height) is the only one allowed outside the ranges.
      const bool fallback = (b.w == w || b.h == h) && b.x == (w - b.w) / 2 && b.y == (h - b.h) / 2;
      EXPECT_TRUE(consistent(b, area, kScale, kRatio) || fallback) << w << "x" << h << " key " << i;
    }
  }
}

TEST(ResizedCropParams, RatioIsLogUniformAndAreaUniform) {
  // On a square image with area at most half of it every first try fits, so the box shows the
  // draws themselves. log(w / h) must be uniform on (log 3/4, log 4/3): four equal bins of
  // 25% each (a ratio drawn linearly puts 43% below 1 and misses the bins by ~7%).
  const std::array<double, 2> scale{0.08, 0.5};
  const int n = 8000;
  int bins[4] = {0, 0, 0, 0};
  double area_sum = 0;
  const double lo = std::log(kRatio[0]), hi = std::log(kRatio[1]);
  for (int i = 0; i < n; ++i) {
    const CropBox b = draw(1000, 1000, static_cast<uint64_t>(i), scale);
    const double t =
        (std::log(static_cast<double>(b.w) / static_cast<double>(b.h)) - lo) / (hi - lo);
    bins[std::clamp(static_cast<int>(t * 4), 0, 3)]++;
    area_sum += static_cast<double>(b.w * b.h) / 1e6;
  }
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(bins[k] / static_cast<double>(n), 0.25, 0.02) << "bin " << k;
  EXPECT_NEAR(area_sum / n, 0.29, 0.006);  // mean of U(0.08, 0.5)
}

TEST(ResizedCropParams, OffsetsCoverTheWholeRange) {
  // Fixed scale and ratio: w = h = round(sqrt(0.25 * 400 * 100)) = 100; x in [0, 300], y = 0.
  int64_t min_x = 1000, max_x = -1;
  for (uint64_t i = 0; i < 4000; ++i) {
    const CropBox b = draw(400, 100, i, {0.25, 0.25}, {1.0, 1.0});
    ASSERT_EQ(b.w, 100);
    ASSERT_EQ(b.h, 100);
    ASSERT_EQ(b.y, 0);
    min_x = std::min(min_x, b.x), max_x = std::max(max_x, b.x);
  }
  EXPECT_EQ(min_x, 0);
  EXPECT_EQ(max_x, 300);
}

TEST(ResizedCropParams, SizesFollowTorchvisionsRounding) {
  // w = round(sqrt(area * r)), h = round(sqrt(area / r)) with Python's round (half to even).
  EXPECT_EQ(draw(500, 375, 1, {0.5, 0.5}, {1.0, 1.0}).w, 306);  // sqrt(93750) = 306.19
  const CropBox wide = draw(500, 375, 1, {0.5, 0.5}, {4.0 / 3.0, 4.0 / 3.0});
  EXPECT_EQ(wide.w, 354);  // sqrt(125000) = 353.55
  EXPECT_EQ(wide.h, 265);  // sqrt(70312.5) = 265.17
  const CropBox half = draw(5, 5, 1, {0.25, 0.25}, {1.0, 1.0});
  EXPECT_EQ(half.w, 2);  // sqrt(6.25) = 2.5 rounds to even
  EXPECT_EQ(half.h, 2);
}

TEST(ResizedCropParams, FallsBackToTheClampedCentreCrop) {
  // 1000x10: every try needs h >= sqrt(800 * 3/4) > 10, so the fallback: h = 10,
  // w = round(10 * 4/3) = 13, centred with floor division.
  EXPECT_EQ(draw(1000, 10, 5), (CropBox{493, 0, 13, 10}));
  // 10x1000: w = 10, h = round(10 / (3/4)) = 13.
  EXPECT_EQ(draw(10, 1000, 5), (CropBox{0, 493, 10, 13}));
  // Nothing fits an area above the image's, and its ratio is in range: the whole image.
  EXPECT_EQ(draw(120, 100, 5, {1.5, 2.0}), (CropBox{0, 0, 120, 100}));
  EXPECT_EQ(draw(1, 1, 5), (CropBox{0, 0, 1, 1}));
}

TEST(ImageTransformParams, KeyedBySeedEpochIndexAndNotByThread) {
  const ImageTransform t{ImageTransformOptions{}};
  auto all = [&](uint64_t seed, uint64_t epoch) {
    std::vector<ImageSampleParams> v;
    for (int64_t i = 0; i < 200; ++i) v.push_back(t.params({seed, epoch, i}, 500, 375));
    return v;
  };
  auto same = [](const ImageSampleParams& a, const ImageSampleParams& b) {
    return a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h && a.flip == b.flip;
  };
  const std::vector<ImageSampleParams> base = all(1, 0);
  // Computed again, and on other threads in another order: identical.
  std::vector<ImageSampleParams> threaded(base.size());
  std::thread a([&] {
    for (int64_t i = 0; i < 200; i += 2)
      threaded[static_cast<size_t>(i)] = t.params({1, 0, i}, 500, 375);
  });
  std::thread b([&] {
    for (int64_t i = 199; i > 0; i -= 2)
      threaded[static_cast<size_t>(i)] = t.params({1, 0, i}, 500, 375);
  });
  a.join();
  b.join();
  const std::vector<ImageSampleParams> again = all(1, 0), other_epoch = all(1, 1),
                                       other_seed = all(2, 0);
  int differ_epoch = 0, differ_seed = 0, flips = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_TRUE(same(base[i], again[i]) && same(base[i], threaded[i])) << "index " << i;
    differ_epoch += !same(base[i], other_epoch[i]);
    differ_seed += !same(base[i], other_seed[i]);
    flips += base[i].flip;
  }
  EXPECT_GE(differ_epoch, 195);
  EXPECT_GE(differ_seed, 195);
  EXPECT_NEAR(flips, 100, 30);  // flip_p 0.5
  // Indices above 2^32 are keyed by all their bits.
  EXPECT_FALSE(
      same(t.params({1, 0, 5}, 500, 375), t.params({1, 0, 5 + (int64_t{1} << 32)}, 500, 375)));
}

TEST(ImageTransformParams, EvalIsTheCentreCropFootprint) {
  ImageTransformOptions o;
  o.mode = ImageTransformMode::eval;
  const ImageTransform t(o);
  // 500x375 -> Resize(256) -> 341x256 -> CenterCrop(224) at (58, 16).
  const ImageSampleParams p = t.params({9, 9, 9}, 500, 375);
  const double s = 500.0 / 341.0, sy = 375.0 / 256.0;
  EXPECT_DOUBLE_EQ(p.x, 58 * s);
  EXPECT_DOUBLE_EQ(p.y, 16 * sy);
  EXPECT_DOUBLE_EQ(p.w, 224 * s);
  EXPECT_DOUBLE_EQ(p.h, 224 * sy);
  EXPECT_FALSE(p.flip);
  EXPECT_FALSE(p.clip_to_box);
}
