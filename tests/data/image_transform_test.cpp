// ImageTransform on raw samples: shapes, options, normalisation, flip, gray input, and the
// training path against a float64 reference of crop + antialiased resize + flip + Normalize.
#include "tandem/data/image_transform.h"

#include <gtest/gtest.h>

#include <cmath>

#include "image_test_util.h"
#include "tandem/error.h"

using namespace tandem;
using namespace tandem::data;
using tandem::testing::formula_chw;
using tandem::testing::formula_hwc;
using tandem::testing::reference_resample;

namespace {

ImageTransformOptions small(ImageTransformMode mode, int64_t size) {
  ImageTransformOptions o;
  o.mode = mode;
  o.size = size;
  o.resize_size = size + size / 7;
  return o;
}

void expect_invalid(const ImageTransformOptions& o, const char* what) {
  try {
    ImageTransform t(o);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << what;
    EXPECT_NE(std::string(e.what()).find("[image_transform]"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ImageTransform, OutputDimsAreThreeBySizeBySize) {
  const ImageTransform t{ImageTransformOptions{}};
  EXPECT_EQ(t.output_dims({3, 375, 500}), (ImageDims{3, 224, 224}));
  EXPECT_EQ(t.output_dims({1, 28, 28}), (ImageDims{3, 224, 224}));
  EXPECT_EQ(t.output_dims({3, 0, 0}), (ImageDims{3, 224, 224}));  // a folder of varying sizes
  EXPECT_THROW(t.output_dims({4, 32, 32}), Error);
  EXPECT_THROW(t.output_dims({2, 32, 32}), Error);
}

TEST(ImageTransform, RejectsBadOptions) {
  ImageTransformOptions o;
  o.size = 0;
  expect_invalid(o, "size 0");
  o = {};
  o.size = -3;
  expect_invalid(o, "size < 0");
  o = {};
  o.resize_size = 200;
  expect_invalid(o, "resize_size < size");
  o = {};
  o.scale = {0.9, 0.1};
  expect_invalid(o, "scale out of order");
  o = {};
  o.scale = {0.0, 1.0};
  expect_invalid(o, "scale 0");
  o = {};
  o.ratio = {4.0 / 3.0, 3.0 / 4.0};
  expect_invalid(o, "ratio out of order");
  o = {};
  o.ratio = {-1.0, 2.0};
  expect_invalid(o, "ratio < 0");
  o = {};
  o.flip_p = 1.5f;
  expect_invalid(o, "flip_p > 1");
  o = {};
  o.mean = {0.5f, 0.5f};
  o.std = {0.5f, 0.5f};
  expect_invalid(o, "two channels");
  o = {};
  o.std = {0.2f};
  expect_invalid(o, "mean and std of different sizes");
  o = {};
  o.mean.clear();
  o.std.clear();
  expect_invalid(o, "empty mean");
  o = {};
  o.std = {0.2f, 0.0f, 0.2f};
  expect_invalid(o, "std 0");
  o = {};
  o.mean = {0.1f, NAN, 0.1f};
  expect_invalid(o, "mean NaN");
}

TEST(ImageTransform, RejectsBadRawSamples) {
  const ImageTransform t{ImageTransformOptions{}};
  std::vector<uint8_t> px(4 * 8 * 8);
  std::vector<float> out(3 * 224 * 224);
  EXPECT_THROW(t.apply(px.data(), {4, 8, 8}, out.data(), {}), Error);
  EXPECT_THROW(t.apply(px.data(), {3, 0, 8}, out.data(), {}), Error);
  TransformScratch scratch;
  Sample s;
  s.pixels = px.data();
  EXPECT_THROW(t.apply_sample(s, {2, 8, 8}, out.data(), {}, scratch), Error);
}

TEST(ImageTransform, NormalizesWithImageNetStatisticsByDefault) {
  // A constant image resamples to the constant itself: out = (v / 255 - mean[c]) / std[c].
  const ImageTransform t{small(ImageTransformMode::train, 9)};
  const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
  const uint8_t levels[3] = {0, 200, 255};
  std::vector<uint8_t> px(3 * 20 * 30);
  for (int c = 0; c < 3; ++c)
    std::fill(px.begin() + c * 600, px.begin() + (c + 1) * 600, levels[c]);
  std::vector<float> out(3 * 81);
  t.apply(px.data(), {3, 20, 30}, out.data(), {1, 2, 3});
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 81; ++i)
      EXPECT_NEAR(out[static_cast<size_t>(c * 81 + i)], (levels[c] / 255.0 - mean[c]) / sd[c], 2e-6)
          << c;
}

TEST(ImageTransform, TrainMatchesFloat64CropResizeFlipNormalize) {
  // Non-square RGB planes (a CIFAR-like raw sample, and a larger one that is shrunk): for each
  // key, params() gives the box and flip; the output must equal the float64 reference.
  for (const auto [w, h, size] : {std::array<int64_t, 3>{32, 32, 24}, {61, 45, 16}, {45, 61, 40}}) {
    ImageTransformOptions o = small(ImageTransformMode::train, size);
    o.mean = {0.5f, 0.25f, 0.125f};
    o.std = {0.5f, 0.25f, 2.0f};
    const ImageTransform t(o);
    const std::vector<uint8_t> chw = formula_chw(2, w, h), hwc = formula_hwc(2, w, h);
    std::vector<float> out(static_cast<size_t>(3 * size * size));
    int flipped = 0;
    for (int64_t k = 0; k < 12; ++k) {
      const SampleKey key{11, 1, k};
      const ImageSampleParams p = t.params(key, w, h);
      flipped += p.flip;
      t.apply(chw.data(), {3, h, w}, out.data(), key);
      const auto bx = static_cast<int64_t>(p.x), by = static_cast<int64_t>(p.y);
      const auto bw = static_cast<int64_t>(p.w), bh = static_cast<int64_t>(p.h);
      const std::vector<double> ref =
          reference_resample(hwc, w, bx, by, bw, bh, 0.0, 0.0, p.w / size, p.h / size, size, size);
      double err = 0;
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < size; ++i)
          for (int64_t j = 0; j < size; ++j) {
            const int64_t sj = p.flip ? size - 1 - j : j;
            const double want =
                (ref[static_cast<size_t>((c * size + i) * size + sj)] / 255.0 - o.mean[c]) /
                o.std[c];
            err =
                std::max(err, std::abs(out[static_cast<size_t>((c * size + i) * size + j)] - want));
          }
      EXPECT_LT(err, 2e-5) << w << "x" << h << " key " << k;
    }
    EXPECT_GT(flipped, 0);
    EXPECT_LT(flipped, 12);
  }
}

TEST(ImageTransform, FlipMirrorsTheWidthAxis) {
  ImageTransformOptions o = small(ImageTransformMode::train, 20);
  o.flip_p = 0.0f;
  const ImageTransform plain(o);
  o.flip_p = 1.0f;
  const ImageTransform mirrored(o);
  const std::vector<uint8_t> chw = formula_chw(1, 37, 23);
  std::vector<float> a(3 * 400), b(3 * 400);
  const SampleKey key{5, 0, 42};
  // The crop is drawn first, so both see the same box.
  const ImageSampleParams pa = plain.params(key, 37, 23), pb = mirrored.params(key, 37, 23);
  ASSERT_TRUE(pa.x == pb.x && pa.y == pb.y && pa.w == pb.w && pa.h == pb.h && !pa.flip && pb.flip);
  plain.apply(chw.data(), {3, 23, 37}, a.data(), key);
  mirrored.apply(chw.data(), {3, 23, 37}, b.data(), key);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 20; ++i)
      for (int j = 0; j < 20; ++j)
        ASSERT_EQ(b[static_cast<size_t>(c * 400 + i * 20 + j)],
                  a[static_cast<size_t>(c * 400 + i * 20 + 19 - j)]);
  // Not symmetric itself, so the test can fail.
  EXPECT_NE(a[0], a[19]);
}

TEST(ImageTransform, GrayIsReplicatedToThreeChannels) {
  ImageTransformOptions o = small(ImageTransformMode::eval, 16);
  o.mean = {0.5f};
  o.std = {0.25f};
  const ImageTransform t(o);
  const std::vector<uint8_t> rgb = formula_chw(0, 28, 28);
  const std::vector<uint8_t> gray(rgb.begin(), rgb.begin() + 28 * 28);  // the R plane
  std::vector<uint8_t> three(3 * 28 * 28);
  for (int c = 0; c < 3; ++c) std::copy(gray.begin(), gray.end(), three.begin() + c * 28 * 28);
  std::vector<float> a(3 * 256), b(3 * 256);
  t.apply(gray.data(), {1, 28, 28}, a.data(), {});
  t.apply(three.data(), {3, 28, 28}, b.data(), {});
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
}

TEST(ImageTransform, ApplySampleOnRawEqualsApplyAndReusesScratch) {
  const ImageTransform t{small(ImageTransformMode::train, 24)};
  const std::vector<uint8_t> chw = formula_chw(2, 32, 32);
  TransformScratch scratch;
  Sample s;
  s.pixels = chw.data();
  std::vector<float> a(3 * 576), b(3 * 576);
  t.apply_sample(s, {3, 32, 32}, a.data(), {3, 4, 5}, scratch);
  for (int64_t k = 0; k < 50; ++k) t.apply_sample(s, {3, 32, 32}, b.data(), {3, 4, k}, scratch);
  // Grown to the largest need of these keys: later samples of the same size reuse the memory.
  const uint8_t* bytes = scratch.bytes2.data();
  const float* floats = scratch.floats.data();
  for (int64_t k = 50; k < 100; ++k) t.apply_sample(s, {3, 32, 32}, b.data(), {3, 4, k}, scratch);
  EXPECT_EQ(scratch.bytes2.data(), bytes);
  EXPECT_EQ(scratch.floats.data(), floats);
  t.apply_sample(s, {3, 32, 32}, b.data(), {3, 4, 5}, scratch);
  EXPECT_EQ(a, b);
}
